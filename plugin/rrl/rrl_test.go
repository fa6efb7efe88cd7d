package rrl

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin/metadata"
	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"

	"github.com/miekg/dns"
)

func TestBucketAndSlip(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, c := range []struct {
		name        string
		rate        float64
		slip        int
		queries     int
		spacing     time.Duration
		sent, slip_ int
	}{
		{"a burst beyond the rate, slip 2", 5, 2, 25, 0, 5, 10},
		{"slip 0 never slips", 5, 0, 25, 0, 5, 0},
		{"slip 1 slips every drop", 5, 1, 25, 0, 5, 20},
		{"slip 3", 5, 3, 35, 0, 5, 10},
		{"at the rate nothing is dropped", 10, 2, 50, 100 * time.Millisecond, 50, 0},
	} {
		tb := newTable(100, 15*time.Second, c.slip)
		sent, slipped_ := 0, 0
		for i := range c.queries {
			v, _ := tb.debit(1, c.rate, t0.Add(time.Duration(i)*c.spacing))
			switch v {
			case send:
				sent++
			case slipped:
				slipped_++
			}
		}
		if sent != c.sent || slipped_ != c.slip_ {
			t.Errorf("%s: %d sent, %d slipped; want %d, %d", c.name, sent, slipped_, c.sent, c.slip_)
		}
	}
}

func TestWindowKeepsAFloodLimited(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tb := newTable(100, 2*time.Second, 0)
	for i := range 1000 { // a flood: the balance falls to -window*rate
		tb.debit(1, 10, t0.Add(time.Duration(i)*time.Millisecond))
	}
	end := t0.Add(time.Second)
	if v, _ := tb.debit(1, 10, end.Add(1500*time.Millisecond)); v == send {
		t.Errorf("sent 1.5s after a flood, within the 2s window")
	}
	if v, _ := tb.debit(1, 10, end.Add(4*time.Second)); v != send {
		t.Errorf("not sent 4s after a flood, beyond the window")
	}
}

func TestTableIsBoundedOldestEvicted(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tb := newTable(3, time.Second, 0)
	evictions := 0
	const a, b, c, d, e = 1, 2, 3, 4, 5
	for _, k := range []uint64{a, b, c, a, d, e} {
		if _, ev := tb.debit(k, 1, t0); ev {
			evictions++
		}
	}
	if tb.len() != 3 || evictions != 2 {
		t.Errorf("table of %d, %d evictions; want 3, 2", tb.len(), evictions)
	}
	if _, ok := tb.index[a]; !ok {
		t.Errorf("a, used recently, was evicted")
	}
	if _, ok := tb.index[b]; ok {
		t.Errorf("b, the least recently used, was kept")
	}
	if _, ok := tb.index[c]; ok {
		t.Errorf("c, used before a, was kept")
	}
}

func TestClassify(t *testing.T) {
	soa := test.SOA("example.org. 30 IN SOA ns.example.org. h.example.org. 1 2 3 4 5")
	ns := test.NS("sub.example.org. 30 IN NS ns.sub.example.org.")
	for _, c := range []struct {
		rcode      int
		answer, ns []dns.RR
		kind, name string
	}{
		{dns.RcodeSuccess, []dns.RR{test.A("www.example.org. 30 IN A 10.0.0.1")}, nil, kindAnswer, "WWW.example.org."},
		{dns.RcodeSuccess, nil, []dns.RR{soa}, kindNoData, "example.org."},
		{dns.RcodeNameError, nil, []dns.RR{soa}, kindNXDomain, "example.org."},
		{dns.RcodeSuccess, nil, []dns.RR{ns}, kindReferral, "sub.example.org."},
		{dns.RcodeServerFailure, nil, nil, kindError, ""},
		{dns.RcodeRefused, nil, nil, kindError, ""},
	} {
		m := new(dns.Msg)
		m.SetQuestion("WWW.example.org.", dns.TypeA)
		m.Rcode, m.Answer, m.Ns = c.rcode, c.answer, c.ns
		if kind, name := classify(m); kind != c.kind || name != c.name {
			t.Errorf("%s: %s %q, want %s %q", dns.RcodeToString[c.rcode], kind, name, c.kind, c.name)
		}
	}
}

