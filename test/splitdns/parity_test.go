package splitdns

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

// The tests in this file run stock forward and splitdns side by side, the
// same settings written in each one's words, against the same upstreams
// (fakeUpstream: Go servers in the test process on loopback), and compare
// what the client gets and what the upstreams are asked.

// startForwardAndSplitDNS starts two coredns servers on fresh loopback
// addresses: one whose server block holds the stock forward stanzas given,
// one whose splitdns block holds body. {NAME} in either is replaced by the
// address of ups[NAME].
func startForwardAndSplitDNS(t *testing.T, ups map[string]*fakeUpstream, forward, body string) (fwd, sd string) {
	t.Helper()
	var pairs []string
	for name, u := range ups {
		pairs = append(pairs, "{"+name+"}", u.addr)
	}
	r := strings.NewReplacer(pairs...)
	f := harness.StartCoreDNS(t, fmt.Sprintf(".:53 {\n    bind %s\n%s\n}\n", harness.NewIP(t), r.Replace(forward)))
	s := harness.StartCoreDNS(t, fmt.Sprintf(".:53 {\n    bind %s\n    splitdns {\n%s\n    }\n}\n", harness.NewIP(t), r.Replace(body)))
	return f.Addr, s.Addr
}

// outcome is what one query did: the client's answer and the upstreams'
// queries for its name, by transport.
type outcome struct {
	rcode   string
	answer  []string
	queries map[string]string // upstream name -> "udp N tcp M"
}

func (o outcome) String() string {
	var qs []string
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range o.queries {
			if !yield(k) {
				return
			}
		}
	}) {
		qs = append(qs, k+": "+o.queries[k])
	}
	return fmt.Sprintf("%s %v, upstreams asked {%s}", o.rcode, o.answer, strings.Join(qs, ", "))
}

// run asks addr for name and returns what happened.
func run(t *testing.T, addr, name string, ups map[string]*fakeUpstream, opts ...harness.QueryOption) outcome {
	t.Helper()
	before := map[string][2]int{}
	for n, u := range ups {
		before[n] = [2]int{u.asked(name, "udp"), u.asked(name, "tcp")}
	}
	m := harness.Exchange(t, addr, name, dns.TypeA, append([]harness.QueryOption{harness.Attempts(1), harness.Timeout(5 * time.Second)}, opts...)...)
	o := outcome{rcode: dns.RcodeToString[m.Rcode], answer: harness.Targets(m, dns.TypeA), queries: map[string]string{}}
	for n, u := range ups {
		udp, tcp := u.asked(name, "udp")-before[n][0], u.asked(name, "tcp")-before[n][1]
		if udp != 0 || tcp != 0 {
			o.queries[n] = fmt.Sprintf("udp %d tcp %d", udp, tcp)
		}
	}
	return o
}

