package splitdns

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
	"github.com/fleetdns/fleetdns/internal/testkit"

	"github.com/miekg/dns"
)

// upstreamServer is a DNS server on 127.0.0.1 (UDP and TCP, one port) that
// answers with h and counts the queries it saw; health checks (". NS") are
// answered and not counted.
type upstreamServer struct {
	addr    string
	queries atomic.Int32
	last    atomic.Pointer[dns.Msg]
	udp     *dns.Server
	tcp     *dns.Server
}

func newUpstream(t *testing.T, h func(w dns.ResponseWriter, r *dns.Msg)) *upstreamServer {
	t.Helper()
	u := &upstreamServer{}
	handler := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		if r.Question[0].Name == "." { // a health check
			m := new(dns.Msg)
			m.SetReply(r)
			w.WriteMsg(m)
			return
		}
		u.queries.Add(1)
		u.last.Store(r.Copy())
		h(w, r)
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenPacket("udp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	u.addr = l.Addr().String()
	started := make(chan struct{}, 2)
	u.tcp = &dns.Server{Listener: l, Handler: handler, NotifyStartedFunc: func() { started <- struct{}{} }}
	u.udp = &dns.Server{PacketConn: pc, Handler: handler, NotifyStartedFunc: func() { started <- struct{}{} }}
	go u.tcp.ActivateAndServe()
	go u.udp.ActivateAndServe()
	<-started
	<-started
	t.Cleanup(func() { u.udp.Shutdown(); u.tcp.Shutdown() })
	return u
}

// answerA answers every A query with ip.
func answerA(ip string) func(w dns.ResponseWriter, r *dns.Msg) {
	return func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		m.Answer = append(m.Answer, test.A(r.Question[0].Name+" 60 IN A "+ip))
		if o := r.IsEdns0(); o != nil {
			m.SetEdns0(o.UDPSize(), false)
			// Echo every option back, as a careless upstream might.
			m.IsEdns0().Option = o.Option
		}
		w.WriteMsg(m)
	}
}

// newSplitDNS sets up the plugin from a Corefile snippet and starts it.
func newSplitDNS(t *testing.T, corefile string) *SplitDNS {
	t.Helper()
	c := caddy.NewTestController("dns", corefile)
	s, kd, err := parseSplitDNS(c)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	tbl, errs := s.build(kd)
	if len(errs) > 0 {
		t.Fatalf("build: %v", errs)
	}
	s.swap(tbl)
	s.OnStartup()
	t.Cleanup(func() { s.OnShutdown() })
	s.Next = test.NextHandler(dns.RcodeRefused, nil)
	return s
}

func query(t *testing.T, s *SplitDNS, name string, qtype uint16, edns bool) *dns.Msg {
	t.Helper()
	r := new(dns.Msg)
	r.SetQuestion(name, qtype)
	if edns {
		r.SetEdns0(1232, false)
	}
	rec := dnstest.NewRecorder(&test.ResponseWriter{})
	rc, err := s.ServeDNS(context.Background(), rec, r)
	if rec.Msg == nil {
		// The server writes the failure, as CoreDNS's does for these rcodes.
		m := new(dns.Msg)
		m.SetRcode(r, rc)
		_ = err
		return m
	}
	return rec.Msg
}

func TestRoutesToTheLongestZone(t *testing.T) {
	acme := newUpstream(t, answerA("10.0.0.1"))
	svc := newUpstream(t, answerA("10.0.0.2"))
	def := newUpstream(t, answerA("192.0.2.1"))
	s := newSplitDNS(t, `splitdns {
		route acme.internal `+acme.addr+`
		route svc.acme.internal `+svc.addr+`
		default `+def.addr+`
	}`)
	tests := []struct{ qname, want string }{
		{"db.svc.acme.internal.", "10.0.0.2"},
		{"SVC.Acme.Internal.", "10.0.0.2"},
		{"xsvc.acme.internal.", "10.0.0.1"},
		{"acme.internal.", "10.0.0.1"},
		{"svc.acme.internal.example.net.", "192.0.2.1"},
		{"example.com.", "192.0.2.1"},
	}
	for _, tc := range tests {
		m := query(t, s, tc.qname, dns.TypeA, true)
		if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 {
			t.Errorf("%s: rcode %s, %d answers", tc.qname, dns.RcodeToString[m.Rcode], len(m.Answer))
			continue
		}
		if got := m.Answer[0].(*dns.A).A.String(); got != tc.want {
			t.Errorf("%s: answered by %s, want %s", tc.qname, got, tc.want)
		}
		if m.Question[0].Name != tc.qname {
			t.Errorf("question case changed: %s", m.Question[0].Name)
		}
	}
}

