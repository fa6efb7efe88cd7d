package k8scrd

import (
	"fmt"
	"github.com/coredns/coredns/plugin/test"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/tree"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// endpointManifest returns a DNSEndpoint manifest of one object with the endpoints
// given as YAML flow mappings.
func endpointManifest(name string, endpoints ...string) string {
	return "apiVersion: externaldns.k8s.io/v1alpha1\nkind: DNSEndpoint\nmetadata: {name: " + name + ", namespace: default}\nspec:\n  endpoints:\n  - " + strings.Join(endpoints, "\n  - ") + "\n"
}

func TestRRsetThatFitsNoMessageIsRefused(t *testing.T) {
	big := strings.Repeat("x", 70_000) // one TXT record of 70 KB: RDATA over 65,535 octets
	var many []string                  // 5,000 A records: 80 KB in any answer
	for i := range 5000 {
		many = append(many, fmt.Sprintf("10.%d.%d.1", i/256, i%256))
	}
	var fits []string // 250 A records: 4 KB
	for i := range 250 {
		fits = append(fits, fmt.Sprintf("10.0.%d.1", i))
	}
	before := testutil.ToFloat64(invalidEndpoints.WithLabelValues(object.ReasonSize))
	k, _ := newTestPlugin(t, "size.example.", "", map[string]string{"a.yaml": endpointManifest("a",
		`{dnsName: big.size.example, recordType: TXT, targets: ["`+big+`"]}`,
		`{dnsName: mixed.size.example, recordType: TXT, targets: ["`+big+`"]}`,
		`{dnsName: mixed.size.example, recordType: A, targets: [10.9.9.9]}`,
		`{dnsName: many.size.example, recordType: A, targets: [`+strings.Join(many, ",")+`]}`,
		`{dnsName: fits.size.example, recordType: A, targets: [`+strings.Join(fits, ",")+`]}`,
		`{dnsName: www.size.example, recordType: A, targets: [10.1.1.1]}`,
	)})
	for _, c := range []struct {
		name    string
		qtype   uint16
		rcode   int
		answers int
	}{
		{"big.size.example.", dns.TypeTXT, dns.RcodeNameError, 0},
		{"mixed.size.example.", dns.TypeTXT, dns.RcodeSuccess, 0},
		{"mixed.size.example.", dns.TypeA, dns.RcodeSuccess, 1},
		{"many.size.example.", dns.TypeA, dns.RcodeNameError, 0},
		{"fits.size.example.", dns.TypeA, dns.RcodeSuccess, 250},
		{"www.size.example.", dns.TypeA, dns.RcodeSuccess, 1},
	} {
		m := askVia(t, k, c.name, c.qtype, &test.ResponseWriter{TCP: true})
		if m == nil || m.Rcode != c.rcode || len(m.Answer) != c.answers {
			t.Errorf("%s %s: got %v, want %s with %d answers", c.name, dns.TypeToString[c.qtype], m, dns.RcodeToString[c.rcode], c.answers)
		}
	}
	if got := testutil.ToFloat64(invalidEndpoints.WithLabelValues(object.ReasonSize)) - before; got != 3 {
		t.Errorf("invalid_endpoints_total{reason=size} rose by %v, want 3", got)
	}
}

// oversized's size is an upper bound of the packed answer, exact once it
// says the set is too large.
func TestOversizedIsExactNearTheLimit(t *testing.T) {
	b := newBuilder(&config{zones: []string{"size.example."}, ttl: 30, negTTL: 30}, new(atomic.Pointer[tree.Snapshot]))
	name := "t.size.example."
	// TXT records of 255-octet strings: each 2 (owner pointer) + 10 + 256 octets.
	for _, c := range []struct {
		n    int
		want bool
	}{{200, false}, {243, false}, {245, true}} {
		var s tree.Merged
		s.Type = dns.TypeTXT
		for i := range c.n {
			s.RRs = append(s.RRs, &dns.TXT{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeTXT, Class: dns.ClassINET}, Txt: []string{fmt.Sprintf("%03d", i) + strings.Repeat("y", 252)}})
		}
		size, too := b.oversized(name, s)
		if too != c.want {
			t.Errorf("%d TXT records (%d octets): oversized %v, want %v", c.n, size, too, c.want)
		}
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeTXT)
		m.Answer = s.RRs
		m.Ns = b.snap.Load().Zones["size.example."].SOA
		m.Compress = true
		if wire, err := m.Pack(); err != nil || (len(wire) > dns.MaxMsgSize) != c.want || len(wire) > size || (too && len(wire) != size) {
			t.Errorf("%d TXT records: packed %d octets (%v), oversized said %d, %v", c.n, len(wire), err, size, too)
		}
	}
}
