package dnssec_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/test/harness"
	"github.com/miekg/dns"
)

// testExpired: the dnssec plugin signs each answer for 8
// days from 3 hours ago. A validator whose clock is 9 days ahead (Unbound
// told the date with val-override-date, as a clock-skewed resolver is)
// finds every signature expired: its clients get SERVFAIL, and its log
// names the cause. The same validator with the right clock validates.
func testExpired(t *testing.T, f *fleet) {
	skewed := time.Now().Add(9 * 24 * time.Hour).Unix()
	u := startUnbound(t, f.keys.ds, []string{f.eu.Addr}, nil, 0, fmt.Sprintf("val-override-date: \"%d\"", skewed))
	m, err := harness.Ask(u.addr, "app.gslb.example.com.", dns.TypeA, harness.DO, harness.Timeout(5*time.Second))
	if err != nil || m.Rcode != dns.RcodeServerFailure {
		t.Fatalf("a validator 9 days ahead: %v %v, want SERVFAIL (signatures expired)", m, err)
	}
	if !u.WaitLog("expired", 5*time.Second) {
		t.Errorf("Unbound's log does not say why:\n%s", harness.TailLines(u.Log(), 20))
	}
	for _, l := range strings.Split(u.Log(), "\n") {
		if strings.Contains(l, "expired") {
			t.Logf("what the validator logs: %s", strings.TrimSpace(l))
			break
		}
	}
	right := startUnbound(t, f.keys.ds, []string{f.eu.Addr}, nil, 0)
	validated(t, right, "the same validator with the right clock", "app.gslb.example.com.", dns.TypeA, dns.RcodeSuccess, true)
}

// TestKeyFileThatDoesNotParse: a key Secret whose private key file is not
// one (a truncated copy, a wrong file) stops coredns at start-up with an
// error naming the dnssec plugin (the stock plugin's message names
// neither the file nor the line: docs/dnssec.md says to check the files
// with dnssec-dsfromkey before creating the Secret); a running pod is not
// replaced (the new pod never gets ready: maxUnavailable 0).
func TestKeyFileThatDoesNotParse(t *testing.T) {
	k := harness.SharedKube(t)
	keys := newKeySet(t)
	bad := filepath.Join(keys.dir, "zsk.private")
	if err := os.Chmod(bad, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("Private-key-format: v1.3\nAlgorithm: 13 (ECDSAP256SHA256)\nPrivateKey: not base64!\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ip := harness.NewIP(t)
	k.EnsureNamespace(t, "dnssec-bad")
	cf, _ := localize(t, signedCorefile(t), ip, "dnssec-bad", k.Kubeconfig, keys.dir, harness.HostPort(t, ip))
	c := harness.StartCoreDNS(t, cf, harness.WithoutWait(), harness.WithEnv("FLEETDNS_GEOTAG=eu", "FLEETDNS_PARENT_NS=127.0.0.1"))
	select {
	case <-c.Exited():
	case <-time.After(20 * time.Second):
		t.Fatalf("coredns still runs with a key file that does not parse:\n%s", c.Log())
	}
	log := c.Log()
	if c.ExitErr() == nil || !strings.Contains(log, "plugin/dnssec") {
		t.Errorf("exit %v; want a start-up error naming plugin/dnssec:\n%s", c.ExitErr(), log)
	}
	t.Logf("what the operator sees: %s", strings.TrimSpace(harness.TailLines(log, 1)))
}