func TestWithoutDefaultNextPluginAnswers(t *testing.T) {
	acme := newUpstream(t, answerA("10.0.0.1"))
	s := newSplitDNS(t, `splitdns {
		route acme.internal `+acme.addr+`
	}`)
	if m := query(t, s, "example.com.", dns.TypeA, false); m.Rcode != dns.RcodeRefused {
		t.Errorf("want the next plugin's REFUSED, got %s", dns.RcodeToString[m.Rcode])
	}
	if acme.queries.Load() != 0 {
		t.Errorf("upstream asked %d times for a name outside its zone", acme.queries.Load())
	}
}

func TestMarkerForwardedAndStrippedFromReply(t *testing.T) {
	up := newUpstream(t, answerA("10.0.0.1"))
	s := newSplitDNS(t, `splitdns {
		default `+up.addr+`
	}`)

	m := query(t, s, "example.com.", dns.TypeA, false)
	if m.IsEdns0() != nil {
		t.Errorf("client sent no OPT, reply has one: %v", m.IsEdns0())
	}
	if !markedBy(up.last.Load(), identity) {
		t.Errorf("forwarded query carries no marker: %v", up.last.Load())
	}

	m = query(t, s, "example.com.", dns.TypeA, true)
	o := m.IsEdns0()
	if o == nil {
		t.Fatalf("client sent OPT, reply has none")
	}
	for _, e := range o.Option {
		if e.Option() == markerCode {
			t.Errorf("marker leaked to the client: %v", o)
		}
	}
}

func markedBy(r *dns.Msg, id [8]byte) bool {
	if r == nil || r.IsEdns0() == nil {
		return false
	}
	for _, e := range r.IsEdns0().Option {
		if l, ok := e.(*dns.EDNS0_LOCAL); ok && l.Code == markerCode && strings.Contains(string(l.Data), string(id[:])) {
			return true
		}
	}
	return false
}

func TestLoopedQueryIsServfailNotForwarded(t *testing.T) {
	up := newUpstream(t, answerA("10.0.0.1"))
	s := newSplitDNS(t, `splitdns {
		default `+up.addr+`
	}`)
	r := new(dns.Msg)
	r.SetQuestion("example.com.", dns.TypeA)
	mark(r) // as if this process had forwarded it already
	rec := dnstest.NewRecorder(&test.ResponseWriter{})
	rc, err := s.ServeDNS(context.Background(), rec, r)
	if rc != dns.RcodeServerFailure || err == nil {
		t.Errorf("looped query: rcode %d err %v, want SERVFAIL", rc, err)
	}
	if n := up.queries.Load(); n != 0 {
		t.Errorf("looped query forwarded %d times, want 0", n)
	}

	// Too many splitdns hops, none of them this one.
	r = new(dns.Msg)
	r.SetQuestion("example.com.", dns.TypeA)
	r.SetEdns0(1232, false)
	r.IsEdns0().Option = append(r.IsEdns0().Option, &dns.EDNS0_LOCAL{Code: markerCode, Data: make([]byte, 8*maxHops)})
	if rc, _ := s.ServeDNS(context.Background(), dnstest.NewRecorder(&test.ResponseWriter{}), r); rc != dns.RcodeServerFailure {
		t.Errorf("query after %d hops: rcode %d, want SERVFAIL", maxHops, rc)
	}

	// Another process's marker is kept and ours appended.
	other := [8]byte{1, 2, 3, 4, 5, 6, 7, 8}
	r = new(dns.Msg)
	r.SetQuestion("example.com.", dns.TypeA)
	r.SetEdns0(1232, false)
	r.IsEdns0().Option = append(r.IsEdns0().Option, &dns.EDNS0_LOCAL{Code: markerCode, Data: other[:]})
	if rc, _ := s.ServeDNS(context.Background(), dnstest.NewRecorder(&test.ResponseWriter{}), r); rc != dns.RcodeSuccess {
		t.Errorf("query marked by another process: rcode %d, want NOERROR", rc)
	}
	if last := up.last.Load(); !markedBy(last, other) || !markedBy(last, identity) {
		t.Errorf("forwarded query should carry both identities: %v", last)
	}
	if l := r.IsEdns0().Option[0].(*dns.EDNS0_LOCAL); len(l.Data) != 8 {
		t.Errorf("client's request not restored: marker is %d bytes", len(l.Data))
	}
}

