package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/test/harness"
)

// TestNonRootBindsPort53WithTheSysctl runs the image's binary (the
// Dockerfile's build: no file capability, as make build and make image
// leave it) as the shipped manifests run it: uid/gid 65532, every capability
// dropped from every set, no_new_privs (allowPrivilegeEscalation: false), in
// a network namespace of its own as a pod has. With the pod sysctl the
// manifests set (net.ipv4.ip_unprivileged_port_start=53, emulated in that
// namespace) it binds port 53 and answers; with the kernel's default (1024)
// the bind is refused, so the sysctl is what lets the non-root pod serve.
func TestNonRootBindsPort53WithTheSysctl(t *testing.T) {
	if os.Geteuid() != 0 {
		harness.Missing(t, "root, to switch to uid 65532 as the container runtime does")
	}
	setpriv := harness.LookPath(t, "setpriv")
	sysctl := harness.LookPath(t, "sysctl")
	ipTool := harness.LookPath(t, "ip")
	bin := dockerfileBinary(t)
	if out, err := exec.Command("getcap", bin).CombinedOutput(); err == nil && strings.TrimSpace(string(out)) != "" {
		t.Fatalf("the built binary carries a file capability: %s", out)
	}
	ns := harness.NewNetNS(t, 1) // the pod's network: 198.18.X.10, reachable from here over a veth
	addr := ns.Addr(0) + ":53"
	// A folder uid 65532 can read (t.TempDir's parent is private to root).
	dir, err := os.MkdirTemp("", "fleetdns-port53-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cf := filepath.Join(dir, "Corefile")
	if err := os.WriteFile(cf, []byte(fmt.Sprintf(".:53 {\n    bind %s\n    whoami\n}\n", ns.Addr(0))), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func() *harness.Process {
		return harness.StartProcess(t, "coredns-65532", ipTool, []string{
			"netns", "exec", ns.Name, setpriv,
			"--reuid=65532", "--regid=65532", "--clear-groups",
			"--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--no-new-privs",
			bin, "-conf", cf,
		}, dir)
	}

	t.Run("kernel default: the bind is refused", func(t *testing.T) {
		p := run()
		select {
		case <-p.Exited():
		case <-time.After(30 * time.Second):
			t.Fatalf("non-root coredns with no capability bound port 53 without the sysctl:\n%s", p.Log())
		}
		if !strings.Contains(p.Log(), "bind: permission denied") {
			t.Errorf("want the bind of port 53 refused, log:\n%s", p.Log())
		}
	})

	t.Run("with the pod's sysctl it serves", func(t *testing.T) {
		if out, err := exec.Command(ipTool, "netns", "exec", ns.Name, sysctl, "-w", "net.ipv4.ip_unprivileged_port_start=53").CombinedOutput(); err != nil {
			t.Fatalf("sysctl in %s: %v\n%s", ns.Name, err, out)
		}
		p := run()
		if err := waitDNS(p, addr, 30*time.Second); err != nil {
			t.Fatalf("non-root coredns did not serve %s with the sysctl: %v\n%s", addr, err, p.Log())
		}
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Pid()))
		if err != nil {
			t.Fatal(err)
		}
		for _, re := range []string{`(?m)^Uid:\s+65532\s+65532\s`, `(?m)^Gid:\s+65532\s+65532\s`, `(?m)^CapEff:\s+0+$`, `(?m)^CapPrm:\s+0+$`, `(?m)^CapBnd:\s+0+$`, `(?m)^NoNewPrivs:\s+1$`} {
			if !regexp.MustCompile(re).Match(st) {
				t.Errorf("coredns status does not match %s:\n%s", re, st)
			}
		}
	})
}