func TestPrefixes(t *testing.T) {
	r := &RRL{ipv4Prefix: 24, ipv6Prefix: 56}
	for addr, want := range map[string]string{
		"192.0.2.77:53":            "192.0.2.0/24",
		"[::ffff:192.0.2.77]:53":   "192.0.2.0/24",
		"[2001:db8:1:2ff::1]:5353": "2001:db8:1:200::/56",
	} {
		if got := r.prefix(netAddr(addr)).String(); got != want {
			t.Errorf("%s: %s, want %s", addr, got, want)
		}
		if got := r.prefix(net.UDPAddrFromAddrPort(netip.MustParseAddrPort(addr))).String(); got != want {
			t.Errorf("UDP %s: %s, want %s", addr, got, want)
		}
	}
}

type netAddr string

func (a netAddr) Network() string { return "udp" }
func (a netAddr) String() string  { return string(a) }

// A burst from one network is limited, another network and TCP are not.
func TestHandlerLimitsUDPPerNetwork(t *testing.T) {
	c := caddy.NewTestController("dns", "rrl {\n responses_per_second 5\n slip 2\n exempt 10.9.0.0/16 fd00::7\n}")
	r, err := parse(c)
	if err != nil {
		t.Fatal(err)
	}
	r.Zones = []string{"."}
	t0 := time.Unix(1000, 0)
	r.now = func() time.Time { return t0 }
	r.Next = test.HandlerFunc(func(_ context.Context, w dns.ResponseWriter, m *dns.Msg) (int, error) {
		res := new(dns.Msg)
		res.SetReply(m)
		res.Answer = []dns.RR{test.A("www.example.org. 30 IN A 10.0.0.1")}
		w.WriteMsg(res)
		return dns.RcodeSuccess, nil
	})
	ask := func(remote string, tcp bool) (written, tc bool) {
		m := new(dns.Msg)
		m.SetQuestion("www.example.org.", dns.TypeA)
		rec := dnstest.NewRecorder(&test.ResponseWriter{RemoteIP: remote, TCP: tcp})
		r.ServeDNS(context.Background(), rec, m)
		return rec.Msg != nil, rec.Msg != nil && rec.Msg.Truncated
	}
	count := func(remote string, tcp bool) (sent, slipped int) {
		for range 25 {
			w, tc := ask(remote, tcp)
			if tc {
				slipped++
			} else if w {
				sent++
			}
		}
		return
	}
	if s, sl := count("10.1.1.1", false); s != 5 || sl != 10 {
		t.Errorf("UDP burst: %d sent, %d slipped; want 5, 10", s, sl)
	}
	if s, sl := count("10.1.1.200", false); s != 0 || sl != 12 { // the same /24, balance already spent
		t.Errorf("UDP burst from the same /24: %d sent, %d slipped; want 0, 12", s, sl)
	}
	if s, _ := count("10.1.2.1", false); s != 5 {
		t.Errorf("another /24: %d sent, want 5", s)
	}
	if s, _ := count("10.1.1.1", true); s != 25 {
		t.Errorf("TCP: %d sent, want all 25", s)
	}
	// exempt (BIND's exempt-clients): peers asking for localtargets-, monitors.
	if s, _ := count("10.9.3.4", false); s != 25 {
		t.Errorf("an exempt client: %d sent, want all 25", s)
	}
	if s, _ := count("fd00::7", false); s != 25 {
		t.Errorf("an exempt IPv6 client: %d sent, want all 25", s)
	}
}

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in string
		ok bool
	}{
		{"rrl", true},
		{"rrl example.org {\n responses_per_second 5\n nxdomains_per_second 2\n errors_per_second 1\n window 5\n slip 0\n max_table_size 10\n ipv4_prefix_length 32\n ipv6_prefix_length 64\n}", true},
		{"rrl {\n window 0\n}", false},
		{"rrl {\n slip 11\n}", false},
		{"rrl {\n nonsense 1\n}", false},
		{"rrl {\n responses_per_second x\n}", false},
		{"rrl {\n responses_per_second\n}", false},
	} {
		_, err := parse(caddy.NewTestController("dns", c.in))
		if (err == nil) != c.ok {
			t.Errorf("%q: error %v, want ok=%v", c.in, err, c.ok)
		}
	}
}

