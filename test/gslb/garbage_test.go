package gslb

import (
	"crypto/rand"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

// evil is the address that only the garbage peer ever hands out.
const evil = "6.6.6.6"

// garbageMode is one way a broken or hostile peer answers a query.
type garbageMode int

const (
	wrongID          garbageMode = iota // a fine answer with another ID
	randomBytes                         // not a DNS message
	wrongQuestion                       // an answer for another name
	truncatedMessage                    // a fine answer cut short
	ownerMismatch                       // NOERROR, but the A record is for another name
	servfailWithData                    // SERVFAIL carrying an A record
	cnameOut                            // a CNAME out of the zone and an A for its target
	garbageModes
)

func (m garbageMode) String() string {
	return [...]string{"wrong ID", "random bytes", "wrong question", "truncated message",
		"A record for another name", "SERVFAIL with data", "CNAME out of the zone"}[m]
}

// garbagePeer is a process-local UDP server that never answers a query
// properly: every query gets the next garbage mode.
type garbagePeer struct {
	conn  net.PacketConn
	mu    sync.Mutex
	next  garbageMode
	count map[garbageMode]int
}

func startGarbagePeer(t *testing.T, ip string) *garbagePeer {
	t.Helper()
	conn, err := net.ListenPacket("udp", net.JoinHostPort(ip, "53"))
	if err != nil {
		t.Fatal(err)
	}
	g := &garbagePeer{conn: conn, count: map[garbageMode]int{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 65535)
		for {
			n, from, err := conn.ReadFrom(buf)
			if err != nil {
				return
			}
			q := new(dns.Msg)
			if q.Unpack(buf[:n]) != nil || len(q.Question) != 1 {
				continue
			}
			g.mu.Lock()
			mode := g.next
			g.next = (g.next + 1) % garbageModes
			g.count[mode]++
			g.mu.Unlock()
			conn.WriteTo(garbage(q, mode), from)
		}
	}()
	t.Cleanup(func() { conn.Close(); <-done })
	return g
}

func (g *garbagePeer) answered() map[garbageMode]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[garbageMode]int{}
	for k, v := range g.count {
		out[k] = v
	}
	return out
}

func garbage(q *dns.Msg, mode garbageMode) []byte {
	r := new(dns.Msg)
	r.SetReply(q)
	qname := q.Question[0].Name
	a := func(name string) dns.RR {
		rr, _ := dns.NewRR(name + " 5 IN A " + evil)
		return rr
	}
	r.Answer = []dns.RR{a(qname)}
	switch mode {
	case wrongID:
		r.Id = q.Id ^ 0x5a5a
	case randomBytes:
		b := make([]byte, 48)
		rand.Read(b)
		return b
	case wrongQuestion:
		r.Question[0].Name = "localtargets-evil.example.net."
		r.Answer = []dns.RR{a("localtargets-evil.example.net.")}
	case truncatedMessage:
		b, _ := r.Pack()
		return b[:len(b)-7]
	case ownerMismatch:
		r.Answer = []dns.RR{a("evil." + zone + ".")}
	case servfailWithData:
		r.Rcode = dns.RcodeServerFailure
	case cnameOut:
		cname, _ := dns.NewRR(qname + " 5 IN CNAME evil.example.net.")
		r.Answer = []dns.RR{cname, a("evil.example.net.")}
	}
	b, _ := r.Pack()
	return b
}

