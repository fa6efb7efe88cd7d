package gslb

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"
	"github.com/fleetdns/fleetdns/internal/testkit"

	"github.com/miekg/dns"
)

// The fuzz targets below run their committed seeds (testdata/fuzz/<name>/)
// as ordinary tests; `make fuzz` explores further. Peers and clients are
// untrusted: whatever they send is answered, refused or counted as a peer
// failure, never a panic.

// FuzzParse feeds arbitrary Corefile text to the gslb stanza parser.
func FuzzParse(f *testing.F) {
	f.Add("gslb gslb.example.com {\n geotag eu\n peer us 127.0.0.1:53\n strategy failover\n primary eu us\n}")
	f.Fuzz(func(t *testing.T, input string) {
		g, err := parse(caddy.NewTestController("dns", input))
		if err == nil && g == nil {
			t.Fatal("parse returned neither a plugin nor an error")
		}
		if err == nil && g.geo != nil && g.geo.mmdb != nil {
			g.geo.mmdb.Close()
		}
	})
}

const fuzzApp = "app." + zone

var (
	fuzzOnce sync.Once
	fuzzG    *GSLB
	fuzzErr  error
)

// fuzzPeerServe is another cluster answering localtargets-<host> for every
// host in the zone with two addresses per family.
func fuzzPeerServe(w dns.ResponseWriter, r *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(r)
	q := r.Question[0]
	hdr := dns.RR_Header{Name: q.Name, Rrtype: q.Qtype, Class: dns.ClassINET, Ttl: 30}
	switch q.Qtype {
	case dns.TypeA:
		m.Answer = []dns.RR{&dns.A{Hdr: hdr, A: net.IPv4(10, 1, 0, 1)}, &dns.A{Hdr: hdr, A: net.IPv4(10, 1, 0, 2)}}
	case dns.TypeAAAA:
		m.Answer = []dns.RR{&dns.AAAA{Hdr: hdr, AAAA: net.ParseIP("2001:db8:1::1")}}
	}
	w.WriteMsg(m)
}

// fuzzGSLB is a representative gslb for the whole fuzzing run: two peers
// (one answering, one that never does), geoip by default with CIDRs, hosts
// with each strategy, explain allowed from loopback.
func fuzzGSLB(tb testing.TB) *GSLB {
	fuzzOnce.Do(func() {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			fuzzErr = err
			return
		}
		srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(fuzzPeerServe)}
		go srv.ActivateAndServe()
		// A peer that never answers: a bound socket nobody reads.
		dead, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			fuzzErr = err
			return
		}
		c := caddy.NewTestController("dns", `gslb `+zone+` {
			geotag eu
			peer us `+pc.LocalAddr().String()+`
			peer ap `+dead.LocalAddr().String()+`
			strategy geoip
			geo cidr 10.0.0.0/8 eu
			geo cidr 192.0.2.0/24 us
			geo cidr 2001:db8::/32 ap
			primary eu us ap
			timeout 50ms
			refresh 1s
		}`)
		g, err := parse(c)
		if err != nil {
			fuzzErr = err
			return
		}
		g.Next = &next{}
		g.store = newFakeStore(
			host(fuzzApp, "10.0.0.1", "2001:db8::1"),
			withProps(host("fo."+zone, "10.0.0.2"), "gslb/strategy", "failover", "gslb/primary", "us,eu"),
			withProps(host("rr."+zone, "10.0.0.3"), "gslb/strategy", "roundRobin", "gslb/ttl", "5"),
			withProps(host("w."+zone, "10.0.0.4"), "gslb/strategy", "weighted", "gslb/weight", "eu=1,us=3"),
			host("empty."+zone),
		)
		g.start()
		// Ready: every peer asked once. A gslb that never gets there would
		// fuzz only the start-up path (SERVFAIL), so stop instead.
		if _, ok := testkit.Within(5*time.Second, g.Ready); !ok {
			fuzzErr = fmt.Errorf("gslb not ready within 5s: fuzzing it would exercise only the start-up answers")
			return
		}
		fuzzG = g
	})
	if fuzzErr != nil {
		tb.Fatal(fuzzErr)
	}
	return fuzzG
}

// FuzzServeDNS serves arbitrary wire-format queries, from a loopback
// (explain allowed) or another source address.
func FuzzServeDNS(f *testing.F) {
	add := func(name string, qtype uint16, ecs *dns.EDNS0_SUBNET, loopback bool) {
		m := new(dns.Msg)
		m.SetQuestion(name, qtype)
		if ecs != nil {
			m.SetEdns0(1232, false)
			m.IsEdns0().Option = append(m.IsEdns0().Option, ecs)
		}
		b, err := m.Pack()
		if err != nil {
			panic(err)
		}
		f.Add(b, loopback)
	}
	add(fuzzApp, dns.TypeA, nil, false)
	add("APP.gslb.Example.com.", dns.TypeAAAA, nil, false)
	add("fo."+zone, dns.TypeA, nil, false)
	add("rr."+zone, dns.TypeAAAA, nil, false)
	add("w."+zone, dns.TypeA, nil, false)
	add("empty."+zone, dns.TypeA, nil, false)
	add(fuzzApp, dns.TypeA, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: net.ParseIP("192.0.2.0").To4()}, false)
	add(fuzzApp, dns.TypeAAAA, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 2, SourceNetmask: 48, Address: net.ParseIP("2001:db8:1::")}, false)
	add(fuzzApp, dns.TypeA, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 0}, false)
	add(explainLabel+fuzzApp, dns.TypeTXT, nil, true)
	add(explainLabel+fuzzApp, dns.TypeTXT, nil, false)
	add("localtargets-"+fuzzApp, dns.TypeA, nil, false)
	add(zone, dns.TypeA, nil, false)
	f.Fuzz(func(t *testing.T, wire []byte, loopback bool) {
		g := fuzzGSLB(t)
		r := new(dns.Msg)
		if r.Unpack(wire) != nil || len(r.Question) == 0 {
			return // the server answers FORMERR before any plugin sees it
		}
		rw := &test.ResponseWriter{}
		if loopback {
			rw.RemoteIP = "127.0.0.1"
		}
		rec := dnstest.NewRecorder(rw)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := g.ServeDNS(ctx, rec, r); err != nil {
			return
		}
		if rec.Msg == nil {
			return
		}
		if _, err := rec.Msg.Pack(); err != nil {
			t.Fatalf("reply does not pack: %v\n%s", err, rec.Msg)
		}
		// RFC 7871 §7.2.2: no ECS in a reply to a query without one.
		if r.IsEdns0() == nil && rec.Msg.IsEdns0() != nil {
			t.Fatalf("OPT in a reply to a query without one:\n%s", rec.Msg)
		}
		for _, rr := range rec.Msg.Answer {
			if rr.Header().Rrtype == dns.TypeTXT && !loopback {
				t.Fatalf("explain record to a client outside the explain ACL:\n%s", rec.Msg)
			}
		}
	})
}

