package gslb

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coredns/caddy"
	clog "github.com/coredns/coredns/plugin/pkg/log"
	"github.com/fleetdns/fleetdns/internal/store"
	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// bigHost is a host with n distinct A targets in 10.0.0.0/8.
func bigHost(name string, n int) *store.Host {
	h := host(name)
	for i := range n {
		h.A = append(h.A, netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}))
	}
	return h
}

// queryCost is the time one A query for name takes on g, the best of five
// rounds of n queries; it gives up (and says so) past budget.
func queryCost(t *testing.T, g *GSLB, name string, n int, budget time.Duration) time.Duration {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	w := &discard{}
	ctx := context.Background()
	best := time.Duration(0)
	deadline := time.Now().Add(budget)
	for range 5 {
		start := time.Now()
		for range n {
			g.ServeDNS(ctx, w, m)
			if time.Now().After(deadline) {
				t.Fatalf("%d queries for %s took more than %s", n, name, budget)
			}
		}
		if d := time.Since(start) / time.Duration(n); best == 0 || d < best {
			best = d
		}
	}
	return best
}

// TestQueryCostIndependentOfTargets: a query does O(max_targets) work, so a
// host with 20,000 or 100,000 targets costs what a host with 64 does (goal:
// within 2x), and its answer carries max_targets of them, a window that
// moves on per answer.
func TestQueryCostIndependentOfTargets(t *testing.T) {
	clog.Discard()
	small, big, huge := "small."+zone, "big."+zone, "huge."+zone
	st := newFakeStore(bigHost(small, 64), bigHost(big, 20000), bigHost(huge, 100000))
	g, _ := newGSLB(t, "gslb "+zone+" {\ngeotag eu\n}", st)
	waitReady(t, g)

	seen := map[string]bool{}
	for range (20000 + 63) / 64 {
		got := addrs(ask(t, g, big, dns.TypeA))
		if len(got) != defaultMaxTargets {
			t.Fatalf("answer of %d targets, want max_targets %d", len(got), defaultMaxTargets)
		}
		for _, a := range got {
			seen[a] = true
		}
	}
	if len(seen) != 20000 {
		t.Errorf("%d answers handed out %d distinct targets, want every one of 20000 in turn", (20000+63)/64, len(seen))
	}

	const n = 2000
	base := queryCost(t, g, small, n, 20*time.Second)
	for _, name := range []string{big, huge} {
		cost := queryCost(t, g, name, n, 20*time.Second)
		t.Logf("%s: %v per A query, 64 targets: %v (%.2fx)", name, cost, base, float64(cost)/float64(base))
		// Under -race every memory access costs more, and more so over a big
		// union: there only a quadratic cost (thousands of times) is caught.
		bound := time.Duration(2)
		if testkit.Race {
			bound = 10
		}
		if cost > bound*base {
			t.Errorf("%s: %v per A query, want within %dx of the 64-target host's %v", name, cost, bound, base)
		}
	}
}

// TestUnionOfLargeHostWithPeers: the union of this cluster's many targets
// and a peer's is de-duplicated, and made again when the peer's answer
// changes.
func TestUnionOfLargeHostWithPeers(t *testing.T) {
	big := bigHost(app, 100)
	us := startPeer(t, map[string][]string{app: {"10.0.0.5", "10.9.9.9"}}) // 10.0.0.5 is also ours
	g, _ := newGSLB(t, fmt.Sprintf("gslb %s {\ngeotag eu\npeer us %s\ntimeout 300ms\nrefresh 200ms\nmax_targets 200\n}", zone, us.addr), newFakeStore(big))
	waitReady(t, g)
	got := addrs(ask(t, g, app, dns.TypeA))
	if len(got) != 101 || got[100] != "10.9.9.9" {
		t.Fatalf("got %d targets ending %v, want our 100 and the peer's one more", len(got), got[len(got)-1])
	}
	us.set(app, "10.8.8.8")
	testkit.Eventually(t, 5*time.Second, "new peer answer in the union", func() bool {
		got := addrs(ask(t, g, app, dns.TypeA))
		return len(got) == 101 && got[100] == "10.8.8.8"
	})
}