// Issue 24, finding 7: answers synthesized from one wildcard share one
// account whatever the query names (the wildcard's owner is the imputed
// name), as NSD and Windows DNS count them; without the metadata plugin
// in the block, rrl provides the context k8scrd writes to.
func TestWildcardAnswersShareTheWildcardsAccount(t *testing.T) {
	r, err := parse(caddy.NewTestController("dns", "rrl {\n responses_per_second 5\n slip 0\n}"))
	if err != nil {
		t.Fatal(err)
	}
	r.Zones = []string{"."}
	t0 := time.Unix(1000, 0)
	r.now = func() time.Time { return t0 }
	r.Next = test.HandlerFunc(func(ctx context.Context, w dns.ResponseWriter, m *dns.Msg) (int, error) {
		res := new(dns.Msg)
		res.SetReply(m)
		qname := m.Question[0].Name
		res.Answer = []dns.RR{test.A(qname + " 30 IN A 10.0.0.1")}
		if dns.IsSubDomain("x.example.org.", qname) && qname != "x.example.org." {
			metadata.SetValueFunc(ctx, wildcardLabel, func() string { return "*.x.example.org." })
		}
		w.WriteMsg(res)
		return dns.RcodeSuccess, nil
	})
	sent := func(names func(i int) string) int {
		n := 0
		for i := range 50 {
			m := new(dns.Msg)
			m.SetQuestion(names(i), dns.TypeA)
			rec := dnstest.NewRecorder(&test.ResponseWriter{RemoteIP: "10.1.1.1"})
			r.ServeDNS(context.Background(), rec, m)
			if rec.Msg != nil {
				n++
			}
		}
		return n
	}
	if n := sent(func(i int) string { return fmt.Sprintf("r%d.x.example.org.", i) }); n != 5 {
		t.Errorf("50 random names under one wildcard: %d answered, want 5 (one account)", n)
	}
	if n := sent(func(i int) string { return fmt.Sprintf("host%d.example.org.", i) }); n != 50 {
		t.Errorf("50 distinct names that exist: %d answered, want 50 (an account each)", n)
	}
	// An outer metadata context (the metadata plugin's) is used, not replaced.
	ctx := metadata.ContextWithMetadata(context.Background())
	m := new(dns.Msg)
	m.SetQuestion("other.x.example.org.", dns.TypeA)
	r.ServeDNS(ctx, dnstest.NewRecorder(&test.ResponseWriter{RemoteIP: "10.2.2.2"}), m)
	if f := metadata.ValueFunc(ctx, wildcardLabel); f == nil || f() != "*.x.example.org." {
		t.Errorf("the wildcard label did not reach the outer metadata context")
	}
}

// Issue 24, finding 7: an account has a fixed size, whatever the length of
// the names asked: a full table of 100,000 costs a bounded few MiB.
func TestTableMemoryIsBoundedPerAccount(t *testing.T) {
	r := &RRL{ipv4Prefix: 24, ipv6Prefix: 56, table: newTable(100_000, 15*time.Second, 2)}
	t0 := time.Unix(1000, 0)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	addr := netAddr("10.1.1.1:53")
	long := strings.Repeat("label63-abcdefghijklmnopqrstuvwxyz-abcdefghijklmnopqrstuvwxyz.", 3)
	for i := range 100_000 {
		r.table.debit(r.key(addr, kindAnswer, fmt.Sprintf("n%d.%sexample.org.", i, long), dns.TypeA), 10, t0)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if r.table.len() != 100_000 {
		t.Fatalf("%d accounts, want 100000", r.table.len())
	}
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d bytes of heap per account", grew/100_000)
	if per := grew / 100_000; per > 120 {
		t.Errorf("%d bytes of heap per account (names of %d octets), want at most 120", per, len(long)+20)
	}
	runtime.KeepAlive(r)
}
