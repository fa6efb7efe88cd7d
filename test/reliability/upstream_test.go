package reliability

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

// test/splitdns covers a dead first upstream (skipped), truncation retried
// over TCP, DoT, loops and a reload. What it lacks is covered here: an
// upstream that is slow, one that answers REFUSED, one that closes TCP in
// the middle of an answer, and a route whose only upstream is gone.

// badUpstream is an upstream on ip:53 (UDP and TCP) that misbehaves as mode says.
type badUpstream struct {
	ip      string
	queries atomic.Int64
}

func startBadUpstream(t *testing.T, mode string, delay time.Duration) *badUpstream {
	t.Helper()
	u := &badUpstream{ip: harness.NewIP(t)}
	addr := net.JoinHostPort(u.ip, "53")
	answer := func(r *dns.Msg) *dns.Msg {
		m := new(dns.Msg)
		m.SetReply(r)
		if q := r.Question[0]; q.Qtype == dns.TypeA && q.Name != "." {
			m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.IPv4(10, 77, 0, 1)}}
		}
		return m
	}
	switch mode {
	case "slow", "refused", "good":
		h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
			u.queries.Add(1)
			m := answer(r)
			if mode == "slow" {
				time.Sleep(delay)
			}
			if mode == "refused" && r.Question[0].Name != "." {
				m = new(dns.Msg)
				m.SetRcode(r, dns.RcodeRefused)
			}
			w.WriteMsg(m)
		})
		for _, network := range []string{"udp", "tcp"} {
			srv := &dns.Server{Addr: addr, Net: network, Handler: h}
			started := make(chan struct{})
			srv.NotifyStartedFunc = func() { close(started) }
			go srv.ListenAndServe()
			<-started
			t.Cleanup(func() { srv.Shutdown() })
		}
	case "tcpcut":
		// Over UDP: TC=1 with no records, so the answer is asked again over
		// TCP; over TCP: the length of the whole answer, half of it, close.
		pc := udpListen(t, addr)
		go func() {
			buf := make([]byte, 65535)
			for {
				n, from, err := pc.ReadFrom(buf)
				if err != nil {
					return
				}
				r := new(dns.Msg)
				if r.Unpack(buf[:n]) != nil {
					continue
				}
				u.queries.Add(1)
				m := answer(r)
				if r.Question[0].Name != "." {
					m.Answer = nil
					m.Truncated = true
				}
				b, _ := m.Pack()
				pc.WriteTo(b, from)
			}
		}()
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					var n uint16
					if binary.Read(c, binary.BigEndian, &n) != nil {
						return
					}
					q := make([]byte, n)
					if _, err := io.ReadFull(c, q); err != nil {
						return
					}
					r := new(dns.Msg)
					if r.Unpack(q) != nil {
						return
					}
					u.queries.Add(1)
					m := answer(r)
					for i := range 50 {
						m.Answer = append(m.Answer, &dns.TXT{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60}, Txt: []string{fmt.Sprintf("%02d%s", i, strings.Repeat("y", 60))}})
					}
					b, _ := m.Pack()
					c.Write(binary.BigEndian.AppendUint16(nil, uint16(len(b))))
					c.Write(b[:len(b)/2])
					// and close: the rest never comes
				}()
			}
		}()
	default:
		t.Fatalf("unknown mode %s", mode)
	}
	return u
}

