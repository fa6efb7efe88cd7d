package gslb

import (
	"fmt"
	"github.com/fleetdns/fleetdns/internal/store/storetest"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/coredns/caddy"
	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func onePeer(t *testing.T, extra string, hosts ...string) (*GSLB, *fakePeer, *storetest.Store) {
	t.Helper()
	targets := map[string][]string{}
	st := newFakeStore()
	for _, h := range hosts {
		targets[h] = []string{"10.0.2.1"}
		st.Put(host(h, "10.0.1.1"))
	}
	us := startPeer(t, targets)
	g, _ := newGSLB(t, fmt.Sprintf(`gslb %s {
		geotag eu
		peer us %s
		strategy failover
		primary us eu
		%s
	}`, zone, us.addr, extra), st)
	return g, us, st
}

func stateOf(g *GSLB, tag string) state {
	return g.peers.Load().byTag[tag].state(g.now())
}

func TestPeerStateUpStaleDownUp(t *testing.T) {
	g, us, _ := onePeer(t, "timeout 200ms\nrefresh 300ms\nsplit_brain_threshold 1s", app)
	waitReady(t, g)
	if s := stateOf(g, "us"); s != stateUp {
		t.Fatalf("state %s, want up", s)
	}
	gauge := func(s state) float64 { return testutil.ToFloat64(peerState.WithLabelValues(zone, "us", s.String())) }
	if gauge(stateUp) != 1 || gauge(stateUnknown) != 0 {
		t.Errorf("peer_state metric: up %v unknown %v", gauge(stateUp), gauge(stateUnknown))
	}

	us.setMode("silent")
	testkit.Eventually(t, 5*time.Second, "us stale", func() bool { return stateOf(g, "us") == stateStale })
	if gauge(stateStale) != 1 || gauge(stateUp) != 0 {
		t.Errorf("peer_state metric when stale: stale %v up %v", gauge(stateStale), gauge(stateUp))
	}
	// Stale: the last answer is still believed.
	if got := addrs(ask(t, g, app, dns.TypeA)); !slices.Equal(got, []string{"10.0.2.1"}) {
		t.Errorf("stale primary: got %v, want its last answer", got)
	}

	testkit.Eventually(t, 5*time.Second, "us down after split_brain_threshold", func() bool { return stateOf(g, "us") == stateDown })
	if got := addrs(ask(t, g, app, dns.TypeA)); !slices.Equal(got, []string{"10.0.1.1"}) {
		t.Errorf("down primary: got %v, want failover to eu", got)
	}
	testkit.Eventually(t, 5*time.Second, "down in metrics", func() bool { return gauge(stateDown) == 1 })

	us.setMode("")
	testkit.Eventually(t, 5*time.Second, "us up again", func() bool { return stateOf(g, "us") == stateUp })
	testkit.Eventually(t, 5*time.Second, "answers from us again", func() bool {
		return slices.Equal(addrs(ask(t, g, app, dns.TypeA)), []string{"10.0.2.1"})
	})
}

func TestBadPeerAnswersAreFailures(t *testing.T) {
	for mode, reason := range map[string]string{
		"servfail":  reasonRcode,
		"refused":   reasonRcode,
		"wrongid":   reasonTimeout, // over UDP a reply with another ID is ignored (anti-spoofing): the query times out
		"wrongname": reasonWrongQuestion,
		"cname":     reasonWrongType,
		"silent":    reasonTimeout,
	} {
		t.Run(mode, func(t *testing.T) {
			g, us, _ := onePeer(t, "timeout 200ms\nrefresh 200ms\nsplit_brain_threshold 1h", app)
			waitReady(t, g)
			failures := func() float64 { return testutil.ToFloat64(peerFailures.WithLabelValues(zone, "us", reason)) }
			before := failures()
			us.setMode(mode)
			testkit.Eventually(t, 5*time.Second, "us stale", func() bool { return stateOf(g, "us") == stateStale })
			if failures() == before {
				t.Errorf("peer_failures_total{reason=%q} did not grow", reason)
			}
			// Stale within split_brain_threshold: last answer kept.
			if got := addrs(ask(t, g, app, dns.TypeA)); !slices.Equal(got, []string{"10.0.2.1"}) {
				t.Errorf("got %v, want the last good answer", got)
			}
			us.setMode("")
			testkit.Eventually(t, 5*time.Second, "us up again", func() bool { return stateOf(g, "us") == stateUp })
		})
	}
}

func TestNXDOMAINAndNODATAMeanUpWithoutTargets(t *testing.T) {
	g, us, _ := onePeer(t, "timeout 1s\nrefresh 200ms", app)
	waitReady(t, g)
	us.set(app) // NODATA
	testkit.Eventually(t, 5*time.Second, "failover to eu on NODATA", func() bool {
		return slices.Equal(addrs(ask(t, g, app, dns.TypeA)), []string{"10.0.1.1"})
	})
	if s := stateOf(g, "us"); s != stateUp {
		t.Errorf("NODATA: state %s, want up", s)
	}
	us.mu.Lock()
	delete(us.targets, app) // NXDOMAIN
	us.mu.Unlock()
	time.Sleep(500 * time.Millisecond)
	if s := stateOf(g, "us"); s != stateUp {
		t.Errorf("NXDOMAIN: state %s, want up", s)
	}
	if got := addrs(ask(t, g, app, dns.TypeA)); !slices.Equal(got, []string{"10.0.1.1"}) {
		t.Errorf("NXDOMAIN: got %v, want eu's", got)
	}
}

func TestDeadPeerCostsOneTimeoutPerCycle(t *testing.T) {
	var hosts []string
	for i := range 40 {
		hosts = append(hosts, fmt.Sprintf("h%d.%s", i, zone))
	}
	g, us, _ := onePeer(t, "timeout 200ms\nrefresh 200ms\nsplit_brain_threshold 1h", hosts...)
	waitReady(t, g)
	us.setMode("silent")
	time.Sleep(300 * time.Millisecond) // let due answers pile up
	before := us.queries.Load()
	time.Sleep(time.Second)
	got := us.queries.Load() - before
	// One probe (A and AAAA) per cycle of at least one timeout: about 10
	// queries a second, not 80 per cycle.
	if got > 16 {
		t.Errorf("a silent peer with 40 hosts got %d queries in 1s, want one probe per cycle", got)
	}
	if got == 0 {
		t.Errorf("a silent peer got no probe in 1s")
	}
}

func TestSteadyStateWaitsOnNoPeer(t *testing.T) {
	g, us, _ := onePeer(t, "timeout 2s\nrefresh 300ms\nsplit_brain_threshold 1h", app)
	waitReady(t, g)
	us.setMode("silent")
	for range 20 {
		start := time.Now()
		got := addrs(ask(t, g, app, dns.TypeA))
		if d := time.Since(start); !testkit.Race && d > 100*time.Millisecond {
			t.Fatalf("steady-state query took %s", d)
		}
		if !slices.Equal(got, []string{"10.0.2.1"}) {
			t.Fatalf("got %v, want us's cached answer", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestClientQueryWaitsAtMostTimeout(t *testing.T) {
	g, us, st := onePeer(t, "timeout 300ms\nrefresh 1m\nsplit_brain_threshold 1h", app)
	waitReady(t, g)
	// A new host, and the peer stops answering before anyone asked it: the
	// first client query asks on the query path, bounded by timeout.
	us.setMode("silent")
	st.Put(host("new."+zone, "10.0.1.9"))
	start := time.Now()
	m := ask(t, g, "new."+zone, dns.TypeA)
	if d := time.Since(start); !testkit.Race && d > 450*time.Millisecond {
		t.Errorf("query waited %s, timeout is 300ms", d)
	}
	if got := addrs(m); !slices.Equal(got, []string{"10.0.1.9"}) {
		t.Errorf("got %v, want eu's after us timed out", got)
	}
}

func TestReadyWaitsForFirstRound(t *testing.T) {
	us := startPeer(t, map[string][]string{app: {"10.0.2.1"}})
	us.setMode("silent")
	g, err := parse(caddy.NewTestController("dns", fmt.Sprintf("gslb %s {\ngeotag eu\npeer us %s\ntimeout 500ms\n}", zone, us.addr)))
	if err != nil {
		t.Fatal(err)
	}
	g.store, g.Next = newFakeStore(host(app, "10.0.1.1")), &next{}
	if g.Ready() {
		t.Fatal("ready before start")
	}
	g.start()
	t.Cleanup(g.stop)
	time.Sleep(150 * time.Millisecond)
	if g.Ready() {
		t.Fatal("ready before the first round of peer answers")
	}
	waitReady(t, g)
	if s := stateOf(g, "us"); s != stateDown {
		t.Errorf("a peer that never answered: state %s, want down", s)
	}
}

func TestReadyMeansPrefetched(t *testing.T) {
	g, _, _ := onePeer(t, "timeout 500ms", app)
	waitReady(t, g)
	if _, ok := g.peers.Load().byTag["us"].cache.Load(app); !ok {
		t.Error("ready, but the declared host was not prefetched")
	}
}

func TestUnknownPrimaryIsNeverEmpty(t *testing.T) {
	g := New(zone)
	g.geotag = "eu"
	views := []tagView{
		{tag: "eu", self: true, state: stateUp, a: addrList2("10.0.1.1")},
		{tag: "us", state: stateUnknown},
	}
	d := g.decide(&policy{strategy: failover, primary: []string{"us", "eu"}}, views, nil, false)
	if !d.unknown {
		t.Errorf("failover with an unknown primary decided %+v, want SERVFAIL (unknown)", d)
	}
	views[1].state = stateDown
	d = g.decide(&policy{strategy: failover, primary: []string{"us", "eu"}}, views, nil, false)
	if d.unknown || d.chosen != 0 {
		t.Errorf("failover with a down primary decided %+v, want eu", d)
	}
}

func addrList2(as ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range as {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}
