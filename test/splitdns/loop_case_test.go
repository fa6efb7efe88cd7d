package splitdns

import (
	"fmt"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

// startCaseRelay starts a relay on a loopback address of its own that
// forwards every query to `to` as a resolver using 0x20 would: a new query
// (no EDNS option of the original survives, so splitdns's marker is lost)
// whose name has each letter's case drawn at random. It answers NS queries
// (splitdns's health checks) itself, and forwards at most limit queries in
// all, so that the loop the test makes is bounded even when splitdns fails
// to bound it. It returns its address and the count of queries forwarded.
func startCaseRelay(t *testing.T, to string, limit int64) (string, *atomic.Int64) {
	t.Helper()
	addr := harness.NewAddr(t)
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	var forwarded atomic.Int64
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		if len(r.Question) != 1 {
			return
		}
		q := r.Question[0]
		if q.Qtype == dns.TypeNS || forwarded.Add(1) > limit {
			m := new(dns.Msg)
			m.SetReply(r)
			w.WriteMsg(m)
			return
		}
		name := []byte(q.Name)
		for i, c := range name {
			if 'a' <= c && c <= 'z' && rand.IntN(2) == 0 {
				name[i] = c - 'a' + 'A'
			} else if 'A' <= c && c <= 'Z' && rand.IntN(2) == 0 {
				name[i] = c - 'A' + 'a'
			}
		}
		out := new(dns.Msg)
		out.SetQuestion(string(name), q.Qtype)
		c := &dns.Client{Timeout: time.Second}
		ret, _, err := c.Exchange(out, to)
		if err != nil {
			return
		}
		ret.Id, ret.Question = r.Id, r.Question
		w.WriteMsg(ret)
	})}
	go srv.ActivateAndServe()
	t.Cleanup(func() { srv.Shutdown() })
	return addr, &forwarded
}

// A loop through a relay that drops the marker and randomizes the name's
// case (0x20) is bounded by the in-flight set: the copy that comes back in
// another case finds its flight and waits, instead of being forwarded again.
func TestLoopThroughCaseRandomizingRelayIsBounded(t *testing.T) {
	def := startFake(t, dns.RcodeSuccess, "10.1.1.1")
	ipA := harness.NewIP(t)
	relay, forwarded := startCaseRelay(t, ipA+":53", 200)
	a := harness.StartCoreDNS(t, fmt.Sprintf(`.:53 {
    bind %s
    prometheus %s:9153
    splitdns {
        route case.test %s
        default %s
        timeout 500ms
    }
}`, ipA, ipA, relay, def.addr))

	const queries = 5
	for i := range queries {
		m := harness.Exchange(t, a.Addr, fmt.Sprintf("q%d.CaSe.test.", i), dns.TypeA, harness.Attempts(1), harness.Timeout(5*time.Second))
		if m.Rcode != dns.RcodeServerFailure {
			t.Errorf("query %d looping through a 0x20 relay: %s, want SERVFAIL", i, dns.RcodeToString[m.Rcode])
		}
		if got, want := m.Question[0].Name, fmt.Sprintf("q%d.CaSe.test.", i); got != want {
			t.Errorf("answer's question %q, want the client's %q", got, want)
		}
	}
	time.Sleep(time.Second) // let late copies arrive
	n := forwarded.Load()
	t.Logf("%d client queries looping through a 0x20 relay: the relay forwarded %d copies back", queries, n)
	if n > 2*queries {
		t.Errorf("the relay forwarded %d copies for %d client queries, want at most %d", n, queries, 2*queries)
	}
	if got := answerA(t, a.Addr, "www.example.com."); got != "10.1.1.1" {
		t.Errorf("after the loop: %s", got)
	}
}
