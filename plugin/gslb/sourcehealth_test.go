package gslb

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/store/storetest"
	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/miekg/dns"
)

// TestOwnTargetsWithdrawnBySourceHealth: without localtargets in the block,
// this cluster's contribution is the store's ready targets: those that only
// unready source objects contribute are in no answer, and a cluster whose
// targets are all withdrawn is one without targets for failover.
func TestOwnTargetsWithdrawnBySourceHealth(t *testing.T) {
	st := newFakeStore(storetest.Withdraw(host(app, "10.0.1.1", "10.0.1.2", "fd00::1:1"), "10.0.1.2", "fd00::1:1"))
	g, _, _, _ := twoPeers(t, "strategy roundRobin", st)
	if got, want := addrs(ask(t, g, app, dns.TypeA)), []string{"10.0.1.1", "10.0.3.1", "10.0.2.1"}; !slices.Equal(got, want) {
		t.Errorf("A: got %v, want %v (10.0.1.2 withdrawn)", got, want)
	}
	if got, want := addrs(ask(t, g, app, dns.TypeAAAA)), []string{"fd00::2:1"}; !slices.Equal(got, want) {
		t.Errorf("AAAA: got %v, want the peer's %v (fd00::1:1 withdrawn)", got, want)
	}

	m := ask(t, g, "_gslb-explain."+app, dns.TypeTXT, from("127.0.0.1"))
	if len(m.Answer) != 1 {
		t.Fatalf("explain: %v", m.Answer)
	}
	want := "tag eu self targets A 10.0.1.1 AAAA - withdrawn by source health A 10.0.1.2 AAAA fd00::1:1"
	if txt := strings.Join(m.Answer[0].(*dns.TXT).Txt, "\n"); !strings.Contains(txt, want) {
		t.Errorf("explain lacks %q:\n%s", want, txt)
	}

	// Failover with this cluster first: every own target withdrawn, us answers.
	all := withProps(host(app, "10.0.1.1", "10.0.1.2"), propStrategy, "failover", propPrimary, "eu,us,ap")
	st.Put(storetest.Withdraw(all, "10.0.1.1", "10.0.1.2"))
	testkit.Eventually(t, 5*time.Second, "failover past eu's withdrawn targets", func() bool {
		return slices.Equal(addrs(ask(t, g, app, dns.TypeA)), []string{"10.0.2.1"})
	})
	// The source is ready again: eu's targets are back.
	st.Put(all)
	testkit.Eventually(t, 5*time.Second, "eu ready again", func() bool {
		return slices.Equal(addrs(ask(t, g, app, dns.TypeA)), []string{"10.0.1.1", "10.0.1.2"})
	})
}
