package gslb

import (
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/fleetdns/fleetdns/plugin/gslb/fleet"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

const testDelegationKey = `key "eu.gslb.example.com" {
	algorithm hmac-sha256;
	secret "VGhpcyBpcyB0aGUgZXUgY2x1c3RlcidzIGtleSEhISE=";
};
`

func writeKey(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "delegation.key")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPublishDelegationParse(t *testing.T) {
	key := writeKey(t, testDelegationKey)
	g, err := parse(caddy.NewTestController("dns", `gslb gslb.example.com {
		geotag eu
		publish_delegation 127.0.0.10 127.0.0.11:1053 {
			key `+key+`
			address 198.18.0.2 2001:db8::2 198.18.0.1
			ttl 600
			interval 5s
		}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	d := g.deleg
	if d == nil || strings.Join(d.servers, " ") != "127.0.0.10:53 127.0.0.11:1053" {
		t.Fatalf("publish_delegation: %+v", d)
	}
	if d.ns != "gslb-ns-eu.gslb.example.com." {
		t.Errorf("ns %q, want the default pattern's name for eu", d.ns)
	}
	if got := slices.Collect(func(yield func(string) bool) {
		for _, a := range d.addrs {
			yield(a.String())
		}
	}); strings.Join(got, " ") != "198.18.0.1 198.18.0.2 2001:db8::2" {
		t.Errorf("addresses %v", got)
	}
	if d.ttl != 600 || d.interval != 5*time.Second || d.decommission {
		t.Errorf("ttl %d interval %s decommission %v", d.ttl, d.interval, d.decommission)
	}
	if s := d.keys.Secrets(); s["eu.gslb.example.com."] == "" {
		t.Errorf("key not loaded: %v", s)
	}
}

func TestPublishDelegationDefaults(t *testing.T) {
	key := writeKey(t, testDelegationKey)
	// The name server follows peers_from_ns's pattern, given after it.
	c := caddy.NewTestController("dns", `gslb gslb.example.com {
		geotag us
		publish_delegation 127.0.0.10 {
			key `+key+`
			decommission
		}
		peers_from_ns 127.0.0.10 {
			pattern ns-{geotag}.{parent}
		}
	}`)
	g, err := parse(c)
	if err != nil {
		t.Fatal(err)
	}
	d := g.deleg
	if d.ns != "ns-us.example.com." || d.ttl != defaultDelegationTTL || d.interval != defaultDelegationInterval || !d.decommission {
		t.Errorf("defaults: ns %q ttl %d interval %s decommission %v", d.ns, d.ttl, d.interval, d.decommission)
	}

	// The glue defaults to the server's bind addresses that another
	// server can reach.
	c = caddy.NewTestController("dns", `gslb gslb.example.com {
		geotag eu
		publish_delegation 127.0.0.10 {
			key `+key+`
		}
	}`)
	cfg := dnsserver.GetConfig(c)
	cfg.ListenHosts = []string{"127.0.0.1", "198.18.0.7", "::", "2001:db8::7", "fe80::1"}
	g, err = parse(c)
	if err != nil {
		t.Fatal(err)
	}
	if got := g.deleg.addrs; len(got) != 2 || got[0] != netip.MustParseAddr("198.18.0.7") || got[1] != netip.MustParseAddr("2001:db8::7") {
		t.Errorf("default glue from bind: %v", got)
	}
}

func TestPublishDelegationParseErrors(t *testing.T) {
	key := writeKey(t, testDelegationKey)
	bad := writeKey(t, "key \"eu\" {\n\talgorithm hmac-sha256;\n\tsecret \"not base64!\";\n};\n")
	for _, c := range []struct{ block, want string }{
		{"publish_delegation 127.0.0.10 {\n}", "needs a key"},
		{"publish_delegation 127.0.0.10", "needs a block"},
		{"publish_delegation {\nkey " + key + "\n}", "Wrong argument count"},
		{"publish_delegation parent.example {\nkey " + key + "\n}", "not an IP address"},
		{"publish_delegation 127.0.0.10 {\nkey " + bad + "\naddress 198.18.0.1\n}", bad + ":3: key \"eu\": secret is not base64"},
		{"publish_delegation 127.0.0.10 {\nkey /nonexistent/delegation.key\n}", "/nonexistent/delegation.key"},
		{"publish_delegation 127.0.0.10 {\nkey " + key + "\naddress 0.0.0.0\n}", "not a unicast IP address"},
		{"publish_delegation 127.0.0.10 {\nkey " + key + "\naddress 198.18.0.1\nttl -1\n}", "bad publish_delegation ttl"},
		{"publish_delegation 127.0.0.10 {\nkey " + key + "\naddress 198.18.0.1\ninterval 100ms\n}", "interval"},
		{"publish_delegation 127.0.0.10 {\nkey " + key + "\naddress 198.18.0.1\ndecommission now\n}", "Wrong argument count"},
		{"publish_delegation 127.0.0.10 {\nkey " + key + "\naddress 198.18.0.1\nprimary eu\n}", `unknown property "primary" in publish_delegation`},
		{"publish_delegation 127.0.0.10 {\nkey " + key + "\n}", "no address to publish"},
		{"publish_delegation 127.0.0.10 {\nkey " + key + "\naddress 198.18.0.1\n}\npublish_delegation 127.0.0.10 {\nkey " + key + "\n}", "given twice"},
	} {
		_, err := parse(caddy.NewTestController("dns", "gslb gslb.example.com {\ngeotag eu\n"+c.block+"\n}"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one containing %q", c.block, err, c.want)
		}
		// Corefile errors name the Corefile's line.
		if err != nil && !strings.Contains(err.Error(), "Testfile:") {
			t.Errorf("%q: error %v names no line", c.block, err)
		}
	}
}

func ips(s ...string) []netip.Addr {
	var a []netip.Addr
	for _, x := range s {
		a = append(a, netip.MustParseAddr(x))
	}
	return a
}

func TestDelegationChangesAreSingleRecords(t *testing.T) {
	d := &delegationPublisher{ns: "gslb-ns-eu.gslb.example.com.", addrs: ips("198.18.0.1", "2001:db8::1"), ttl: 300}
	zone := "gslb.example.com."
	texts := func(rrs []dns.RR) string {
		var s []string
		for _, rr := range rrs {
			s = append(s, rrText(rr))
		}
		return strings.Join(s, "; ")
	}
	for _, c := range []struct {
		name           string
		decommission   bool
		view           parentView
		insert, remove string
	}{
		{name: "nothing there", view: parentView{zone: "example.com."},
			insert: "gslb-ns-eu.gslb.example.com. A 198.18.0.1; gslb-ns-eu.gslb.example.com. AAAA 2001:db8::1; gslb.example.com. NS gslb-ns-eu.gslb.example.com."},
		{name: "steady state", view: parentView{zone: "example.com.", ns: true, glue: ips("198.18.0.1", "2001:db8::1")}},
		{name: "glue moved", view: parentView{zone: "example.com.", ns: true, glue: ips("198.18.0.9", "2001:db8::1")},
			insert: "gslb-ns-eu.gslb.example.com. A 198.18.0.1", remove: "gslb-ns-eu.gslb.example.com. A 198.18.0.9"},
		{name: "name server outside the parent zone: no glue", view: parentView{zone: "other.example."},
			insert: "gslb.example.com. NS gslb-ns-eu.gslb.example.com."},
		{name: "decommission", decommission: true, view: parentView{zone: "example.com.", ns: true, glue: ips("198.18.0.1")},
			remove: "gslb.example.com. NS gslb-ns-eu.gslb.example.com.; gslb-ns-eu.gslb.example.com. A 198.18.0.1; gslb-ns-eu.gslb.example.com. AAAA 2001:db8::1"},
		{name: "decommissioned", decommission: true, view: parentView{zone: "example.com."}},
	} {
		d.decommission = c.decommission
		ins, rem := d.changes(zone, c.view)
		if texts(ins) != c.insert || texts(rem) != c.remove {
			t.Errorf("%s: insert %q remove %q, want %q and %q", c.name, texts(ins), texts(rem), c.insert, c.remove)
		}
	}
}

// updateServer answers every UDP datagram with reply(request).
func updateServer(t *testing.T, reply func(req []byte) []byte) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 65535)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if out := reply(buf[:n]); out != nil {
				pc.WriteTo(out, from)
			}
		}
	}()
	return pc.LocalAddr().String()
}

func TestUpdateResults(t *testing.T) {
	keys, err := fleet.ParseKeys("test", []byte(testDelegationKey))
	if err != nil {
		t.Fatal(err)
	}
	answer := func(rcode int, sign bool) func([]byte) []byte {
		return func(b []byte) []byte {
			req := new(dns.Msg)
			if req.Unpack(b) != nil {
				return nil
			}
			r := new(dns.Msg)
			r.SetRcode(req, rcode)
			if !sign {
				out, _ := r.Pack()
				return out
			}
			t := req.IsTsig()
			r.SetTsig(t.Hdr.Name, t.Algorithm, 300, time.Now().Unix())
			out, _, _ := dns.TsigGenerate(r, keys.Secrets()[t.Hdr.Name], t.MAC, false)
			return out
		}
	}
	for _, c := range []struct {
		name  string
		reply func([]byte) []byte
		want  string
	}{
		{"applied", answer(dns.RcodeSuccess, true), "ok"},
		{"refused", answer(dns.RcodeRefused, true), "refused"},
		{"servfail", answer(dns.RcodeServerFailure, false), "servfail"},
		{"notauth", answer(dns.RcodeNotAuth, false), "notauth"},
		{"unsigned success", answer(dns.RcodeSuccess, false), "unsigned"},
		{"garbage", func([]byte) []byte { return []byte{0xde, 0xad, 0xbe, 0xef, 1, 2, 3} }, "malformed"},
		{"silence", func([]byte) []byte { return nil }, "timeout"},
		{"badkey", func(b []byte) []byte {
			req := new(dns.Msg)
			req.Unpack(b)
			r := new(dns.Msg)
			r.SetRcode(req, dns.RcodeNotAuth)
			tt := req.IsTsig()
			r.SetTsig(tt.Hdr.Name, tt.Algorithm, 300, time.Now().Unix())
			r.Extra[0].(*dns.TSIG).Error = dns.RcodeBadKey
			out, _ := r.Pack()
			return out
		}, "badkey"},
	} {
		t.Run(c.name, func(t *testing.T) {
			server := updateServer(t, c.reply)
			g := New("gslb.example.com.")
			g.timeout = 200 * time.Millisecond
			g.deleg = &delegationPublisher{servers: []string{server}, keys: keys, ns: "gslb-ns-eu.gslb.example.com.", ttl: 300}
			rr := g.deleg.glueRR(netip.MustParseAddr("198.18.0.1"))
			results, err := g.update(context.Background(), "example.com.", []dns.RR{rr}, nil)
			if len(results) != 1 || results[0] != c.want {
				t.Errorf("results %v (%v), want %s", results, err, c.want)
			}
			if (err == nil) != (c.want == "ok") {
				t.Errorf("error %v for result %s", err, c.want)
			}
		})
	}
}

// TestUpdateTriesTheServersInOrder: a server that refuses is followed by
// the next, and the first that applies the UPDATE ends the round.
func TestUpdateTriesTheServersInOrder(t *testing.T) {
	keys, _ := fleet.ParseKeys("test", []byte(testDelegationKey))
	refusing := updateServer(t, func(b []byte) []byte {
		req := new(dns.Msg)
		req.Unpack(b)
		r := new(dns.Msg)
		r.SetRcode(req, dns.RcodeServerFailure)
		out, _ := r.Pack()
		return out
	})
	applying := updateServer(t, func(b []byte) []byte {
		req := new(dns.Msg)
		req.Unpack(b)
		r := new(dns.Msg)
		r.SetReply(req)
		tt := req.IsTsig()
		r.SetTsig(tt.Hdr.Name, tt.Algorithm, 300, time.Now().Unix())
		out, _, _ := dns.TsigGenerate(r, keys.Secrets()[tt.Hdr.Name], tt.MAC, false)
		return out
	})
	g := New("gslb.example.com.")
	g.timeout = 200 * time.Millisecond
	g.deleg = &delegationPublisher{servers: []string{refusing, applying}, keys: keys, ns: "gslb-ns-eu.gslb.example.com.", ttl: 300}
	results, err := g.update(context.Background(), "example.com.", []dns.RR{g.deleg.glueRR(netip.MustParseAddr("198.18.0.1"))}, nil)
	if err != nil || strings.Join(results, ",") != "servfail,ok" {
		t.Errorf("results %v, error %v; want servfail,ok", results, err)
	}
}

// memParent is a parent zone in memory that takes TSIG-signed UPDATEs of
// the GSLB zone's NS RRset and glue: enough to watch runDelegation.
type memParent struct {
	mu      sync.Mutex
	ns      map[string]bool     // NS targets of the GSLB zone
	glue    map[string][]dns.RR // name -> A records
	updates int
	drop    bool // answer UPDATEs NOERROR without applying them
}

func (p *memParent) serve(w dns.ResponseWriter, r *dns.Msg) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := new(dns.Msg)
	soa, _ := dns.NewRR("example.com. 300 IN SOA ns.example.com. hostmaster.example.com. 1 3600 600 86400 60")
	if r.Opcode == dns.OpcodeUpdate {
		p.updates++
		m.SetReply(r)
		if r.IsTsig() == nil || w.TsigStatus() != nil {
			m.Rcode = dns.RcodeNotAuth
		} else if p.drop {
			t := r.IsTsig()
			m.SetTsig(t.Hdr.Name, t.Algorithm, 300, time.Now().Unix())
		} else {
			for _, rr := range r.Ns {
				remove := rr.Header().Class == dns.ClassNONE
				switch x := rr.(type) {
				case *dns.NS:
					p.ns[x.Ns] = !remove
					if remove {
						delete(p.ns, x.Ns)
					}
				case *dns.A:
					var kept []dns.RR
					for _, g := range p.glue[x.Hdr.Name] {
						if !g.(*dns.A).A.Equal(x.A) {
							kept = append(kept, g)
						}
					}
					if !remove {
						a := *x
						a.Hdr.Class = dns.ClassINET
						kept = append(kept, &a)
					}
					p.glue[x.Hdr.Name] = kept
				}
			}
			t := r.IsTsig()
			m.SetTsig(t.Hdr.Name, t.Algorithm, 300, time.Now().Unix())
		}
		w.WriteMsg(m)
		return
	}
	m.SetReply(r)
	q := r.Question[0]
	switch {
	case q.Name == "example.com." && q.Qtype == dns.TypeSOA:
		m.Answer = []dns.RR{soa}
	case q.Name == "gslb.example.com." && len(p.ns) > 0:
		for n := range p.ns {
			m.Ns = append(m.Ns, &dns.NS{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: 300}, Ns: n})
			m.Extra = append(m.Extra, p.glue[n]...)
		}
	default:
		m.Rcode = dns.RcodeNameError
		m.Ns = []dns.RR{soa}
	}
	w.WriteMsg(m)
}

// TestRunDelegationPublishesOnceAndDecommissions: the loop adds the NS
// record and glue once, sends nothing while they are in place, puts back
// what someone removed, and with decommission removes only its own records.
func TestRunDelegationPublishesOnceAndDecommissions(t *testing.T) {
	keys, _ := fleet.ParseKeys("test", []byte(testDelegationKey))
	p := &memParent{ns: map[string]bool{"gslb-ns-us.gslb.example.com.": true}, glue: map[string][]dns.RR{}}
	us, _ := dns.NewRR("gslb-ns-us.gslb.example.com. 300 IN A 198.18.0.2")
	p.glue["gslb-ns-us.gslb.example.com."] = []dns.RR{us}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, TsigSecret: keys.Secrets(), Handler: dns.HandlerFunc(p.serve),
		MsgAcceptFunc: func(dns.Header) dns.MsgAcceptAction { return dns.MsgAccept }}
	go srv.ActivateAndServe()
	defer srv.Shutdown()

	run := func(decommission bool, rounds time.Duration) {
		g := New("gslb.example.com.")
		g.geotag = "eu"
		g.timeout = 500 * time.Millisecond
		g.deleg = &delegationPublisher{servers: []string{pc.LocalAddr().String()}, keys: keys, ns: "gslb-ns-eu.gslb.example.com.",
			addrs: ips("198.18.0.1"), ttl: 300, interval: 20 * time.Millisecond, decommission: decommission}
		ctx, cancel := context.WithTimeout(context.Background(), rounds)
		defer cancel()
		g.runDelegation(ctx)
	}
	updates := func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.updates
	}
	state := func() string {
		p.mu.Lock()
		defer p.mu.Unlock()
		var s []string
		for n := range p.ns {
			for _, a := range p.glue[n] {
				s = append(s, n+"="+a.(*dns.A).A.String())
			}
		}
		slices.Sort(s)
		return strings.Join(s, " ")
	}
	run(false, 300*time.Millisecond)
	if got, want := state(), "gslb-ns-eu.gslb.example.com.=198.18.0.1 gslb-ns-us.gslb.example.com.=198.18.0.2"; got != want {
		t.Fatalf("after publishing: %q, want %q", got, want)
	}
	if updates() != 1 {
		t.Errorf("%d UPDATEs over about 15 checks, want 1 (a steady state sends none)", updates())
	}
	p.mu.Lock()
	delete(p.ns, "gslb-ns-eu.gslb.example.com.")
	p.mu.Unlock()
	run(false, 200*time.Millisecond)
	if got := state(); !strings.Contains(got, "gslb-ns-eu.gslb.example.com.=198.18.0.1") || updates() != 2 {
		t.Errorf("after the NS record was removed by hand: %q with %d UPDATEs, want it back by a second UPDATE", got, updates())
	}
	// A parent that answers NOERROR and drops the records: not_applied,
	// the parent unchanged.
	before := testutil.ToFloat64(delegationChecks.WithLabelValues("gslb.example.com.", "not_applied"))
	p.mu.Lock()
	p.drop = true
	delete(p.ns, "gslb-ns-eu.gslb.example.com.")
	p.mu.Unlock()
	run(false, 100*time.Millisecond)
	if n := testutil.ToFloat64(delegationChecks.WithLabelValues("gslb.example.com.", "not_applied")) - before; n < 1 {
		t.Errorf("UPDATEs answered NOERROR and dropped: %v not_applied checks, want at least 1", n)
	}
	p.mu.Lock()
	p.drop = false
	p.ns["gslb-ns-eu.gslb.example.com."] = true
	p.updates = 2
	p.mu.Unlock()
	run(true, 200*time.Millisecond)
	if got, want := state(), "gslb-ns-us.gslb.example.com.=198.18.0.2"; got != want || updates() != 3 {
		t.Errorf("after decommission: %q with %d UPDATEs, want %q after one more", got, updates(), want)
	}
	if n := len(p.glue["gslb-ns-eu.gslb.example.com."]); n != 0 {
		t.Errorf("eu's glue left at the parent: %d records", n)
	}
}
