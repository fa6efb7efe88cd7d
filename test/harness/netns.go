package harness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// NetNS is a network namespace that a test created, joined to the host by a
// veth pair, with addresses in 198.18.X.0/24 (RFC 2544's benchmarking
// range): real, routable only into the namespace, and owned by the test.
// Tests that need addresses the API server accepts in EndpointSlices (it
// refuses loopback) use these; nothing listens on them.
type NetNS struct {
	Name  string
	Host  netip.Addr   // the host side of the veth, 198.18.X.1
	Addrs []netip.Addr // the namespace side: 198.18.X.10, .11, ...
}

// NewNetNS creates a network namespace with n addresses, removed when the
// test ends. Without root or without the ip command the test is skipped
// (through Missing, which fails instead under FLEETDNS_REQUIRE_ALL=1).
func NewNetNS(t testing.TB, n int) *NetNS {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, "network namespace: not root")
	}
	ipcmd, err := exec.LookPath("ip")
	if err != nil {
		Missing(t, "network namespace: no ip command")
	}
	if n < 1 || n > 200 {
		t.Fatalf("NewNetNS: %d addresses, want 1 to 200", n)
	}
	run := func(args ...string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, ipcmd, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	x := freeOctet(t, ipcmd)
	tag := fmt.Sprintf("%d%04x", os.Getpid()%10000, rand.IntN(1<<16))
	ns := &NetNS{Name: "fleetdns-" + tag, Host: netip.AddrFrom4([4]byte{198, 18, byte(x), 1})}
	hostIf, nsIf := "fdh"+tag, "fdn"+tag
	if len(hostIf) > 15 {
		hostIf, nsIf = hostIf[:15], nsIf[:15]
	}
	if err := run("netns", "add", ns.Name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		run("link", "del", hostIf)
		if err := run("netns", "del", ns.Name); err != nil {
			t.Logf("cleanup: %v", err)
		}
	})
	steps := [][]string{
		{"link", "add", hostIf, "type", "veth", "peer", "name", nsIf},
		{"link", "set", nsIf, "netns", ns.Name},
		{"addr", "add", ns.Host.String() + "/24", "dev", hostIf},
		{"link", "set", hostIf, "up"},
		{"-n", ns.Name, "link", "set", "lo", "up"},
		{"-n", ns.Name, "link", "set", nsIf, "up"},
	}
	for i := range n {
		a := netip.AddrFrom4([4]byte{198, 18, byte(x), byte(10 + i)})
		ns.Addrs = append(ns.Addrs, a)
		steps = append(steps, []string{"-n", ns.Name, "addr", "add", a.String() + "/24", "dev", nsIf})
	}
	for _, s := range steps {
		if err := run(s...); err != nil {
			t.Fatal(err)
		}
	}
	return ns
}

// freeOctet returns a third octet X that no interface of this host uses in
// 198.18.X.0/24: test packages run in parallel, and each takes a /24 of its
// own.
func freeOctet(t testing.TB, ipcmd string) int {
	t.Helper()
	for range 50 {
		x := rand.IntN(256)
		out, err := exec.Command(ipcmd, "-o", "-4", "addr", "show").Output()
		if err != nil {
			t.Fatalf("ip addr show: %v", err)
		}
		if !strings.Contains(string(out), fmt.Sprintf(" 198.18.%d.", x)) {
			return x
		}
	}
	t.Fatal("no free 198.18.X.0/24 after 50 tries")
	return 0
}

// NewLAN creates n network namespaces with one address each on one
// 198.18.X.0/24, joined by a bridge on the host (198.18.X.1), so that they
// reach each other and the host without routing: as clusters on one
// network, between which a test can cut single links with a firewall rule
// inside a namespace. Removed when the test ends; skipped as NewNetNS is.
func NewLAN(t testing.TB, n int) []*NetNS {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, "network namespace: not root")
	}
	ipcmd, err := exec.LookPath("ip")
	if err != nil {
		Missing(t, "network namespace: no ip command")
	}
	if n < 1 || n > 200 {
		t.Fatalf("NewLAN: %d namespaces, want 1 to 200", n)
	}
	run := func(args ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if out, err := exec.CommandContext(ctx, ipcmd, args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	x := freeOctet(t, ipcmd)
	tag := fmt.Sprintf("%d%03x", os.Getpid()%10000, rand.IntN(1<<12))
	host := netip.AddrFrom4([4]byte{198, 18, byte(x), 1})
	br := "fdb" + tag
	run("link", "add", br, "type", "bridge")
	t.Cleanup(func() { exec.Command(ipcmd, "link", "del", br).Run() })
	run("addr", "add", host.String()+"/24", "dev", br)
	run("link", "set", br, "up")
	var nss []*NetNS
	for i := range n {
		ns := &NetNS{Name: fmt.Sprintf("fleetdns-%s-%d", tag, i), Host: host,
			Addrs: []netip.Addr{netip.AddrFrom4([4]byte{198, 18, byte(x), byte(10 + i)})}}
		hostIf, nsIf := fmt.Sprintf("fdh%s%d", tag, i), fmt.Sprintf("fdn%s%d", tag, i)
		run("netns", "add", ns.Name)
		t.Cleanup(func() {
			exec.Command(ipcmd, "link", "del", hostIf).Run()
			exec.Command(ipcmd, "netns", "del", ns.Name).Run()
		})
		run("link", "add", hostIf, "type", "veth", "peer", "name", nsIf)
		run("link", "set", nsIf, "netns", ns.Name)
		run("link", "set", hostIf, "master", br)
		run("link", "set", hostIf, "up")
		run("-n", ns.Name, "link", "set", "lo", "up")
		run("-n", ns.Name, "addr", "add", ns.Addrs[0].String()+"/24", "dev", nsIf)
		run("-n", ns.Name, "link", "set", nsIf, "up")
		nss = append(nss, ns)
	}
	return nss
}

// Addr returns the namespace's i-th address as a string.
func (ns *NetNS) Addr(i int) string { return ns.Addrs[i].String() }

// InNetNS runs fn on an OS thread switched into the network namespace at
// path (/run/netns/NAME, or /proc/PID/ns/net): the sockets fn opens belong
// to that namespace and keep it after the thread switches back. When the
// thread cannot switch back it stays locked, so that it ends with this
// goroutine instead of serving others, and the error says so: what fn
// opened is then the caller's to close.
func InNetNS(path string, fn func() error) error {
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	target, err := os.Open(path)
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("setns %s: %w", path, err)
	}
	fnErr := fn()
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("setns back: %w", err)
	}
	runtime.UnlockOSThread()
	return fnErr
}
