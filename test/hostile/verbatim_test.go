package hostile_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"
	"github.com/miekg/dns"
)

// TestHostileK8gbRecordDoesNotTurnAnotherTeamsHostVerbatim is issue 24's
// finding 9, in shared tenancy (what the k8gb guide and chart shipped): a
// tenant adds a k8gb-labelled TXT record at another team's host. The host
// stays the team's: its localtargets- answer is the team's target, not the
// NXDOMAIN of a verbatim host without a literal localtargets- record (a
// host is verbatim only from its owner's objects, the oldest publisher).
func TestHostileK8gbRecordDoesNotTurnAnotherTeamsHostVerbatim(t *testing.T) {
	ip := harness.NewIP(t)
	dir := t.TempDir()
	testkit.WriteFile(t, dir, "shop.yaml", `apiVersion: externaldns.k8s.io/v1alpha1
kind: DNSEndpoint
metadata: {name: app, namespace: shop, creationTimestamp: "2026-01-01T00:00:00Z"}
spec:
  endpoints:
  - {dnsName: app.example.org, recordType: A, targets: [198.18.1.1]}
`)
	cd := harness.StartCoreDNS(t, fmt.Sprintf(`example.org {
    bind %s
    localtargets
    k8scrd {
        directory %s
    }
}
`, ip, dir), harness.WithProbe("app.example.org", dns.TypeA))
	lt := func() string {
		r, err := harness.Ask(cd.Addr, "localtargets-app.example.org.", dns.TypeA, harness.NoRD, harness.Timeout(time.Second))
		if err != nil {
			return err.Error()
		}
		if r.Rcode != dns.RcodeSuccess {
			return dns.RcodeToString[r.Rcode]
		}
		return strings.Join(harness.Targets(r, dns.TypeA), ",")
	}
	testkit.Eventually(t, 10*time.Second, "the team's localtargets- answer", func() (bool, string) {
		got := lt()
		return got == "198.18.1.1", "localtargets-app.example.org A = " + got
	})

	testkit.WriteFile(t, dir, "evil.yaml", `apiVersion: externaldns.k8s.io/v1alpha1
kind: DNSEndpoint
metadata: {name: claim, namespace: evil, creationTimestamp: "2026-06-01T00:00:00Z", labels: {k8gb.io/dnstype: local}}
spec:
  endpoints:
  - {dnsName: app.example.org, recordType: TXT, targets: ["x"]}
`)
	// The tenant's TXT is served (shared tenancy), so its arrival is visible.
	testkit.Eventually(t, 10*time.Second, "the tenant's TXT served", func() (bool, string) {
		r, err := harness.Ask(cd.Addr, "app.example.org.", dns.TypeTXT, harness.NoRD, harness.Timeout(time.Second))
		return err == nil && len(r.Answer) > 0, fmt.Sprintf("app.example.org TXT: %v %v", r, err)
	})
	for range 5 {
		if got := lt(); got != "198.18.1.1" {
			t.Fatalf("finding 9: with a tenant's k8gb-labelled TXT at app.example.org, localtargets-app.example.org A = %s, want the team's 198.18.1.1", got)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