// parentOf answers the zone's NS query with names (glue from glue) over
// UDP, truncated when it does not fit, and whole over TCP, as a real
// parent does.
func parentOf(t *testing.T, names func() map[string]string) *exchangeServer {
	return startExchangeServer(t, func(r *dns.Msg, tcp bool) []*dns.Msg {
		m := new(dns.Msg)
		m.SetReply(r)
		if r.Question[0].Qtype != dns.TypeNS {
			return []*dns.Msg{m}
		}
		for n, ip := range names() {
			m.Ns = append(m.Ns, &dns.NS{Hdr: dns.RR_Header{Name: zone, Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: 3600}, Ns: n})
			m.Extra = append(m.Extra, &dns.A{Hdr: dns.RR_Header{Name: n, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 3600}, A: net.ParseIP(ip)})
		}
		m.Compress = true
		if !tcp && m.Len() > dns.MinMsgSize {
			m.Ns, m.Extra, m.Truncated = nil, nil, true
		}
		return []*dns.Msg{m}
	})
}

// nsNames are n name servers of tags <prefix>0000... on loopback addresses
// where nothing listens.
func nsNames(prefix string, n int) map[string]string {
	out := map[string]string{}
	for i := range n {
		out[fmt.Sprintf("gslb-ns-%s%04d.%s", prefix, i, zone)] = fmt.Sprintf("127.1.%d.%d", i/250, 1+i%250)
	}
	return out
}

// peerSeries counts the series of every per-peer metric of the zone whose
// peer tag is one of nsNames(prefix, ...): prefix and four digits, so that
// the peers of other tests (ap, us) never count.
func peerSeries(t *testing.T, prefix string) int {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "coredns_gslb_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				v := l.GetValue()
				if (l.GetName() == "peer" || l.GetName() == "tag") && len(v) == len(prefix)+4 && strings.HasPrefix(v, prefix) && strings.Trim(v[len(prefix):], "0123456789") == "" {
					n++
				}
			}
		}
	}
	return n
}

// TestDiscoveryCapsPeers: 1,000 names in the parent's NS set make at most
// max_peers peers, goroutines and series stay bounded, and when the parent
// names others the series of the peers that are gone are deleted.
func TestDiscoveryCapsPeers(t *testing.T) {
	clog.Discard()
	var current = nsNames("a", 1000)
	parent := parentOf(t, func() map[string]string { return current })
	before := runtime.NumGoroutine()
	g, _ := newGSLB(t, fmt.Sprintf(`gslb %s {
		geotag eu
		peers_from_ns %s {
			refresh 1s
			allow 127.0.0.0/8
		}
		timeout 100ms
		refresh 1s
	}`, zone, parent.addr), newFakeStore(host(app, "10.0.1.1")))
	testkit.Eventually(t, 10*time.Second, "peers discovered", func() bool { return len(g.peers.Load().list) > 0 })
	if n := len(g.peers.Load().list); n != defaultMaxPeers {
		t.Errorf("%d peers from 1000 names, want max_peers %d", n, defaultMaxPeers)
	}
	if v := testutil.ToFloat64(discoveryIgnored.WithLabelValues(zone)); v != 1000-defaultMaxPeers {
		t.Errorf("discovery_ignored_peers %v, want %d", v, 1000-defaultMaxPeers)
	}
	time.Sleep(1500 * time.Millisecond) // the peers fail and back off
	t.Logf("1000 NS names: %d peers, %d more goroutines, %d series of them", len(g.peers.Load().list), runtime.NumGoroutine()-before, peerSeries(t, "a"))
	if n := runtime.NumGoroutine() - before; n > 4*defaultMaxPeers {
		t.Errorf("%d more goroutines with 1000 names, want a bound of the %d peers", n, defaultMaxPeers)
	}
	if n := peerSeries(t, "a"); n == 0 || n > 20*defaultMaxPeers {
		t.Errorf("%d series of the peers, want some and at most %d", n, 20*defaultMaxPeers)
	}

	// The parent names 1000 others: the first peers and their series go.
	parent.mu.Lock()
	current = nsNames("b", 1000)
	parent.mu.Unlock()
	testkit.Eventually(t, 10*time.Second, "peers of the new names", func() bool {
		l := g.peers.Load().list
		return len(l) > 0 && strings.HasPrefix(l[0].tag, "b")
	})
	if n := peerSeries(t, "a"); n != 0 {
		t.Errorf("%d series of gone peers remain, want none", n)
	}
	if n := len(g.peers.Load().list); n != defaultMaxPeers {
		t.Errorf("%d peers, want %d", n, defaultMaxPeers)
	}
}

