package splitdns

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"

	"github.com/miekg/dns"
)

// The fuzz targets below run their committed seeds (testdata/fuzz/<name>/)
// as ordinary tests; `make fuzz` explores further. Clients, upstreams and
// the kube-dns ConfigMap are untrusted: whatever they hold is answered,
// refused or logged and left out, never a panic.

// FuzzParse feeds arbitrary Corefile text to the splitdns stanza parser and,
// when it parses, builds the routing table from it.
func FuzzParse(f *testing.F) {
	f.Add("splitdns {\n route acme.internal 10.0.0.1 10.0.0.2:5353\n default 192.0.2.1\n policy sequential\n timeout 2s\n}")
	f.Add("splitdns {\n route acme.internal 10.0.0.1 {\n  failover SERVFAIL\n  next NXDOMAIN\n  except x.acme.internal\n  health_check 1s no_rec domain a.b\n  max_concurrent 5\n }\n max_concurrent 1000\n force_tcp\n}")
	f.Fuzz(func(t *testing.T, input string) {
		s, kd, err := parseSplitDNS(caddy.NewTestController("dns", input))
		if err != nil {
			return
		}
		if s == nil {
			t.Fatal("parse returned neither a plugin nor an error")
		}
		tbl, _ := s.build(kd)
		if tbl == nil {
			t.Fatal("build returned no table")
		}
	})
}

// FuzzKubeDNSFiles parses arbitrary stubDomains and upstreamNameservers file
// contents and builds routes from them: bad JSON is an error, bad entries are
// left out.
func FuzzKubeDNSFiles(f *testing.F) {
	f.Add([]byte(`{"acme.local": ["1.2.3.4", "1.2.3.5:5353"], "corp.example": ["[2001:db8::1]:53"]}`), []byte(`["8.8.8.8", "8.8.4.4"]`))
	f.Fuzz(func(t *testing.T, stubs, upstreams []byte) {
		kd, err := kubeDNSFiles{stubDomains: stubs, upstreamNameservers: upstreams}.parse()
		if err != nil {
			return
		}
		s := New()
		tbl, _ := s.build(kd)
		if tbl == nil {
			t.Fatal("build returned no table")
		}
		for zone := range kd.stubDomains {
			if tbl.lookup(zone) == nil {
				t.Fatalf("stub domain %s parsed but not routed", zone)
			}
		}
	})
}

// fuzzUpstream is a real upstream on loopback (UDP and TCP on one port). It
// answers health checks (".") properly; every other query gets reply, with
// the query's ID written over its first two bytes, or, when reply is nil, a
// well-formed answer.
type fuzzUpstream struct {
	addr  string
	reply atomic.Pointer[[]byte]
}

func (u *fuzzUpstream) answer(query []byte) []byte {
	q := new(dns.Msg)
	if err := q.Unpack(query); err != nil || len(q.Question) == 0 {
		return nil
	}
	if p := u.reply.Load(); p != nil && q.Question[0].Name != "." {
		b := append([]byte(nil), (*p)...)
		if len(b) >= 2 {
			binary.BigEndian.PutUint16(b, q.Id)
		}
		return b
	}
	m := new(dns.Msg)
	m.SetReply(q)
	if q.Question[0].Qtype == dns.TypeA {
		m.Answer = []dns.RR{test.A(q.Question[0].Name + " 60 IN A 10.0.0.1")}
	}
	if o := q.IsEdns0(); o != nil {
		m.SetEdns0(o.UDPSize(), o.Do())
		m.IsEdns0().Option = o.Option // echo every option, as a careless upstream might
	}
	b, _ := m.Pack()
	return b
}

func (u *fuzzUpstream) serveUDP(pc net.PacketConn) {
	buf := make([]byte, 65535)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		if b := u.answer(buf[:n]); b != nil {
			pc.WriteTo(b, from)
		}
	}
}

func (u *fuzzUpstream) serveTCP(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			for {
				c.SetDeadline(time.Now().Add(2 * time.Second))
				var n uint16
				if binary.Read(c, binary.BigEndian, &n) != nil {
					return
				}
				q := make([]byte, n)
				if _, err := io.ReadFull(c, q); err != nil {
					return
				}
				b := u.answer(q)
				if b == nil {
					return
				}
				out := binary.BigEndian.AppendUint16(nil, uint16(len(b)))
				if _, err := c.Write(append(out, b...)); err != nil {
					return
				}
			}
		}()
	}
}

var (
	fuzzOnce sync.Once
	fuzzS    *SplitDNS
	fuzzU    *fuzzUpstream
	fuzzErr  error
)

// fuzzSplitDNS is a representative splitdns for the whole fuzzing run: a
// private zone and the default route, both to the fuzz upstream.
func fuzzSplitDNS(tb testing.TB) (*SplitDNS, *fuzzUpstream) {
	fuzzOnce.Do(func() {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fuzzErr = err
			return
		}
		pc, err := net.ListenPacket("udp", l.Addr().String())
		if err != nil {
			fuzzErr = err
			return
		}
		u := &fuzzUpstream{addr: l.Addr().String()}
		go u.serveUDP(pc)
		go u.serveTCP(l)
		s, kd, err := parseSplitDNS(caddy.NewTestController("dns", `splitdns {
			route acme.internal `+u.addr+`
			default `+u.addr+`
			timeout 200ms
			health_check 100ms
		}`))
		if err != nil {
			fuzzErr = err
			return
		}
		tbl, errs := s.build(kd)
		if len(errs) > 0 {
			fuzzErr = errs[0]
			return
		}
		s.swap(tbl)
		s.OnStartup()
		s.Next = test.NextHandler(dns.RcodeRefused, nil)
		fuzzS, fuzzU = s, u
	})
	if fuzzErr != nil {
		tb.Fatal(fuzzErr)
	}
	return fuzzS, fuzzU
}

