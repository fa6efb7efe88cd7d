package splitdns

import (
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

// fakeUpstream is a DNS server in the test process on a loopback address of
// its own, port 53, over UDP and TCP: it answers every query with one rcode
// (and for NOERROR an A record with its answer), after an optional delay,
// or not at all (silent), and counts what it was asked.
type fakeUpstream struct {
	addr   string // ip:53
	rcode  int
	answer string // the A record's address for NOERROR
	delay  time.Duration
	silent bool

	mu      sync.Mutex
	queries map[string]int // per "udp name" / "tcp name", health checks left out
	probes  []probe        // the health checks (queries of NS) it was sent
	conns   int            // TCP connections accepted
}

type probe struct {
	name string
	rd   bool
}

// startFake starts a fakeUpstream; the test stops it.
func startFake(t *testing.T, rcode int, answer string, opts ...func(*fakeUpstream)) *fakeUpstream {
	t.Helper()
	u := &fakeUpstream{addr: harness.NewAddr(t), rcode: rcode, answer: answer, queries: map[string]int{}}
	for _, o := range opts {
		o(u)
	}
	pc, err := net.ListenPacket("udp", u.addr)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", u.addr)
	if err != nil {
		pc.Close()
		t.Fatal(err)
	}
	udp := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(u.serve("udp"))}
	tcp := &dns.Server{Listener: countingListener{l, u}, Handler: dns.HandlerFunc(u.serve("tcp"))}
	go udp.ActivateAndServe()
	go tcp.ActivateAndServe()
	t.Cleanup(func() { udp.Shutdown(); tcp.Shutdown() })
	return u
}

func withDelay(d time.Duration) func(*fakeUpstream) { return func(u *fakeUpstream) { u.delay = d } }
func silent(u *fakeUpstream)                        { u.silent = true }

func (u *fakeUpstream) serve(proto string) func(w dns.ResponseWriter, r *dns.Msg) {
	return func(w dns.ResponseWriter, r *dns.Msg) {
		if len(r.Question) != 1 {
			return
		}
		q := r.Question[0]
		u.mu.Lock()
		if q.Qtype == dns.TypeNS {
			u.probes = append(u.probes, probe{q.Name, r.RecursionDesired})
		} else if q.Name != "." {
			u.queries[proto+" "+strings.ToLower(q.Name)]++
		}
		u.mu.Unlock()
		if u.silent {
			return
		}
		time.Sleep(u.delay)
		m := new(dns.Msg)
		m.SetRcode(r, u.rcode)
		if u.rcode == dns.RcodeSuccess && q.Qtype == dns.TypeA && u.answer != "" {
			rr, _ := dns.NewRR(q.Name + " 60 IN A " + u.answer)
			m.Answer = append(m.Answer, rr)
		}
		w.WriteMsg(m)
	}
}

// asked returns how often name was asked over proto ("udp", "tcp", or ""
// for both).
func (u *fakeUpstream) asked(name, proto string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	name = strings.ToLower(dns.Fqdn(name))
	if proto != "" {
		return u.queries[proto+" "+name]
	}
	return u.queries["udp "+name] + u.queries["tcp "+name]
}

func (u *fakeUpstream) probesSent() []probe {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]probe(nil), u.probes...)
}

func (u *fakeUpstream) tcpConns() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.conns
}

type countingListener struct {
	net.Listener
	u *fakeUpstream
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.u.mu.Lock()
		l.u.conns++
		l.u.mu.Unlock()
	}
	return c, err
}