func TestRouteOptionsAnswerAsStockForward(t *testing.T) {
	ups := map[string]*fakeUpstream{
		"SERVFAIL": startFake(t, dns.RcodeServerFailure, ""),
		"REFUSED":  startFake(t, dns.RcodeRefused, ""),
		"NXDOMAIN": startFake(t, dns.RcodeNameError, ""),
		"A1":       startFake(t, dns.RcodeSuccess, "10.7.0.1"),
		"A2":       startFake(t, dns.RcodeSuccess, "10.7.0.2"),
		"DEF":      startFake(t, dns.RcodeSuccess, "10.7.0.53"),
	}
	type query struct {
		name string
		tcp  bool
		want string // the answer or rcode both must give
	}
	tests := []struct {
		name             string
		forward, splitdn string
		queries          []query
	}{
		{
			name: "failover SERVFAIL REFUSED asks the next upstream",
			forward: `    forward acme.internal {SERVFAIL} {REFUSED} {A1} {
        policy sequential
        failover SERVFAIL REFUSED
    }
    forward . {DEF}`,
			splitdn: `        route acme.internal {SERVFAIL} {REFUSED} {A1} {
            policy sequential
            failover SERVFAIL REFUSED
        }
        default {DEF}`,
			queries: []query{{name: "failover.acme.internal.", want: "10.7.0.1"}},
		},
		{
			name: "failover with every upstream failing returns the last answer",
			forward: `    forward acme.internal {SERVFAIL} {REFUSED} {
        policy sequential
        failover SERVFAIL REFUSED
    }
    forward . {DEF}`,
			splitdn: `        route acme.internal {SERVFAIL} {REFUSED} {
            policy sequential
            failover SERVFAIL REFUSED
        }
        default {DEF}`,
			queries: []query{{name: "allfail.acme.internal.", want: "REFUSED"}},
		},
		{
			name: "without failover the first answer is the answer",
			forward: `    forward acme.internal {SERVFAIL} {A1} {
        policy sequential
    }
    forward . {DEF}`,
			splitdn: `        route acme.internal {SERVFAIL} {A1} {
            policy sequential
        }
        default {DEF}`,
			queries: []query{{name: "nofailover.acme.internal.", want: "SERVFAIL"}},
		},
		{
			name: "failover from the block is every route's default",
			forward: `    forward acme.internal {SERVFAIL} {A1} {
        policy sequential
        failover SERVFAIL
    }
    forward . {SERVFAIL} {DEF} {
        policy sequential
        failover SERVFAIL
    }`,
			splitdn: `        route acme.internal {SERVFAIL} {A1}
        default {SERVFAIL} {DEF}
        policy sequential
        failover SERVFAIL`,
			queries: []query{{name: "blockfailover.acme.internal.", want: "10.7.0.1"}, {name: "www.example.org.", want: "10.7.0.53"}},
		},
		{
			name: "next NXDOMAIN asks the next-longest route, then the default",
			forward: `    forward svc.acme.internal {NXDOMAIN} {
        next NXDOMAIN
    }
    forward acme.internal {A2}
    forward . {DEF}`,
			splitdn: `        route svc.acme.internal {NXDOMAIN} {
            next NXDOMAIN
        }
        route acme.internal {A2}
        default {DEF}`,
			queries: []query{{name: "db.svc.acme.internal.", want: "10.7.0.2"}},
		},
		{
			name: "next to the default route",
			forward: `    forward acme.internal {NXDOMAIN} {
        next NXDOMAIN SERVFAIL
    }
    forward . {DEF}`,
			splitdn: `        route acme.internal {NXDOMAIN} {
            next NXDOMAIN SERVFAIL
        }
        default {DEF}`,
			queries: []query{{name: "next.acme.internal.", want: "10.7.0.53"}},
		},
		{
			name: "an rcode not named in next is the answer",
			forward: `    forward acme.internal {NXDOMAIN} {
        next SERVFAIL
    }
    forward . {DEF}`,
			splitdn: `        route acme.internal {NXDOMAIN} {
            next SERVFAIL
        }
        default {DEF}`,
			queries: []query{{name: "nonext.acme.internal.", want: "NXDOMAIN"}},
		},
		{
			name: "except leaves names to the default route",
			forward: `    forward acme.internal {A1} {
        except legacy.acme.internal
    }
    forward . {DEF}`,
			splitdn: `        route acme.internal {A1} {
            except legacy.acme.internal
        }
        default {DEF}`,
			queries: []query{
				{name: "host.legacy.acme.internal.", want: "10.7.0.53"},
				{name: "legacy.acme.internal.", want: "10.7.0.53"},
				{name: "new.acme.internal.", want: "10.7.0.1"},
				{name: "acme.internal.", want: "10.7.0.1"},
			},
		},
		{
			name: "policy sequential",
			forward: `    forward acme.internal {A1} {A2} {
        policy sequential
    }`,
			splitdn: `        route acme.internal {A1} {A2} {
            policy sequential
        }`,
			queries: []query{{name: "seq.acme.internal.", want: "10.7.0.1"}, {name: "seq.acme.internal.", want: "10.7.0.1"}},
		},
		{
			name: "policy round_robin",
			forward: `    forward acme.internal {A1} {A2} {
        policy round_robin
    }`,
			splitdn: `        route acme.internal {A1} {A2} {
            policy round_robin
        }`,
			queries: []query{{name: "rr.acme.internal.", want: "10.7.0.2"}, {name: "rr.acme.internal.", want: "10.7.0.1"}, {name: "rr.acme.internal.", want: "10.7.0.2"}},
		},
		{
			name: "force_tcp asks over TCP what came over UDP",
			forward: `    forward acme.internal {A1} {
        force_tcp
    }`,
			splitdn: `        route acme.internal {A1} {
            force_tcp
        }`,
			queries: []query{{name: "forcetcp.acme.internal.", want: "10.7.0.1"}},
		},
		{
			name: "prefer_udp asks over UDP what came over TCP",
			forward: `    forward acme.internal {A1} {
        prefer_udp
    }`,
			splitdn: `        route acme.internal {A1} {
            prefer_udp
        }`,
			queries: []query{{name: "preferudp.acme.internal.", tcp: true, want: "10.7.0.1"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fwd, sd := startForwardAndSplitDNS(t, ups, tc.forward, tc.splitdn)
			for i, q := range tc.queries {
				var opts []harness.QueryOption
				if q.tcp {
					opts = append(opts, harness.TCP)
				}
				f := run(t, fwd, q.name, ups, opts...)
				s := run(t, sd, q.name, ups, opts...)
				if f.String() != s.String() {
					t.Errorf("query %d %s:\n forward:  %s\n splitdns: %s", i, q.name, f, s)
				}
				if got := f.rcode; len(f.answer) > 0 {
					got = f.answer[0]
					if got != q.want {
						t.Errorf("query %d %s: forward answered %s, want %s", i, q.name, got, q.want)
					}
				} else if got != q.want {
					t.Errorf("query %d %s: forward answered %s, want %s", i, q.name, got, q.want)
				}
			}
		})
	}
}

// TestMaxConcurrentRefusesBeyondTheLimitAsForward: a slow upstream and more
// queries at once than the limit: both answer REFUSED beyond it, at once,
// and a query for another route is answered meanwhile.
func TestMaxConcurrentRefusesBeyondTheLimitAsForward(t *testing.T) {
	const limit, queries = 4, 10
	ups := map[string]*fakeUpstream{
		"SLOW": startFake(t, dns.RcodeSuccess, "10.7.1.1", withDelay(1500*time.Millisecond)),
		"FAST": startFake(t, dns.RcodeSuccess, "10.7.1.2"),
	}
	fwd, sd := startForwardAndSplitDNS(t, ups, fmt.Sprintf(`    forward slow.internal {SLOW} {
        max_concurrent %d
    }
    forward . {FAST}`, limit), fmt.Sprintf(`        route slow.internal {SLOW} {
            max_concurrent %d
        }
        route fast.internal {FAST}
        default {FAST}`, limit))

	burst := func(addr, prefix string) (rcodes map[string]int, other string, otherTook time.Duration) {
		var mu sync.Mutex
		rcodes = map[string]int{}
		var wg sync.WaitGroup
		for i := range queries {
			wg.Go(func() {
				m, err := harness.Ask(addr, fmt.Sprintf("%s%d.slow.internal.", prefix, i), dns.TypeA, harness.Attempts(1), harness.Timeout(5*time.Second))
				rc := "timeout"
				if err == nil {
					rc = dns.RcodeToString[m.Rcode]
				}
				mu.Lock()
				rcodes[rc]++
				mu.Unlock()
			})
		}
		// The slow queries are in flight once the upstream holds them
		// (for 1.5 s): polled, as a fixed pause is too short on a loaded
		// machine.
		inFlight := func() (bool, string) {
			asked := 0
			for i := range queries {
				asked += ups["SLOW"].asked(fmt.Sprintf("%s%d.slow.internal.", prefix, i), "")
			}
			return asked >= limit, fmt.Sprintf("the slow upstream holds %d of %d queries", asked, limit)
		}
		if note, ok := testkit.Within(time.Second, inFlight); !ok {
			t.Fatalf("%s: the burst is not in flight within 1 s: %s", prefix, note)
		}
		start := time.Now()
		other = answerA(t, addr, prefix+".fast.internal.", harness.Attempts(1))
		otherTook = time.Since(start)
		wg.Wait()
		return rcodes, other, otherTook
	}
	for _, c := range []struct{ name, addr string }{{"forward", fwd}, {"splitdns", sd}} {
		rcodes, other, took := burst(c.addr, c.name)
		want := map[string]int{"NOERROR": limit, "REFUSED": queries - limit}
		if fmt.Sprint(rcodes) != fmt.Sprint(want) {
			t.Errorf("%s: %d queries at once with max_concurrent %d: %v, want %v", c.name, queries, limit, rcodes, want)
		}
		if other != "10.7.1.2" || took > time.Second {
			t.Errorf("%s: another route during the burst: %s after %v, want 10.7.1.2 at once", c.name, other, took)
		}
		asked := 0
		for i := range queries {
			asked += ups["SLOW"].asked(fmt.Sprintf("%s%d.slow.internal.", c.name, i), "")
		}
		if asked != limit {
			t.Errorf("%s: the slow upstream was asked %d times, want %d", c.name, asked, limit)
		}
		t.Logf("%s: %v; another route answered in %v", c.name, rcodes, took.Round(time.Millisecond))
	}
}

// TestBlockMaxConcurrentIsOneLimitForTheBlock: max_concurrent written in the
// splitdns block counts the queries of every route together, as forward's
// counts its block's.
func TestBlockMaxConcurrentIsOneLimitForTheBlock(t *testing.T) {
	slow := startFake(t, dns.RcodeSuccess, "10.7.1.1", withDelay(1500*time.Millisecond))
	fast := startFake(t, dns.RcodeSuccess, "10.7.1.2")
	srv, _ := startSplitDNS(t, fmt.Sprintf(`        route slow.internal %s
        default %s
        max_concurrent 2`, slow.addr, fast.addr))
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			answerA(t, srv.Addr, fmt.Sprintf("q%d.slow.internal.", i), harness.Attempts(1), harness.Timeout(5*time.Second))
		})
	}
	// Both are in flight once the slow upstream holds them (for 1.5 s):
	// polled, as a fixed pause is too short on a loaded machine.
	testkit.Eventually(t, time.Second, "the block's 2 queries in flight", func() (bool, string) {
		n := slow.asked("q0.slow.internal.", "") + slow.asked("q1.slow.internal.", "")
		return n == 2, fmt.Sprintf("the slow upstream holds %d of 2", n)
	})
	if got := answerA(t, srv.Addr, "www.example.org.", harness.Attempts(1)); got != "REFUSED" {
		t.Errorf("the default route while the block's 2 queries are in flight: %s, want REFUSED", got)
	}
	wg.Wait()
	if got := answerA(t, srv.Addr, "www.example.org.", harness.Attempts(1)); got != "10.7.1.2" {
		t.Errorf("the default route after them: %s, want 10.7.1.2", got)
	}
}

