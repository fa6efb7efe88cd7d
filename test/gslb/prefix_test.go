package gslb

import (
	"fmt"
	"testing"

	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

// TestCustomPrefix runs every cluster with `localtargets { prefix lt- }`
// and no prefix in gslb: peers ask each other lt-<host>, and answers are
// assembled as with the default prefix.
func TestCustomPrefix(t *testing.T) {
	f := newFleet(t)
	lt := map[string]string{}
	for _, tag := range tags {
		lt[tag] = "localtargets {\n        prefix lt-\n    }"
	}
	f.start(t, fleetOptions{localtargets: lt})
	for _, tag := range tags {
		c := f.clusters[tag]
		if got, err := ask(c.addr, hostRR, dns.TypeA); err != nil || !equal(got, f.union(tags...)) {
			t.Errorf("%s at %s = %v (%v), want %v", hostRR, tag, got, err, f.union(tags...))
		}
		if got, err := ask(c.addr, "lt-"+hostRR, dns.TypeA); err != nil || !equal(got, f.union(tag)) {
			t.Errorf("lt-%s at %s = %v (%v), want %v", hostRR, tag, got, err, f.union(tag))
		}
		m := harness.Exchange(t, c.addr, "localtargets-"+hostRR, dns.TypeA)
		if m.Rcode != dns.RcodeNameError {
			t.Errorf("localtargets-%s at %s with prefix lt-: %s %v, want NXDOMAIN from k8scrd", hostRR, tag, dns.RcodeToString[m.Rcode], fmt.Sprint(m.Answer))
		}
	}
}
