package gslb

import (
	"testing"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

// TestNamesWithoutAddressesAreNotGSLBHosts: a CNAME (or TXT) declared in the
// GSLB zone is zone data, served as written by k8scrd, not a GSLB host whose
// answer gslb assembles from targets (it has none, so gslb would answer
// NODATA, or worse, the peers' targets for a name that is an alias here).
func TestNamesWithoutAddressesAreNotGSLBHosts(t *testing.T) {
	f := newFleet(t)
	alias, txt := "alias."+zone, "info."+zone
	for _, tag := range tags {
		testkit.WriteFile(t, f.clusters[tag].dir, "extra.yaml", testkit.DNSEndpoint("apps", "extra", nil,
			testkit.Endpoint{DNSName: alias, RecordType: "CNAME", TTL: 30, Targets: []string{"app.example.net"}},
			testkit.Endpoint{DNSName: txt, RecordType: "TXT", TTL: 30, Targets: []string{"owner=platform"}}))
	}
	f.start(t, fleetOptions{})
	for _, tag := range tags {
		c := f.clusters[tag]
		m := harness.Exchange(t, c.addr, alias, dns.TypeA)
		if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 {
			t.Fatalf("%s A at %s: %s %v, want the CNAME", alias, tag, dns.RcodeToString[m.Rcode], m.Answer)
		}
		if cn, ok := m.Answer[0].(*dns.CNAME); !ok || cn.Target != "app.example.net." {
			t.Errorf("%s A at %s: %v, want CNAME app.example.net.", alias, tag, m.Answer[0])
		}
		m = harness.Exchange(t, c.addr, txt, dns.TypeA)
		if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 0 || len(m.Ns) != 1 {
			t.Errorf("%s A at %s: %s answer %v authority %v, want NODATA with the SOA", txt, tag, dns.RcodeToString[m.Rcode], m.Answer, m.Ns)
		}
		if got := harness.Targets(harness.Exchange(t, c.addr, txt, dns.TypeTXT), dns.TypeTXT); len(got) != 1 {
			t.Errorf("%s TXT at %s: %v, want the declared TXT", txt, tag, got)
		}
		// The zone's hosts are still assembled from every cluster.
		if got, err := ask(c.addr, hostRR, dns.TypeA); err != nil || !equal(got, f.union(tags...)) {
			t.Errorf("%s at %s = %v (%v), want %v", hostRR, tag, got, err, f.union(tags...))
		}
	}
}
