package gslb

import (
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/miekg/dns"
)

func TestExplainOnlyForAllowedClients(t *testing.T) {
	st := newFakeStore(host(app, "10.0.1.1"))
	g, n, us, _ := twoPeers(t, "strategy failover\nprimary us ap eu", st)

	m := ask(t, g, "_gslb-explain."+app, dns.TypeTXT, from("127.0.0.1"))
	if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 {
		t.Fatalf("explain from loopback: %s %v", dns.RcodeToString[m.Rcode], m.Answer)
	}
	txt := strings.Join(m.Answer[0].(*dns.TXT).Txt, "\n")
	for _, want := range []string{
		"strategy failover (default)",
		"primary us,ap,eu",
		"tag eu self targets A 10.0.1.1",
		"tag us peer " + us.addr + " state up age",
		"targets A 10.0.2.1 AAAA fd00::2:1",
		"answer A us: first primary tag with targets",
	} {
		if !strings.Contains(txt, want) {
			t.Errorf("explain lacks %q:\n%s", want, txt)
		}
	}

	calls := n.calls.Load()
	m = ask(t, g, "_gslb-explain."+app, dns.TypeTXT, from("192.0.2.1"))
	if n.calls.Load() != calls+1 || len(m.Answer) != 0 {
		t.Errorf("explain to a client outside the ACL did not fall through: %v", m.Answer)
	}
}

func TestExplainGeoAndStale(t *testing.T) {
	g, _, _, ap := twoPeers(t, geoCIDRs+"\nsplit_brain_threshold 1h", newFakeStore(host(app, "10.0.1.1")))
	ap.setMode("servfail")
	testkit.Eventually(t, 5*time.Second, "ap stale", func() bool { return stateOf(g, "ap") == stateStale })
	m := ask(t, g, "_gslb-explain."+app, dns.TypeTXT, from("127.0.0.1"), withECS(1, "10.2.3.0", 24))
	txt := strings.Join(m.Answer[0].(*dns.TXT).Txt, "\n")
	for _, want := range []string{
		"client 10.2.3.0/24 geo tag us scope 16",
		"state stale",
		"last error rcode: SERVFAIL",
		"answer A us: the client's tag has targets",
	} {
		if !strings.Contains(txt, want) {
			t.Errorf("explain lacks %q:\n%s", want, txt)
		}
	}
}
