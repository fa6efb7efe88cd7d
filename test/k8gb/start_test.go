package k8gb_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"
	"github.com/miekg/dns"
)

// The binary starts as k8gb's chart runs its CoreDNS container: every
// capability dropped (the chart's coredns.securityContext.capabilities.add
// is empty, and the CoreDNS chart drops ALL), non-root, no privilege
// escalation, port 5353. The binary `make build` builds carries no file
// capability, so nothing asks the kernel for one that the bounding set
// lacks; it serves the guide's plugins on 5353 and answers.
func TestStartsUnderK8gbChartSecurityContext(t *testing.T) {
	if os.Geteuid() != 0 {
		harness.Missing(t, "root, to switch to uid 65532 as the container runtime does")
	}
	setpriv := harness.LookPath(t, "setpriv")
	dir, err := os.MkdirTemp("", "fleetdns-k8gb-start-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { // readable by uid 65532
		t.Fatal(err)
	}
	built, err := os.ReadFile(harness.CoreDNSBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "coredns")
	if err := os.WriteFile(bin, built, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := syscall.Getxattr(bin, "security.capability", make([]byte, 64)); !errors.Is(err, syscall.ENODATA) {
		t.Fatalf("the built binary has a file capability (security.capability: %v); k8gb's chart could not execute it", err)
	}
	zoneDir := filepath.Join(dir, "endpoints")
	if err := os.Mkdir(zoneDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(zoneDir, "app.yaml"), []byte(testkit.DNSEndpoint("shop", "app", nil,
		testkit.Endpoint{DNSName: "app." + zone, RecordType: "A", Targets: []string{"198.18.0.80"},
			ProviderSpecific: [][2]string{{"gslb/strategy", "failover"}}})), 0o644); err != nil {
		t.Fatal(err)
	}
	ip := harness.NewIP(t)
	corefile := fmt.Sprintf(`%[1]s:5353 {
    bind %[2]s
    errors
    health %[2]s:%[3]d
    ready %[2]s:%[4]d
    prometheus %[2]s:%[5]d
    localtargets
    gslb {
        geotag eu
    }
    k8scrd {
        directory %[6]s
    }
}
`, zone, ip, harness.FreePort(t, ip), harness.FreePort(t, ip), harness.FreePort(t, ip), zoneDir)
	cf := filepath.Join(dir, "Corefile")
	if err := os.WriteFile(cf, []byte(corefile), 0o644); err != nil {
		t.Fatal(err)
	}
	p := harness.StartProcess(t, "coredns-k8gb-chart", setpriv, []string{
		"--reuid=65532", "--regid=65532", "--clear-groups",
		"--inh-caps=-all", "--bounding-set=-all", "--no-new-privs",
		bin, "-conf", cf,
	}, dir)
	testkit.Eventually(t, 30*time.Second, "an answer on port 5353", func() (bool, string) {
		if !p.Running() {
			t.Fatalf("coredns exited under the chart's securityContext: %v\n%s", p.ExitErr(), p.Log())
		}
		r, err := harness.Ask(ip+":5353", "app."+zone, dns.TypeA, harness.Timeout(time.Second))
		if err != nil {
			return false, err.Error()
		}
		got := harness.Targets(r, dns.TypeA)
		return len(got) == 1 && got[0] == "198.18.0.80", fmt.Sprintf("app A = %s %v, want 198.18.0.80", dns.RcodeToString[r.Rcode], got)
	})
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	for _, re := range []string{`(?m)^Uid:\s+65532\s`, `(?m)^CapBnd:\s+0+$`, `(?m)^CapEff:\s+0+$`, `(?m)^NoNewPrivs:\s+1$`} {
		if !regexp.MustCompile(re).Match(st) {
			t.Errorf("coredns's status does not match %s:\n%s", re, st)
		}
	}
}
