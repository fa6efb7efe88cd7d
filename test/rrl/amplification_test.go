package rrl_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

// TestAmplificationFactor measures bytes out over bytes in for 200 spoofable
// UDP queries from one client at EDNS 65535, for an 8 KB TXT and 250 A
// records served by k8scrd (the shipped GSLB stanza's authoritative part:
// any, bufsize, rrl as shipped), with and without bufsize 1232 and rrl.
func TestAmplificationFactor(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("apiVersion: externaldns.k8s.io/v1alpha1\nkind: DNSEndpoint\nmetadata: {name: amp, namespace: fleetdns}\nspec:\n  endpoints:\n")
	var txt []string
	for range 32 {
		txt = append(txt, strings.Repeat("t", 250))
	}
	fmt.Fprintf(&b, "  - {dnsName: txt.amp.example, recordType: TXT, targets: [%q]}\n", strings.Join(txt, ""))
	var as []string
	for i := range 250 {
		as = append(as, fmt.Sprintf("127.1.%d.%d", i/200, i%200+1))
	}
	fmt.Fprintf(&b, "  - {dnsName: a.amp.example, recordType: A, targets: [%s]}\n", strings.Join(as, ","))
	if err := os.WriteFile(filepath.Join(dir, "amp.yaml"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, lines string }{
		{"neither", ""},
		{"bufsize 1232", "bufsize 1232"},
		{"rrl (as shipped)", "rrl {\n        responses_per_second 20\n        window 15\n        slip 2\n    }"},
		{"bufsize 1232 and rrl (as shipped)", "bufsize 1232\n    rrl {\n        responses_per_second 20\n        window 15\n        slip 2\n    }"},
	} {
		ip := harness.NewIP(t)
		srv := harness.StartCoreDNS(t, fmt.Sprintf(`amp.example:53 {
    bind %s
    any
    %s
    k8scrd amp.example {
        directory %s
    }
}`, ip, c.lines, dir), harness.WithProbe("txt.amp.example.", dns.TypeTXT))
		for _, q := range []struct {
			name  string
			qtype uint16
		}{{"txt.amp.example.", dns.TypeTXT}, {"a.amp.example.", dns.TypeA}} {
			const n = 200
			ans, tc, lost, in, out := harness.Burst("127.79.1.10", srv.Addr, q.name, q.qtype, 65535, false, n)
			t.Logf("%-34s %-5s: %4d answered, %4d truncated, %4d dropped; %7d bytes in, %9d out: %.1fx",
				c.name, dns.TypeToString[q.qtype], ans, tc, lost, in, out, float64(out)/float64(in))
		}
	}
}
