package k8scrd_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fleetdns/fleetdns/test/harness"
	"github.com/miekg/dns"
)

// TestLargeAnswerTruncatesOverUDPAndIsWholeOverTCP: an RRset that does not
// fit the client's UDP size sets TC; the same query over TCP (and with a
// large enough EDNS0 buffer over UDP) gets all of it. dig, which retries
// over TCP on TC, shows every address.
func TestLargeAnswerTruncatesOverUDPAndIsWholeOverTCP(t *testing.T) {
	k := harness.SharedKube(t)
	ns := k.NewNamespace(t, "big")
	var ips []string
	for i := range 120 {
		ips = append(ips, fmt.Sprintf("10.9.%d.%d", i/250, i%250+1))
	}
	k.CreateDNSEndpoint(t, ns, "big", nil, a("big.big.example", ips...))
	srv := startK8sCRD(t, "big.example.", source{kubeconfig: k.Kubeconfig}, []string{"namespaces " + ns}, nil, true)
	waitA(t, srv.Addr, "small.big.example", "NXDOMAIN", propagationBound)

	for _, tc := range []struct {
		name    string
		opts    []harness.QueryOption
		tc      bool
		answers int
	}{
		{"UDP without EDNS0 (512 octets)", nil, true, -1},
		{"UDP with EDNS0 1232", []harness.QueryOption{harness.EDNS(1232)}, true, -1},
		{"UDP with EDNS0 4096", []harness.QueryOption{harness.EDNS(4096)}, false, len(ips)},
		{"TCP", []harness.QueryOption{harness.TCP}, false, len(ips)},
	} {
		r := harness.Exchange(t, srv.Addr, "big.big.example", dns.TypeA, append(tc.opts, harness.NoRD)...)
		if r.Truncated != tc.tc {
			t.Errorf("%s: TC = %v, want %v", tc.name, r.Truncated, tc.tc)
		}
		if tc.answers >= 0 && len(r.Answer) != tc.answers {
			t.Errorf("%s: %d answers, want %d", tc.name, len(r.Answer), tc.answers)
		}
		if !r.Authoritative || r.Rcode != dns.RcodeSuccess {
			t.Errorf("%s: rcode %s AA %v", tc.name, dns.RcodeToString[r.Rcode], r.Authoritative)
		}
	}
	out := harness.Dig(t, srv.Addr, "+norec", "+bufsize=1232", "big.big.example", "A")
	if !strings.Contains(out, "Truncated, retrying in TCP mode") {
		t.Errorf("dig did not see TC over UDP:\n%s", out)
	}
	if got := harness.DigShort(t, srv.Addr, "big.big.example", "A", "+bufsize=1232"); len(got) != len(ips) {
		t.Errorf("dig (UDP, then TCP on TC) shows %d addresses, want %d", len(got), len(ips))
	}
}