// TestPeerAnsweringGarbage adds a peer to the delegation that answers every
// query with garbage (wrong ID, random bytes, wrong question, truncated,
// records for other names, SERVFAIL with data, a CNAME out of the zone).
// Every cluster keeps answering from the good peers, never hands out the
// garbage peer's address, and keeps running.
func TestPeerAnsweringGarbage(t *testing.T) {
	f := newFleet(t)
	badIP := harness.NewIP(t)
	g := startGarbagePeer(t, badIP)
	f.delegation["bad"] = nsEntry{name: nsName("bad"), ip: badIP}
	f.start(t, fleetOptions{})

	deadline := time.Now().Add(splitBrain + 3*peerRefresh)
	queries := 0
	for time.Now().Before(deadline) {
		for _, tag := range tags {
			c := f.clusters[tag]
			for _, name := range []string{hostRR, hostDefault, hostFailover, hostWeighted} {
				start := time.Now()
				got, err := ask(c.addr, name, dns.TypeA)
				queries++
				if err != nil {
					t.Fatalf("%s from %s: %v", name, tag, err)
				}
				if d := time.Since(start); d > peerTimeout+slack {
					t.Errorf("%s from %s took %v", name, tag, d)
				}
				for _, ip := range got {
					if ip == evil {
						t.Fatalf("%s from %s = %v: the garbage peer's address was served", name, tag, got)
					}
				}
				if name == hostRR && !equal(got, f.union(tags...)) {
					t.Errorf("%s from %s = %v, want the good clusters' %v", name, tag, got, f.union(tags...))
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	seen := g.answered()
	t.Logf("%d client queries; garbage peer answered %v", queries, seen)
	for m := garbageMode(0); m < garbageModes; m++ {
		if seen[m] == 0 {
			t.Errorf("the garbage peer was never asked enough to send %q", m)
		}
	}
	for _, tag := range tags {
		c := f.clusters[tag]
		if !c.srv.Running() {
			t.Errorf("cluster %s exited: %v", tag, c.srv.ExitErr())
			continue
		}
		// The explain record shows the garbage peer as not up.
		txt, _, err := askTXTFrom("127.0.0.1", c.addr, "_gslb-explain."+hostRR)
		if err != nil {
			t.Fatal(err)
		}
		badLine := false
		for _, line := range txt {
			badLine = badLine || strings.HasPrefix(line, "tag bad ")
			if strings.HasPrefix(line, "tag bad ") && strings.Contains(line, "state up") {
				t.Errorf("%s's explain shows the garbage peer up: %q", tag, line)
			}
		}
		if !badLine {
			t.Errorf("%s's explain %q does not mention the garbage peer", tag, txt)
		}
	}
}

// TestOversizedPeerAnswerIsBounded adds a peer that answers every
// localtargets- question with 300 valid A records (TC over UDP, complete
// over TCP): the clusters take a bounded number of them, keep answering,
// and a client gets the whole assembled answer over TCP.
func TestOversizedPeerAnswerIsBounded(t *testing.T) {
	f := newFleet(t)
	bigIP := harness.NewIP(t)
	const sent = 300
	// A well-behaved server: over UDP it truncates to the client's buffer
	// and sets TC; over TCP it sends all 300.
	handler := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		if r.Question[0].Qtype == dns.TypeA {
			for i := range sent {
				rr, _ := dns.NewRR(fmt.Sprintf("%s 5 IN A 10.50.%d.%d", r.Question[0].Name, i/250, i%250+1))
				m.Answer = append(m.Answer, rr)
			}
		}
		if w.RemoteAddr().Network() == "udp" {
			size := dns.MinMsgSize
			if o := r.IsEdns0(); o != nil {
				size = int(o.UDPSize())
			}
			m.Truncate(size)
		}
		w.WriteMsg(m)
	})
	for _, network := range []string{"udp", "tcp"} {
		srv := &dns.Server{Addr: net.JoinHostPort(bigIP, "53"), Net: network, Handler: handler}
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go srv.ListenAndServe()
		<-started
		t.Cleanup(func() { srv.Shutdown() })
	}
	f.delegation["big"] = nsEntry{name: nsName("big"), ip: bigIP}
	f.start(t, fleetOptions{})

	for _, tag := range tags {
		c := f.clusters[tag]
		testkit.Eventually(t, 3*peerRefresh, "the answer with the big peer's targets", func() (bool, string) {
			m, err := harness.Ask(c.addr, hostRR, dns.TypeA, harness.TCP)
			if err != nil {
				return false, err.Error()
			}
			got := harness.Targets(m, dns.TypeA)
			big := 0
			for _, ip := range got {
				if strings.HasPrefix(ip, "10.50.") {
					big++
				}
			}
			if big >= sent {
				t.Fatalf("%s at %s carries all %d targets of the oversized peer answer: not bounded", hostRR, tag, big)
			}
			// The good clusters' targets are all there.
			for _, ip := range f.union(tags...) {
				if !slices.Contains(got, ip) {
					return false, fmt.Sprintf("%s at %s = %d targets, missing %s", hostRR, tag, len(got), ip)
				}
			}
			if big > 0 {
				t.Logf("%s at %s over TCP: %d targets, %d of them from the peer's %d", hostRR, tag, len(got), big, sent)
				return true, ""
			}
			return false, fmt.Sprintf("%s at %s = %d targets, none from the big peer (a valid answer, truncated over UDP, complete over TCP)", hostRR, tag, len(got))
		})
	}
	for _, tag := range tags {
		if c := f.clusters[tag]; !c.srv.Running() {
			t.Errorf("cluster %s exited: %v", tag, c.srv.ExitErr())
		}
	}
}