// serve sends r through s as a UDP client would and returns what was written.
func fuzzServe(t *testing.T, s *SplitDNS, r *dns.Msg) *dns.Msg {
	rec := dnstest.NewRecorder(&test.ResponseWriter{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s.ServeDNS(ctx, rec, r)
	if rec.Msg == nil {
		return nil
	}
	if _, err := rec.Msg.Pack(); err != nil {
		t.Fatalf("reply does not pack: %v\n%s", err, rec.Msg)
	}
	if rec.Msg.Id != r.Id {
		t.Fatalf("reply ID %d to query ID %d", rec.Msg.Id, r.Id)
	}
	if o := rec.Msg.IsEdns0(); o != nil {
		if r.IsEdns0() == nil {
			t.Fatalf("OPT in the reply to a query without one:\n%s", rec.Msg)
		}
		for _, e := range o.Option {
			if e.Option() == markerCode {
				t.Fatalf("loop marker leaked to the client:\n%s", rec.Msg)
			}
		}
	}
	return rec.Msg
}

// FuzzServeDNS serves arbitrary wire-format queries through splitdns to a
// real upstream.
func FuzzServeDNS(f *testing.F) {
	for _, q := range []struct {
		name  string
		qtype uint16
		edns  bool
	}{
		{"db.acme.internal.", dns.TypeA, false}, {"db.ACME.internal.", dns.TypeAAAA, true},
		{"www.example.com.", dns.TypeA, true}, {".", dns.TypeNS, false}, {"acme.internal.", dns.TypeANY, true},
	} {
		m := new(dns.Msg)
		m.SetQuestion(q.name, q.qtype)
		if q.edns {
			m.SetEdns0(1232, true)
		}
		b, _ := m.Pack()
		f.Add(b)
	}
	// A query that already carries someone's loop marker.
	m := new(dns.Msg)
	m.SetQuestion("db.acme.internal.", dns.TypeA)
	m.SetEdns0(1232, false)
	m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_LOCAL{Code: markerCode, Data: []byte("12345678")})
	b, _ := m.Pack()
	f.Add(b)
	f.Fuzz(func(t *testing.T, wire []byte) {
		s, _ := fuzzSplitDNS(t)
		r := new(dns.Msg)
		if r.Unpack(wire) != nil || len(r.Question) == 0 {
			return
		}
		fuzzServe(t, s, r)
	})
}

// FuzzUpstreamAnswer has the upstream answer with arbitrary bytes (its ID
// set to the query's, so that the answer is read, not dropped): splitdns
// answers the client, SERVFAIL or FORMERR, never a panic, never a marker leak.
func FuzzUpstreamAnswer(f *testing.F) {
	good := func(edit func(m *dns.Msg)) []byte {
		q := new(dns.Msg)
		q.SetQuestion("db.acme.internal.", dns.TypeA)
		m := new(dns.Msg)
		m.SetReply(q)
		m.Answer = []dns.RR{test.A("db.acme.internal. 60 IN A 10.0.0.1")}
		edit(m)
		b, err := m.Pack()
		if err != nil {
			panic(err)
		}
		return b
	}
	f.Add(good(func(*dns.Msg) {}), true)
	f.Add(good(func(m *dns.Msg) { m.Question[0].Name = "other.internal." }), false)
	f.Add(good(func(m *dns.Msg) { m.Truncated = true; m.Answer = nil }), false)
	f.Add(good(func(m *dns.Msg) {
		m.SetEdns0(4096, false)
		m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_LOCAL{Code: markerCode, Data: []byte("12345678")})
	}), false)
	f.Add(good(func(m *dns.Msg) {
		for i := range 200 {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: "db.acme.internal.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.IPv4(10, 0, byte(i/256), byte(i))})
		}
	}), true)
	f.Add([]byte{0, 0, 0x81}, false)
	f.Fuzz(func(t *testing.T, reply []byte, edns bool) {
		s, u := fuzzSplitDNS(t)
		u.reply.Store(&reply)
		defer u.reply.Store(nil)
		r := new(dns.Msg)
		r.SetQuestion("db.acme.internal.", dns.TypeA)
		if edns {
			r.SetEdns0(1232, false)
		}
		ret := fuzzServe(t, s, r)
		if ret != nil && ret.Rcode == dns.RcodeSuccess && len(ret.Question) > 0 && ret.Question[0].Name != r.Question[0].Name {
			t.Fatalf("answer to another question passed to the client:\n%s", ret)
		}
	})
}

// TestUpstreamTwoOPTsNoneReachTheClient: a broken upstream that answers with
// two OPT records must not hand a client that sent no EDNS an OPT record
// (RFC 6891 §7). Found by FuzzUpstreamAnswer (seed two-opt).
func TestUpstreamTwoOPTsNoneReachTheClient(t *testing.T) {
	s, u := fuzzSplitDNS(t)
	q := new(dns.Msg)
	q.SetQuestion("db.acme.internal.", dns.TypeA)
	m := new(dns.Msg)
	m.SetReply(q)
	m.Answer = []dns.RR{test.A("db.acme.internal. 60 IN A 10.0.0.1")}
	m.SetEdns0(512, false)
	m.Extra = append(m.Extra, &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}})
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	u.reply.Store(&b)
	defer u.reply.Store(nil)
	ret := fuzzServe(t, s, q.Copy())
	if ret == nil || len(ret.Answer) != 1 {
		t.Fatalf("want the upstream's answer, got\n%v", ret)
	}
	for _, rr := range ret.Extra {
		if rr.Header().Rrtype == dns.TypeOPT {
			t.Fatalf("OPT record reached a client that sent none:\n%s", ret)
		}
	}
}
