package gslb

import (
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"
	"github.com/fleetdns/fleetdns/internal/store"
	"github.com/fleetdns/fleetdns/internal/store/storetest"
	"github.com/fleetdns/fleetdns/internal/testkit"

	"github.com/miekg/dns"
)

const zone = "gslb.example.com."

// zoneSOA is the negative SOA the test store gives for the zone.
const zoneSOA = zone + " 300 IN SOA ns1." + zone + " hostmaster." + zone + " 42 7200 1800 86400 60"

// newFakeStore is the store k8scrd offers, with hosts set by the test.
func newFakeStore(hosts ...*store.Host) *storetest.Store {
	s := storetest.New(hosts...)
	s.SetSOA(zoneSOA)
	return s
}

// host builds a store.Host: addresses with a ':' are AAAA targets.
var host = storetest.Host

func withProps(h *store.Host, kv ...string) *store.Host {
	for i := 0; i < len(kv); i += 2 {
		h.Properties[kv[i]] = kv[i+1]
	}
	return h
}

// fakePeer is another cluster's DNS server answering localtargets-<host>
// from its own targets, on a real UDP socket.
type fakePeer struct {
	addr    string
	srv     *dns.Server
	mu      sync.Mutex
	targets map[string][]string // host -> addresses
	ttl     uint32
	mode    string // "" answers; silent, servfail, refused, wrongid, wrongname, cname
	queries atomic.Int64
	signed  atomic.Int64 // queries that carried a TSIG
}

// startPeer starts a fakePeer on 127.0.0.1 (startPeerAt for another address).
func startPeer(t testing.TB, targets map[string][]string) *fakePeer {
	t.Helper()
	return startPeerAt(t, "127.0.0.1:0", targets)
}

// startPeerAt starts a fakePeer answering on addr (UDP).
func startPeerAt(t testing.TB, addr string, targets map[string][]string) *fakePeer {
	t.Helper()
	return startPeerWith(t, addr, targets, nil)
}

// startPeerWith starts a fakePeer on addr whose answers handler gives
// (nil: the fakePeer's own).
func startPeerWith(t testing.TB, addr string, targets map[string][]string, handler func(*fakePeer) dns.HandlerFunc) *fakePeer {
	t.Helper()
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	p := &fakePeer{addr: pc.LocalAddr().String(), targets: targets, ttl: 30}
	h := dns.HandlerFunc(p.serve)
	if handler != nil {
		h = handler(p)
	}
	started := make(chan struct{})
	p.srv = &dns.Server{PacketConn: pc, Handler: h, NotifyStartedFunc: func() { close(started) }}
	go p.srv.ActivateAndServe()
	<-started
	t.Cleanup(func() { p.srv.Shutdown() })
	return p
}

func (p *fakePeer) set(host string, addrs ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.targets[host] = addrs
}

func (p *fakePeer) setMode(m string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = m
}

func (p *fakePeer) serve(w dns.ResponseWriter, r *dns.Msg) {
	p.queries.Add(1)
	if r.IsTsig() != nil {
		p.signed.Add(1)
	}
	p.mu.Lock()
	mode, ttl := p.mode, p.ttl
	q := r.Question[0]
	h, isLT := strings.CutPrefix(strings.ToLower(q.Name), "localtargets-")
	addrs, found := p.targets[h]
	p.mu.Unlock()

	m := new(dns.Msg)
	m.SetReply(r)
	switch mode {
	case "silent":
		return
	case "servfail":
		m.Rcode = dns.RcodeServerFailure
		w.WriteMsg(m)
		return
	case "refused":
		m.Rcode = dns.RcodeRefused
		w.WriteMsg(m)
		return
	case "wrongid":
		m.Id++
	case "wrongname":
		m.Question[0].Name = "other." + zone
	case "cname":
		m.Answer = append(m.Answer, &dns.CNAME{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: ttl}, Target: "x." + zone})
		w.WriteMsg(m)
		return
	}
	if !isLT || !found {
		m.Rcode = dns.RcodeNameError
		w.WriteMsg(m)
		return
	}
	hdr := dns.RR_Header{Name: q.Name, Rrtype: q.Qtype, Class: dns.ClassINET, Ttl: ttl}
	for _, a := range addrs {
		ip := net.ParseIP(a)
		switch {
		case q.Qtype == dns.TypeA && ip.To4() != nil:
			m.Answer = append(m.Answer, &dns.A{Hdr: hdr, A: ip})
		case q.Qtype == dns.TypeAAAA && ip.To4() == nil:
			m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr, AAAA: ip})
		}
	}
	w.WriteMsg(m)
}

