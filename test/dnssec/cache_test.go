package dnssec_test

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"
	"github.com/miekg/dns"
)

// testGeoCache: geo answers, asked with DO from the two regions' client
// networks (EDNS Client Subnet) in turn, are signed once per answer
// variant and then served from the dnssec plugin's signature cache
// (cache_capacity as shipped): coredns_dnssec_cache_misses_total grows by
// the handful of distinct RRsets, not per query.
func testGeoCache(t *testing.T, f *fleet) {
	const n = 400
	var src string
	nets := []string{"198.18.128.0/24", "198.18.129.0/24"}
	for i, want := range []string{geoTargets["eu"], geoTargets["us"]} {
		testkit.Eventually(t, 20*time.Second, "geo answer for "+nets[i], func() (bool, string) {
			m, err := harness.Ask(f.eu.Addr, "geo.gslb.example.com.", dns.TypeA, harness.NoRD, harness.ECS(nets[i]))
			return err == nil && strings.Join(harness.Targets(m, dns.TypeA), " ") == want, fmt.Sprint(m, err)
		})
	}
	// From 40 client addresses, 10 queries each: the shipped rrl block
	// limits one client network to 20 answers a second (the rest slip to
	// TC), which a single address would meet.
	before := harness.Scrape(t, f.eu.metrics)
	for i := range n {
		if i%10 == 0 {
			src = harness.NewIP(t)
		}
		m, _ := harness.NewMsg("geo.gslb.example.com.", dns.TypeA, harness.DO, harness.NoRD, harness.ECS(nets[i%2]))
		c := &dns.Client{Timeout: 2 * time.Second, Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(src)}}}
		r, _, err := c.Exchange(m, f.eu.Addr)
		if err != nil {
			t.Fatalf("query %d: %v", i, err)
		}
		sigs := 0
		for _, rr := range r.Answer {
			if rr.Header().Rrtype == dns.TypeRRSIG {
				sigs++
			}
		}
		if want := geoTargets[[]string{"eu", "us"}[i%2]]; sigs == 0 || strings.Join(harness.Targets(r, dns.TypeA), " ") != want {
			t.Fatalf("query %d from %s: %v, want %s signed", i, nets[i%2], r, want)
		}
	}
	after := harness.Scrape(t, f.eu.metrics)
	hits := after.Sum("coredns_dnssec_cache_hits_total") - before.Sum("coredns_dnssec_cache_hits_total")
	misses := after.Sum("coredns_dnssec_cache_misses_total") - before.Sum("coredns_dnssec_cache_misses_total")
	t.Logf("%d signed geo answers from 2 regions: %.0f signature cache hits, %.0f misses (signatures made); cache entries %.0f",
		n, hits, misses, after.Sum("coredns_dnssec_cache_entries"))
	if misses > 10 || hits < n-10 {
		t.Errorf("%d geo answers: %.0f cache hits, %.0f misses: answers are re-signed per query", n, hits, misses)
	}
}
