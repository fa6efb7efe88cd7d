package bounds_test

import (
	"fmt"
	"net"
	"strconv"
	"testing"

	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

// TestRRLOverIPv6Loopback (finding 4, IPv6): rrl accounts an IPv6 client
// by its /56. A burst from ::1 is limited and slipped; an IPv4 client
// during it is not, nor is TCP from ::1. (The grouping of addresses into a
// /56 is plugin/rrl's unit test: this host has one IPv6 loopback address.)
func TestRRLOverIPv6Loopback(t *testing.T) {
	harness.RequirePlugins(t, "rrl")
	c, err := net.ListenPacket("udp6", "[::1]:0")
	if err != nil {
		harness.Missing(t, "IPv6 loopback: %v", err)
	}
	c.Close()
	ip := harness.NewIP(t)
	port := harness.FreePort(t, "::1")
	srv := harness.StartCoreDNS(t, fmt.Sprintf(`example.org:%d {
    bind ::1 %s
    rrl {
        responses_per_second 5
        window 2
        slip 2
    }
    template IN A example.org {
        answer "{{ .Name }} 60 IN A 127.0.0.1"
    }
}`, port, ip), harness.WithDNSAddr(net.JoinHostPort("::1", strconv.Itoa(port))))
	v4 := net.JoinHostPort(ip, strconv.Itoa(port))
	const n = 40
	ans, tc, lost, _, _ := harness.Burst("::1", srv.Addr, "www.example.org.", dns.TypeA, 1232, true, n)
	t.Logf("burst of %d from ::1: %d answered, %d truncated (slipped), %d dropped", n, ans, tc, lost)
	if ans > 10 || lost < n/3 || tc < n/4 {
		t.Errorf("burst from ::1: %d answered, %d slipped, %d dropped; want at most 10 answered, about half of the rest slipped", ans, tc, lost)
	}
	if a, _, _, _, _ := harness.Burst(harness.NewIP(t), v4, "www.example.org.", dns.TypeA, 1232, true, 5); a != 5 {
		t.Errorf("an IPv4 client during the burst: %d of 5 answered", a)
	}
	for i := range 10 {
		m, err := harness.Ask(srv.Addr, "www.example.org.", dns.TypeA, harness.TCP, harness.Attempts(1))
		if err != nil || m.Truncated || len(m.Answer) != 1 {
			t.Fatalf("TCP query %d from ::1 during the burst: %v %v", i, m, err)
		}
	}
}
