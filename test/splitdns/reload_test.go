package splitdns

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

// TestCorefileReloadChangesRoutesWithoutFailedQuery edits the Corefile of a
// running server (CoreDNS's reload plugin picks it up) so that a route
// moves to another upstream, while a client asks without pause: the new
// route takes effect and no query fails on the way.
func TestCorefileReloadChangesRoutesWithoutFailedQuery(t *testing.T) {
	w := startWorld(t)
	ip := harness.NewIP(t)
	corefile := func(acme string) string {
		return fmt.Sprintf(`.:53 {
    bind %s
    reload 2s 1s
    splitdns {
        route acme.internal %s
        default %s
    }
}
`, ip, acme, w.public)
	}
	srv := harness.StartCoreDNS(t, corefile(w.acme))
	if got := answerA(t, srv.Addr, "db.acme.internal."); got != acmeAnswer {
		t.Fatalf("before reload: %s", got)
	}
	if err := os.WriteFile(srv.Corefile, []byte(corefile(w.acme2)), 0o644); err != nil {
		t.Fatal(err)
	}

	// Bounded: at most 30 s and 10000 queries; stop 300 queries after the switch.
	const maxQueries = 10000
	deadline := time.Now().Add(30 * time.Second)
	var sent, failed, before, after int
	for sent < maxQueries && time.Now().Before(deadline) && after < 300 {
		sent++
		m, err := harness.Ask(srv.Addr, fmt.Sprintf("q%d.acme.internal.", sent), dns.TypeA, harness.Timeout(2*time.Second), harness.Attempts(1))
		switch {
		case err != nil:
			failed++
			t.Errorf("query %d: %v", sent, err)
		case m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1:
			failed++
			t.Errorf("query %d: %s with %d answers", sent, dns.RcodeToString[m.Rcode], len(m.Answer))
		default:
			switch harness.Targets(m, dns.TypeA)[0] {
			case acmeAnswer:
				if after > 0 {
					t.Errorf("query %d: old route again after the new one answered", sent)
				}
				before++
			case acme2Answer:
				after++
			}
		}
		if failed > 10 {
			t.Fatalf("too many failures")
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Logf("%d queries during the reload: %d by the old route, %d by the new, %d failed", sent, before, after, failed)
	if after == 0 {
		t.Fatalf("the reloaded route never answered\n%s", srv.Log())
	}
}