// TestMisbehavingUpstreams: every route answers within a bound whatever its
// upstream does; a slow route does not slow the others; nothing partial
// reaches a client; the server keeps answering.
func TestMisbehavingUpstreams(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	harness.RequirePlugins(t, "splitdns")
	slow := startBadUpstream(t, "slow", 3*time.Second)
	refused := startBadUpstream(t, "refused", 0)
	cut := startBadUpstream(t, "tcpcut", 0)
	good := startBadUpstream(t, "good", 0)
	dead := harness.NewIP(t) // reserved, nothing listens: ICMP port unreachable
	ip := harness.NewIP(t)
	srv := harness.StartCoreDNS(t, fmt.Sprintf(`.:53 {
    bind %s
    splitdns {
        route slow.internal %s
        route refused.internal %s
        route cut.internal %s
        route dead.internal %s
        default %s
        timeout 500ms
        health_check 200ms
    }
    errors
}
`, ip, slow.ip, refused.ip, cut.ip, dead, good.ip), harness.WithProbe("www.example.com", dns.TypeA))

	// Good answers continue, quickly, while the other routes misbehave.
	goodLoad := startLoad(srv.Addr, 2, 10*time.Millisecond, []string{"a.example.com.", "b.example.net."}, dns.TypeA, func(name string, m *dns.Msg) string {
		if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 || addrsOf(m)[0] != "10.77.0.1" {
			return summary(m, nil)
		}
		return ""
	})

	type outcome struct {
		rcodes  map[string]int
		slowest time.Duration
		errs    int
	}
	ask := func(route string, n int, opts ...harness.QueryOption) outcome {
		o := outcome{rcodes: map[string]int{}}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start := time.Now()
				m, err := harness.Ask(srv.Addr, fmt.Sprintf("q%d.%s.internal.", i, route), dns.TypeA, append([]harness.QueryOption{harness.Attempts(1), harness.Timeout(5 * time.Second)}, opts...)...)
				d := time.Since(start)
				mu.Lock()
				defer mu.Unlock()
				o.slowest = max(o.slowest, d)
				if err != nil {
					o.errs++
					return
				}
				o.rcodes[dns.RcodeToString[m.Rcode]]++
				if m.Rcode == dns.RcodeSuccess && (m.Truncated || len(m.Answer) == 0) && route == "cut" {
					t.Errorf("%s: a partial answer reached the client:\n%s", route, m)
				}
			}()
			time.Sleep(20 * time.Millisecond)
		}
		wg.Wait()
		t.Logf("%-9s upstream: %d queries -> %v, %d unanswered, slowest %v", route, n, o.rcodes, o.errs, o.slowest.Round(time.Millisecond))
		return o
	}

	// Slow: SERVFAIL after the timeout (both passes), never an answer that takes the upstream's 3 s.
	o := ask("slow", 20)
	if o.errs > 0 || o.rcodes["SERVFAIL"] != 20 {
		t.Errorf("slow upstream: %v, %d unanswered; want 20 SERVFAIL", o.rcodes, o.errs)
	}
	if o.slowest > 2500*time.Millisecond {
		t.Errorf("slow upstream: a client waited %v (timeout 500ms)", o.slowest)
	}
	// REFUSED is the upstream's answer: passed on as forward does, at once.
	o = ask("refused", 20)
	if o.errs > 0 || o.rcodes["REFUSED"] != 20 {
		t.Errorf("refusing upstream: %v, %d unanswered; want 20 REFUSED", o.rcodes, o.errs)
	}
	if o.slowest > time.Second {
		t.Errorf("refusing upstream: a client waited %v", o.slowest)
	}
	// TCP closed mid-answer: SERVFAIL, over UDP and over TCP.
	for _, opts := range [][]harness.QueryOption{nil, {harness.TCP}} {
		o = ask("cut", 10, opts...)
		if o.errs > 0 || o.rcodes["SERVFAIL"] != 10 {
			t.Errorf("upstream closing TCP mid-answer: %v, %d unanswered; want 10 SERVFAIL", o.rcodes, o.errs)
		}
		if o.slowest > 2500*time.Millisecond {
			t.Errorf("upstream closing TCP mid-answer: a client waited %v", o.slowest)
		}
	}
	// Nothing listening: SERVFAIL, quickly (ICMP port unreachable, no timeout).
	o = ask("dead", 10)
	if o.errs > 0 || o.rcodes["SERVFAIL"] != 10 {
		t.Errorf("gone upstream: %v, %d unanswered; want 10 SERVFAIL", o.rcodes, o.errs)
	}
	if o.slowest > 1500*time.Millisecond {
		t.Errorf("gone upstream: a client waited %v", o.slowest)
	}

	total, wrong, first := goodLoad.end()
	t.Logf("default route meanwhile: %d queries, %d wrong or unanswered, slowest %v", total, wrong, goodLoad.maxLat.Round(time.Millisecond))
	if wrong > 0 {
		t.Errorf("default route: %d of %d queries wrong while other routes misbehaved: %v", wrong, total, first)
	}
	if goodLoad.maxLat > time.Second {
		t.Errorf("default route: a query took %v while other routes misbehaved", goodLoad.maxLat)
	}
	if !srv.Running() {
		t.Fatalf("coredns exited: %v", srv.ExitErr())
	}
	t.Logf("upstream queries: slow %d, refused %d, cut %d, good %d", slow.queries.Load(), refused.queries.Load(), cut.queries.Load(), good.queries.Load())
}