// TestWholeRouteDownClientWait: every upstream of a route held down. With
// failfast_all_unhealthy_upstreams the client gets SERVFAIL at once and no
// upstream is asked; without it one upstream is tried anyway (in case health
// checking is what is broken), so the client waits the upstream's timeout.
// Stock forward does the same with the same settings; the health checks
// carry the configured name and RD bit in both.
func TestWholeRouteDownClientWait(t *testing.T) {
	const timeout = 500 * time.Millisecond
	type server struct {
		name     string
		failfast bool
		up       *fakeUpstream
		addr     string
	}
	servers := []*server{
		{name: "forward", failfast: true}, {name: "forward"},
		{name: "splitdns", failfast: true}, {name: "splitdns"},
	}
	for _, s := range servers {
		// One silent upstream per server, so that its health checks are its own.
		s.up = startFake(t, dns.RcodeSuccess, "", silent)
		ff := ""
		if s.failfast {
			ff = "failfast_all_unhealthy_upstreams"
		}
		opts := fmt.Sprintf(`health_check 100ms no_rec domain probe.example
        max_fails 1
        %s`, ff)
		if s.name == "forward" {
			s.addr = harness.StartCoreDNS(t, fmt.Sprintf(`.:53 {
    bind %s
    forward down.internal %s {
        read_timeout %s
        %s
    }
}`, harness.NewIP(t), s.up.addr, timeout, opts)).Addr
		} else {
			srv, _ := startSplitDNS(t, fmt.Sprintf(`        route down.internal %s {
            %s
        }
        timeout %s`, s.up.addr, opts, timeout))
			s.addr = srv.Addr
		}
	}
	// A first query fails and starts the health checks; each check of a
	// silent upstream takes its 1 s timeout, and the second failed one
	// (max_fails 1) holds the upstream down.
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Go(func() {
			answerA(t, s.addr, "first.down.internal.", harness.Attempts(1), harness.Timeout(5*time.Second))
		})
	}
	wg.Wait()
	for _, s := range servers {
		testkit.Eventually(t, 10*time.Second, s.name+": two failed health checks", func() (bool, string) {
			n := len(s.up.probesSent())
			return n >= 3, fmt.Sprintf("%d health checks sent", n)
		})
	}
	for _, s := range servers {
		before := s.up.asked("wait.down.internal.", "")
		start := time.Now()
		got := answerA(t, s.addr, "wait.down.internal.", harness.Attempts(1), harness.Timeout(5*time.Second))
		waited := time.Since(start)
		asked := s.up.asked("wait.down.internal.", "") - before
		t.Logf("%s failfast=%v: %s after %v, upstream asked %d times", s.name, s.failfast, got, waited.Round(time.Millisecond), asked)
		if got != "SERVFAIL" {
			t.Errorf("%s failfast=%v: %s, want SERVFAIL", s.name, s.failfast, got)
		}
		switch {
		case s.failfast && (waited > 200*time.Millisecond || asked != 0):
			t.Errorf("%s failfast: waited %v, upstream asked %d times; want SERVFAIL at once, not asked", s.name, waited, asked)
		case !s.failfast && (waited < timeout*8/10 || waited > 2*timeout || asked != 1):
			t.Errorf("%s: waited %v, upstream asked %d times; want one try, about %v", s.name, waited, asked, timeout)
		}
		for _, p := range s.up.probesSent() {
			if p.name != "probe.example." || p.rd {
				t.Errorf("%s: health check %s RD=%v, want probe.example. without RD", s.name, p.name, p.rd)
				break
			}
		}
	}
}