// FuzzPeerAnswer parses arbitrary bytes as a peer's answer to a
// localtargets question: the result is an error or a bounded set of
// addresses of the asked family, never a panic.
func FuzzPeerAnswer(f *testing.F) {
	qname := "localtargets-" + fuzzApp
	add := func(build func(q *dns.Msg) *dns.Msg, aaaa, sameID bool) {
		q := new(dns.Msg)
		qt := dns.TypeA
		if aaaa {
			qt = dns.TypeAAAA
		}
		q.SetQuestion(qname, qt)
		b, err := build(q).Pack()
		if err != nil {
			panic(err)
		}
		f.Add(b, aaaa, sameID)
	}
	reply := func(q *dns.Msg) *dns.Msg {
		m := new(dns.Msg)
		m.SetReply(q)
		return m
	}
	add(func(q *dns.Msg) *dns.Msg { // targets
		m := reply(q)
		m.Answer = []dns.RR{test.A(qname + " 30 IN A 10.1.0.1"), test.A(qname + " 20 IN A 10.1.0.2"), test.A(qname + " 20 IN A 10.1.0.2")}
		return m
	}, false, true)
	add(func(q *dns.Msg) *dns.Msg { // AAAA targets
		m := reply(q)
		m.Answer = []dns.RR{test.AAAA(qname + " 30 IN AAAA 2001:db8::1"), test.AAAA(qname + " 30 IN AAAA ::ffff:10.0.0.1")}
		return m
	}, true, true)
	add(func(q *dns.Msg) *dns.Msg { // NXDOMAIN with SOA
		m := reply(q)
		m.Rcode = dns.RcodeNameError
		m.Ns = []dns.RR{test.SOA(zone + " 300 IN SOA ns1." + zone + " hostmaster." + zone + " 1 7200 1800 86400 60")}
		return m
	}, false, true)
	add(func(q *dns.Msg) *dns.Msg { // wrong question
		m := reply(q)
		m.Question[0].Name = "other." + zone
		return m
	}, false, true)
	add(func(q *dns.Msg) *dns.Msg { // CNAME instead of A
		m := reply(q)
		m.Answer = []dns.RR{test.CNAME(qname + " 30 IN CNAME x." + zone)}
		return m
	}, false, true)
	add(func(q *dns.Msg) *dns.Msg { // SERVFAIL
		m := reply(q)
		m.Rcode = dns.RcodeServerFailure
		return m
	}, false, false)
	add(func(q *dns.Msg) *dns.Msg { // more targets than kept
		m := reply(q)
		for i := range 100 {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: qname, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30}, A: net.IPv4(10, 2, byte(i/256), byte(i))})
		}
		return m
	}, false, true)
	f.Fuzz(func(t *testing.T, wire []byte, aaaa, sameID bool) {
		r := new(dns.Msg)
		if r.Unpack(wire) != nil {
			return // the client returns an error before parsing: a network failure
		}
		q := new(dns.Msg)
		qt := dns.TypeA
		if aaaa {
			qt = dns.TypeAAAA
		}
		q.SetQuestion(qname, qt)
		if sameID {
			q.Id = r.Id
		}
		pa, err := parsePeerAnswer(q, r)
		if err != nil {
			if reasonOf(err) == "" {
				t.Fatalf("failure without a reason: %v", err)
			}
			return
		}
		if len(pa.addrs) > maxTargets {
			t.Fatalf("%d targets kept, want at most %d", len(pa.addrs), maxTargets)
		}
		seen := map[netip.Addr]bool{}
		for _, a := range pa.addrs {
			if seen[a] {
				t.Fatalf("duplicate target %s", a)
			}
			seen[a] = true
			if aaaa != (a.Is6() && !a.Is4In6()) || !a.IsValid() {
				t.Fatalf("target %s is not of the asked family (AAAA %v)", a, aaaa)
			}
		}
		if r.Rcode != dns.RcodeSuccess && r.Rcode != dns.RcodeNameError {
			t.Fatalf("rcode %s accepted", dns.RcodeToString[r.Rcode])
		}
		if !strings.EqualFold(r.Question[0].Name, qname) {
			t.Fatalf("answer to %q accepted for %q", r.Question[0].Name, qname)
		}
	})
}
