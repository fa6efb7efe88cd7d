package splitdns

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"
)

// TestSidecarResolvesForAnOrdinaryProgram runs splitdns as users run the
// loopback sidecar: a network namespace is the pod, its resolv.conf says
// nameserver 127.0.0.1 with ndots:5 and a cluster search list, coredns
// listens on 127.0.0.1:53 inside it, and the upstreams live in another
// namespace reached over a veth pair (198.18.0.0/15). getent, through
// glibc's resolver, resolves a private name and a public one.
func TestSidecarResolvesForAnOrdinaryProgram(t *testing.T) {
	ipCmd := harness.LookPath(t, "ip")
	getent := harness.LookPath(t, "getent")
	unbound := harness.LookPath(t, "unbound")
	if os.Geteuid() != 0 {
		harness.Missing(t, "root, to create network namespaces")
	}
	bin := harness.CoreDNSBinary(t)

	id := fmt.Sprint(os.Getpid())
	pod, up := "fleetdns-sd-pod-"+id, "fleetdns-sd-up-"+id
	vethPod, vethUp := "sdp"+id, "sdu"+id
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(ipCmd, args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("netns", "add", pod)
	t.Cleanup(func() { exec.Command(ipCmd, "netns", "del", pod).Run() })
	run("netns", "add", up)
	t.Cleanup(func() { exec.Command(ipCmd, "netns", "del", up).Run() })
	run("link", "add", vethPod, "type", "veth", "peer", "name", vethUp)
	run("link", "set", vethPod, "netns", pod)
	run("link", "set", vethUp, "netns", up)
	run("-n", pod, "link", "set", "lo", "up")
	run("-n", pod, "addr", "add", "198.18.0.2/24", "dev", vethPod)
	run("-n", pod, "link", "set", vethPod, "up")
	run("-n", up, "link", "set", "lo", "up")
	run("-n", up, "addr", "add", "198.18.0.1/24", "dev", vethUp)
	run("-n", up, "addr", "add", "198.18.0.3/24", "dev", vethUp)
	run("-n", up, "link", "set", vethUp, "up")

	// The pod's resolv.conf, as kubelet writes it for dnsPolicy None with the sidecar.
	etc := filepath.Join("/etc/netns", pod)
	if err := os.MkdirAll(etc, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(etc) })
	resolv := "search default.svc.cluster.local svc.cluster.local cluster.local\nnameserver 127.0.0.1\noptions ndots:5\n"
	if err := os.WriteFile(filepath.Join(etc, "resolv.conf"), []byte(resolv), 0o644); err != nil {
		t.Fatal(err)
	}

	// Upstreams in their own namespace: the private zone on coredns, the
	// "internet" on unbound.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "db.svc"), []byte(svcZone), 0o644)
	os.WriteFile(filepath.Join(dir, "Corefile.upstream"), []byte(`svc.acme.internal:53 {
    bind 198.18.0.1
    file db.svc
}
`), 0o644)
	harness.StartProcess(t, "coredns-upstream", ipCmd, []string{"netns", "exec", up, bin, "-conf", "Corefile.upstream"}, dir)
	udir, uconf := unboundConfig(t, "198.18.0.3")
	harness.StartProcess(t, "unbound", ipCmd, []string{"netns", "exec", up, unbound, "-d", "-c", uconf}, udir)

	// The sidecar, inside the pod.
	os.WriteFile(filepath.Join(dir, "Corefile.sidecar"), []byte(`.:53 {
    bind 127.0.0.1
    splitdns {
        route svc.acme.internal 198.18.0.1
        default 198.18.0.3
    }
}
`), 0o644)
	sidecar := harness.StartProcess(t, "coredns-sidecar", ipCmd, []string{"netns", "exec", pod, bin, "-conf", "Corefile.sidecar"}, dir)

	lookup := func(name string) (string, error) {
		out, err := exec.Command(ipCmd, "netns", "exec", pod, getent, "hosts", name).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	testkit.Eventually(t, 20*time.Second, "the pod resolving through the sidecar", func() (bool, string) {
		if !sidecar.Running() {
			t.Fatalf("sidecar exited: %v\n%s", sidecar.ExitErr(), sidecar.Log())
		}
		out, err := lookup("db.svc.acme.internal")
		return err == nil, fmt.Sprintf("getent hosts db.svc.acme.internal: %v %s", err, out)
	})
	for _, tc := range []struct{ name, want string }{
		{"db.svc.acme.internal", svcDB},
		{"www.example.com", publicWWW},
	} {
		out, err := lookup(tc.name)
		if err != nil || !strings.HasPrefix(out, tc.want+" ") {
			t.Errorf("getent hosts %s in the pod: %q (%v), want %s", tc.name, out, err, tc.want)
		}
		t.Logf("pod$ getent hosts %s -> %s", tc.name, out)
	}
	if out, err := lookup("missing.example.com"); err == nil {
		t.Errorf("getent hosts missing.example.com resolved: %q", out)
	}
}