// TestDiscoveryRefusesGlueOfThisHost: glue that reaches this host or its
// link (the metadata service at 169.254.169.254, loopback) is no peer,
// unless allow or a static peer names it.
func TestDiscoveryRefusesGlueOfThisHost(t *testing.T) {
	names := map[string]string{
		"gslb-ns-us." + zone: "169.254.169.254",
		"gslb-ns-ap." + zone: "127.0.0.22",
		"gslb-ns-sa." + zone: "224.0.0.1",
		"gslb-ns-af." + zone: "0.0.0.0",
		"gslb-ns-na." + zone: "192.168.7.7",
	}
	parent := parentOf(t, func() map[string]string { return names })
	discover := func(allow []netip.Prefix, static map[string][]string) delegation {
		g := New(zone)
		g.geotag = "eu"
		g.static = static
		g.disc = &discovery{servers: []string{parent.addr}, refresh: time.Hour, port: "53", allow: allow}
		g.ns, _ = newNSPattern(defaultNSPattern, zone)
		g.derive()
		d, err := g.discover(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	d := discover(nil, map[string][]string{})
	if got := slices.Sorted(mapKeys(d.peers)); !slices.Equal(got, []string{"na"}) {
		t.Errorf("peers %v, want only na (the others' glue is this host's or its link's)", got)
	}
	if len(d.refused) != 4 {
		t.Errorf("refused %v, want 4 addresses", d.refused)
	}
	d = discover([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, map[string][]string{"xx": {"224.0.0.1:53"}})
	if got := slices.Sorted(mapKeys(d.peers)); !slices.Equal(got, []string{"ap", "na", "sa"}) {
		t.Errorf("peers %v, want ap (allowed), sa (a static peer's address) and na", got)
	}
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestFailingPeerBacksOff: every failure in a row doubles the wait before
// the refresh loop asks the peer again, up to 30 s (never past refresh),
// and an answer resets it.
func TestFailingPeerBacksOff(t *testing.T) {
	g := New(zone)
	g.refresh = time.Minute
	g.derive()
	p := newPeer(g, "zz", []string{"127.0.0.1:1"})
	t.Cleanup(p.forgetMetrics)
	var waits []time.Duration
	for range 7 {
		now := time.Now()
		g.now = func() time.Time { return now }
		p.observe(errors.New("refused"))
		waits = append(waits, time.Duration(p.retryAt.Load()-now.UnixNano()).Round(time.Millisecond))
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
	if !slices.Equal(waits, want) {
		t.Errorf("waits %v, want %v", waits, want)
	}
	p.observe(nil)
	if p.retryAt.Load() != 0 {
		t.Error("an answer did not reset the backoff")
	}
}

// TestStrayDatagramKeepsPeerUp: a peer whose answers come after a stray
// datagram from its address stays up and its targets are served.
func TestStrayDatagramKeepsPeerUp(t *testing.T) {
	addr := strayServer(t, []byte{0, 0})
	g, _ := newGSLB(t, fmt.Sprintf("gslb %s {\ngeotag eu\npeer us %s\ntimeout 1s\nrefresh 200ms\n}", zone, addr), newFakeStore(host(app, "10.0.1.1")))
	waitReady(t, g)
	time.Sleep(time.Second) // several refresh cycles
	if s := stateOf(g, "us"); s != stateUp {
		t.Errorf("peer %s after stray datagrams, want up", s)
	}
	if got := addrs(ask(t, g, app, dns.TypeA)); !slices.Equal(got, []string{"10.0.1.1", "10.0.0.1"}) {
		t.Errorf("got %v, want ours and the peer's", got)
	}
}

// TestDiscoveryDenyWinsOverAllow: glue in a deny CIDR (the cluster's
// service range) is refused even where allow names it; parse takes deny
// inside peers_from_ns.
func TestDiscoveryDenyWinsOverAllow(t *testing.T) {
	names := map[string]string{
		"gslb-ns-us." + zone: "10.96.0.10",
		"gslb-ns-ap." + zone: "127.0.0.22",
		"gslb-ns-sa." + zone: "127.96.0.1",
	}
	parent := parentOf(t, func() map[string]string { return names })
	g, err := parse(caddy.NewTestController("dns", `gslb `+zone+` {
    geotag eu
    peers_from_ns `+parent.addr+` {
        allow 127.0.0.0/8
        deny 10.96.0.0/12 127.96.0.0/16
    }
}`))
	if err != nil {
		t.Fatal(err)
	}
	d, err := g.discover(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(mapKeys(d.peers)); !slices.Equal(got, []string{"ap"}) {
		t.Errorf("peers %v, want only ap (allowed, not denied)", got)
	}
	if slices.Sort(d.refused); !slices.Equal(d.refused, []string{"10.96.0.10", "127.96.0.1"}) {
		t.Errorf("refused %v, want the two denied addresses", d.refused)
	}
}
