// Package rrl_test runs the built coredns binary with the rrl plugin and
// sends it bursts over real sockets from several loopback networks.
package rrl_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

func TestBurstFromOneNetworkIsLimitedOthersAndTCPAreNot(t *testing.T) {
	ip := harness.NewIP(t)
	metrics := harness.HostPort(t, ip)
	srv := harness.StartCoreDNS(t, fmt.Sprintf(`example.org:53 {
    bind %s
    prometheus %s
    rrl {
        responses_per_second 5
        window 2
        slip 2
    }
    template IN A example.org {
        answer "{{ .Name }} 60 IN A 10.0.0.1"
    }
}`, ip, metrics))
	// Two client networks on loopback, /24s apart from each other.
	clientA, clientB := "127.77.1.10", "127.78.1.10"
	const n = 40
	start := time.Now()
	ans, tc, lost, _, _ := harness.Burst(clientA, srv.Addr, "www.example.org.", dns.TypeA, 0, false, n)
	elapsed := time.Since(start)
	// The account answers its 5 at once and 5 a second more: a burst that
	// a loaded machine stretched (each dropped query waits 50 ms) has
	// earned more.
	allowed := 5 + int(5*elapsed.Seconds())
	t.Logf("burst of %d from %s in %v: %d answered (at most %d), %d truncated (slipped), %d dropped", n, clientA, elapsed.Round(time.Millisecond), ans, allowed, tc, lost)
	if ans > allowed || lost < n/3 || tc < n/4 {
		t.Errorf("burst from one /24 in %v: %d answered, %d slipped, %d dropped; want at most %d answered (5 and 5/s), about half of the rest slipped", elapsed, ans, tc, lost, allowed)
	}
	ans2, tc2, _, _, _ := harness.Burst("127.77.1.99", srv.Addr, "www.example.org.", dns.TypeA, 0, false, 5)
	if ans2 > 1 {
		t.Errorf("the same /24 from another address: %d answered (%d slipped), want it limited", ans2, tc2)
	}
	if ans, _, _, _, _ := harness.Burst(clientB, srv.Addr, "www.example.org.", dns.TypeA, 0, false, 5); ans != 5 {
		t.Errorf("another /24 during the burst: %d of 5 answered", ans)
	}
	for i := range 20 {
		m, err := harness.Ask(srv.Addr, "www.example.org.", dns.TypeA, harness.TCP, harness.Attempts(1))
		if err != nil || m.Truncated || len(m.Answer) != 1 {
			t.Fatalf("TCP query %d during the burst: %v %v", i, m, err)
		}
	}
	body := harness.HTTPBody(t, "http://"+metrics+"/metrics")
	for _, want := range []string{`coredns_rrl_responses_dropped_total{kind="answer"}`, `coredns_rrl_responses_slipped_total{kind="answer"}`} {
		if !strings.Contains(body, want) {
			t.Errorf("no %s in /metrics", want)
		}
	}
	if strings.Contains(body, "127.77") {
		t.Errorf("a client address is in /metrics")
	}
}
