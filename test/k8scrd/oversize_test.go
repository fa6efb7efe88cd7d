package k8scrd_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/fleetdns/fleetdns/test/harness"
	"github.com/miekg/dns"
)

// TestRecordThatFitsNoMessageIsRefusedAndTransferWorks: a 70 KB TXT record
// (as BIND and Knot refuse at load) is refused with one log line naming it
// and a metric; the zone transfers whole without it, and the name does not
// exist.
func TestRecordThatFitsNoMessageIsRefusedAndTransferWorks(t *testing.T) {
	dir := t.TempDir()
	big := strings.Repeat("x", 70_000)
	var b strings.Builder
	b.WriteString("apiVersion: externaldns.k8s.io/v1alpha1\nkind: DNSEndpoint\nmetadata: {name: big, namespace: default}\nspec:\n  endpoints:\n")
	fmt.Fprintf(&b, "  - {dnsName: big.size.example, recordType: TXT, targets: [%q]}\n", big)
	for i := range 50 {
		fmt.Fprintf(&b, "  - {dnsName: host%d.size.example, recordType: A, targets: [127.0.%d.1]}\n", i, i)
	}
	if err := os.WriteFile(filepath.Join(dir, "big.yaml"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startK8sCRD(t, "size.example.", source{directory: dir}, nil, []string{"transfer {\n        to *\n    }"}, true)

	rrs := axfr(t, srv.Addr, "size.example.")
	names := map[string]bool{}
	for _, rr := range rrs {
		names[rr.Header().Name] = true
	}
	for i := range 50 {
		if n := fmt.Sprintf("host%d.size.example.", i); !names[n] {
			t.Errorf("AXFR lacks %s (%d records transferred)", n, len(rrs))
		}
	}
	if names["big.size.example."] {
		t.Errorf("AXFR carries the refused big.size.example.")
	}
	for _, net := range []string{"udp", "tcp"} {
		opts := []harness.QueryOption{harness.NoRD, harness.EDNS(4096)}
		if net == "tcp" {
			opts = append(opts, harness.TCP)
		}
		m := harness.Exchange(t, srv.Addr, "big.size.example.", dns.TypeTXT, opts...)
		if m.Rcode != dns.RcodeNameError || m.Truncated || len(m.Answer) != 0 {
			t.Errorf("big.size.example. TXT over %s: %s TC=%v %d answers, want NXDOMAIN without TC", net, dns.RcodeToString[m.Rcode], m.Truncated, len(m.Answer))
		}
	}
	lines := regexp.MustCompile(`(?m)^.*TXT RRset at big\.size\.example\..*refused.*$`).FindAllString(srv.Log(), -1)
	if len(lines) != 1 {
		t.Errorf("%d log lines name the refused big.size.example., want 1:\n%s", len(lines), srv.Log())
	}
	metrics := harness.HTTPBody(t, srv.MetricsURL)
	if !strings.Contains(metrics, `coredns_k8scrd_invalid_endpoints_total{reason="size"} 1`) {
		t.Errorf("no invalid_endpoints_total{reason=\"size\"} 1 in /metrics:\n%s", harness.GrepLines(metrics, "invalid_endpoints"))
	}
}