func TestTruncatedAnswerRetriedOverTCP(t *testing.T) {
	var udp, tcp atomic.Int32
	up := newUpstream(t, func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		if _, ok := w.RemoteAddr().(*net.UDPAddr); ok {
			udp.Add(1)
			m.Truncated = true // as an upstream with a small UDP limit does
			w.WriteMsg(m)
			return
		}
		tcp.Add(1)
		for i := range 20 {
			m.Answer = append(m.Answer, test.A(r.Question[0].Name+" 60 IN A 10.0.1."+string(rune('0'+i%10))))
		}
		w.WriteMsg(m)
	})
	s := newSplitDNS(t, `splitdns {
		default `+up.addr+`
	}`)
	m := query(t, s, "big.example.", dns.TypeA, true)
	if m.Truncated || len(m.Answer) == 0 {
		t.Errorf("want the full answer from TCP, got TC=%v with %d answers", m.Truncated, len(m.Answer))
	}
	if udp.Load() != 1 || tcp.Load() != 1 {
		t.Errorf("upstream saw %d UDP and %d TCP queries, want 1 and 1", udp.Load(), tcp.Load())
	}
}

func TestDeadFirstUpstreamSkipped(t *testing.T) {
	// A UDP port with nothing behind it: the kernel answers port unreachable.
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := pc.LocalAddr().String()
	pc.Close()
	live := newUpstream(t, answerA("10.0.0.1"))
	s := newSplitDNS(t, `splitdns {
		default `+dead+` `+live.addr+`
		policy sequential
		health_check 50ms
		timeout 500ms
	}`)
	for i := range 10 {
		start := time.Now()
		m := query(t, s, "example.com.", dns.TypeA, false)
		if m.Rcode != dns.RcodeSuccess {
			t.Fatalf("query %d: %s", i, dns.RcodeToString[m.Rcode])
		}
		if d := time.Since(start); !testkit.Race && d > time.Second {
			t.Errorf("query %d took %s", i, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !s.table.Load().def.upstreams[0].down() {
		t.Errorf("dead upstream not held down by health checks")
	}
}

func TestReadyWaitsForDefaultRouteOnly(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := pc.LocalAddr().String()
	pc.Close()
	live := newUpstream(t, answerA("10.0.0.1"))
	corefile := `splitdns {
		route private.corp ` + dead + `
		default ` + live.addr + `
		health_check 50ms
		%s
	}`
	s := newSplitDNS(t, strings.Replace(corefile, "%s", "", 1))
	if _, ok := testkit.Within(2*time.Second, s.Ready); !ok {
		t.Errorf("not ready although the default upstream answers")
	}
	s2 := newSplitDNS(t, strings.Replace(corefile, "%s", "ready_requires all", 1))
	time.Sleep(500 * time.Millisecond)
	if s2.Ready() {
		t.Errorf("ready_requires all: ready although private.corp's only upstream is dead")
	}
	s3 := newSplitDNS(t, strings.Replace(corefile, "%s", "ready_requires private.corp", 1))
	time.Sleep(300 * time.Millisecond)
	if s3.Ready() {
		t.Errorf("ready_requires private.corp: ready although its only upstream is dead")
	}
}

func TestUpstreamWithoutEDNSIsAskedAgainWithoutMarker(t *testing.T) {
	// An old upstream that answers FORMERR to any query with an OPT record.
	up := newUpstream(t, func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		if r.IsEdns0() != nil {
			m.SetRcode(r, dns.RcodeFormatError)
			w.WriteMsg(m)
			return
		}
		answerA("10.0.0.1")(w, r)
	})
	s := newSplitDNS(t, `splitdns {
		default `+up.addr+`
	}`)
	m := query(t, s, "example.com.", dns.TypeA, false)
	if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 {
		t.Errorf("client without EDNS: %s with %d answers, want the answer from the second try", dns.RcodeToString[m.Rcode], len(m.Answer))
	}
	// A client that sent EDNS itself gets the upstream's FORMERR, as it would directly.
	if m := query(t, s, "example.com.", dns.TypeA, true); m.Rcode != dns.RcodeFormatError {
		t.Errorf("client with EDNS: %s, want FORMERR", dns.RcodeToString[m.Rcode])
	}
}

func TestSilentUpstreamCostsOnlyTheTimeout(t *testing.T) {
	// A socket that takes queries and never answers (a paused or
	// firewalled server): no ICMP, only the timeout tells.
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	// Client queries that reach the silent upstream (health probes ask ". NS"):
	// whether the live one was asked first, without timing it (under -race).
	var asked atomic.Int32
	go func() {
		buf := make([]byte, 512)
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if m := new(dns.Msg); m.Unpack(buf[:n]) == nil && len(m.Question) == 1 && m.Question[0].Name == "example.com." {
				asked.Add(1)
			}
		}
	}()
	live := newUpstream(t, answerA("10.0.0.1"))
	s := newSplitDNS(t, `splitdns {
		default `+pc.LocalAddr().String()+` `+live.addr+`
		policy sequential
		timeout 300ms
		health_check 100ms
	}`)
	start := time.Now()
	m := query(t, s, "example.com.", dns.TypeA, false)
	if d := time.Since(start); m.Rcode != dns.RcodeSuccess || !testkit.Race && d > time.Second {
		t.Errorf("first query: %s after %v, want the second upstream's answer after about 300ms", dns.RcodeToString[m.Rcode], d)
	}
	if asked.Load() == 0 {
		t.Errorf("first query: the silent upstream, first in sequence, was not asked")
	}
	// Health checks hold it down; then queries go straight to the live one.
	testkit.Eventually(t, 3*time.Second, "the silent upstream held down", func() bool { return s.table.Load().def.upstreams[0].down() })
	start = time.Now()
	before := asked.Load()
	if m := query(t, s, "example.com.", dns.TypeA, false); m.Rcode != dns.RcodeSuccess || !testkit.Race && time.Since(start) > 250*time.Millisecond { // well under the 300ms timeout
		t.Errorf("after hold-down: %s in %v", dns.RcodeToString[m.Rcode], time.Since(start))
	}
	if n := asked.Load() - before; n != 0 {
		t.Errorf("after hold-down: the held-down upstream was still asked first (%d queries)", n)
	}
}

func TestIdenticalQueriesInFlightAreCoalesced(t *testing.T) {
	release := make(chan struct{})
	up := newUpstream(t, func(w dns.ResponseWriter, r *dns.Msg) {
		<-release
		answerA("10.0.0.1")(w, r)
	})
	s := newSplitDNS(t, `splitdns {
		default `+up.addr+`
	}`)
	const n = 5
	answers := make(chan *dns.Msg, n)
	var started sync.WaitGroup
	started.Add(n)
	for i := range n {
		go func() {
			started.Done()
			r := new(dns.Msg)
			r.SetQuestion("Example.com.", dns.TypeA)
			r.Id = uint16(100 + i)
			rec := dnstest.NewRecorder(&test.ResponseWriter{})
			s.ServeDNS(context.Background(), rec, r)
			if rec.Msg != nil && (rec.Msg.Id != r.Id || (r.IsEdns0() == nil) != (rec.Msg.IsEdns0() == nil)) {
				t.Errorf("waiter %d got id %d, OPT %v", i, rec.Msg.Id, rec.Msg.IsEdns0() != nil)
			}
			answers <- rec.Msg
		}()
	}
	// Let them all arrive (on a loaded machine a goroutine can start
	// late), then let the upstream answer.
	started.Wait()
	testkit.Eventually(t, 5*time.Second, "the upstream asked", func() bool { return up.queries.Load() >= 1 })
	time.Sleep(200 * time.Millisecond)
	close(release)
	for range n {
		if m := <-answers; m == nil || len(m.Answer) != 1 {
			t.Errorf("a coalesced query got no answer: %v", m)
		}
	}
	if q := up.queries.Load(); q > 2 {
		// Ideally 1; allow for a goroutine arriving late.
		t.Errorf("%d identical concurrent queries made %d upstream queries", n, q)
	}
}