// TestExpireClosesIdleConnectionsAsForward: a connection idle longer than
// a route's expire is not used again, so the upstream sees a new one, as
// with forward's expire.
func TestExpireClosesIdleConnectionsAsForward(t *testing.T) {
	fu := startFake(t, dns.RcodeSuccess, "10.7.2.1")
	su := startFake(t, dns.RcodeSuccess, "10.7.2.1")
	f := harness.StartCoreDNS(t, fmt.Sprintf(`.:53 {
    bind %s
    forward expire.internal %s {
        force_tcp
        expire 300ms
    }
}`, harness.NewIP(t), fu.addr))
	s, _ := startSplitDNS(t, fmt.Sprintf(`        route expire.internal %s {
            force_tcp
            expire 300ms
        }`, su.addr))
	for _, c := range []struct {
		name string
		addr string
		up   *fakeUpstream
	}{{"forward", f.Addr, fu}, {"splitdns", s.Addr, su}} {
		answerA(t, c.addr, "a.expire.internal.")
		answerA(t, c.addr, "b.expire.internal.") // reuses the connection
		time.Sleep(700 * time.Millisecond)
		answerA(t, c.addr, "c.expire.internal.") // the idle one has expired
		if got := c.up.tcpConns(); got != 2 {
			t.Errorf("%s: %d TCP connections for 3 queries with an idle gap past expire, want 2", c.name, got)
		}
	}
}