// next is the plugin after gslb (k8scrd): it answers the zone's SOA and
// says NXDOMAIN to everything else; calls counts what fell through.
type next struct{ calls atomic.Int64 }

func (n *next) Name() string { return "k8scrd" }

func (n *next) ServeDNS(_ context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	soa := test.SOA(zone + " 300 IN SOA ns1." + zone + " hostmaster." + zone + " 42 7200 1800 86400 60")
	if r.Question[0].Qtype == dns.TypeSOA && r.Question[0].Name == zone {
		m.Answer = []dns.RR{soa}
		w.WriteMsg(m)
		return dns.RcodeSuccess, nil
	}
	n.calls.Add(1)
	m.Rcode = dns.RcodeNameError
	m.Ns = []dns.RR{soa}
	w.WriteMsg(m)
	return dns.RcodeNameError, nil
}

// newGSLB parses a gslb block, wires the fake store and next plugin, and
// starts the background loops.
func newGSLB(t testing.TB, corefile string, st *storetest.Store) (*GSLB, *next) {
	t.Helper()
	c := caddy.NewTestController("dns", corefile)
	g, err := parse(c)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	n := &next{}
	g.Next = n
	g.store = st
	g.start()
	t.Cleanup(g.stop)
	return g, n
}

// waitReady waits for g to be ready, and then for every peer to have
// answered once or failed twice: ready comes after a first round whether
// or not the peer answered it, and on a loaded machine one exchange can
// time out, leaving a live peer down until its retry after the backoff.
func waitReady(t testing.TB, g *GSLB) {
	t.Helper()
	testkit.Eventually(t, 5*time.Second, "gslb ready", g.Ready)
	testkit.Eventually(t, 10*time.Second, "every peer answered once or failed twice", func() bool {
		for _, p := range g.peers.Load().byTag {
			p.mu.Lock()
			settled := p.lastOK.Load() != 0 || p.fails >= 2
			p.mu.Unlock()
			if !settled {
				return false
			}
		}
		return true
	})
}

type queryOpt func(m *dns.Msg, w *test.ResponseWriter)

func from(ip string) queryOpt {
	return func(_ *dns.Msg, w *test.ResponseWriter) { w.RemoteIP = ip }
}

func withECS(family uint16, addr string, bits uint8) queryOpt {
	return func(m *dns.Msg, _ *test.ResponseWriter) {
		o := m.IsEdns0()
		if o == nil {
			m.SetEdns0(4096, false)
			o = m.IsEdns0()
		}
		o.Option = append(o.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: family, SourceNetmask: bits, Address: net.ParseIP(addr)})
	}
}

func ask(t testing.TB, g *GSLB, name string, qtype uint16, opts ...queryOpt) *dns.Msg {
	t.Helper()
	return askCtx(context.Background(), t, g, name, qtype, opts...)
}

func askCtx(ctx context.Context, t testing.TB, g *GSLB, name string, qtype uint16, opts ...queryOpt) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	rw := &test.ResponseWriter{}
	for _, o := range opts {
		o(m, rw)
	}
	rec := dnstest.NewRecorder(rw)
	if _, err := g.ServeDNS(ctx, rec, m); err != nil {
		t.Fatalf("ServeDNS %s: %v", name, err)
	}
	if rec.Msg == nil {
		t.Fatalf("no reply for %s", name)
	}
	return rec.Msg
}

// addrs returns the answer's addresses, sorted as returned.
func addrs(m *dns.Msg) []string {
	var out []string
	for _, rr := range m.Answer {
		switch x := rr.(type) {
		case *dns.A:
			out = append(out, x.A.String())
		case *dns.AAAA:
			out = append(out, x.AAAA.String())
		}
	}
	return out
}

func withEDNS() queryOpt {
	return func(m *dns.Msg, _ *test.ResponseWriter) { m.SetEdns0(4096, false) }
}

// replyECS returns the reply's ECS option, nil when it has none; hasOPT is
// whether the reply had an OPT record at all.
func replyECS(m *dns.Msg) (ecs *dns.EDNS0_SUBNET, hasOPT bool) {
	o := m.IsEdns0()
	if o == nil {
		return nil, false
	}
	for _, opt := range o.Option {
		if e, ok := opt.(*dns.EDNS0_SUBNET); ok {
			return e, true
		}
	}
	return nil, true
}
