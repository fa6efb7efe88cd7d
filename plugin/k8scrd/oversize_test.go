package k8scrd

import (
	"fmt"
	"strings"
	"testing"

	"github.com/coredns/coredns/plugin/test"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"
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
	before := testutil.ToFloat64(object.InvalidEndpoints.WithLabelValues(object.ReasonSize))
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
	if got := testutil.ToFloat64(object.InvalidEndpoints.WithLabelValues(object.ReasonSize)) - before; got != 3 {
		t.Errorf("invalid_endpoints_total{reason=size} rose by %v, want 3", got)
	}
}
