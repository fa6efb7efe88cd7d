package gslb

import (
	"fmt"
	"github.com/fleetdns/fleetdns/internal/store/storetest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

const app = "app." + zone

// twoPeers starts peers us and ap beside this cluster eu.
func twoPeers(t testing.TB, extra string, st *storetest.Store) (*GSLB, *next, *fakePeer, *fakePeer) {
	t.Helper()
	us := startPeer(t, map[string][]string{app: {"10.0.2.1", "fd00::2:1"}})
	ap := startPeer(t, map[string][]string{app: {"10.0.3.1"}})
	g, n := newGSLB(t, fmt.Sprintf(`gslb %s {
		geotag eu
		peer us %s
		peer ap %s
		timeout 300ms
		refresh 1s
		split_brain_threshold 1s
		%s
	}`, zone, us.addr, ap.addr, extra), st)
	waitReady(t, g)
	return g, n, us, ap
}

func TestRoundRobinAnswersAllTargets(t *testing.T) {
	st := newFakeStore(host(app, "10.0.1.1", "fd00::1:1"))
	g, _, _, _ := twoPeers(t, "strategy roundRobin", st)

	m := ask(t, g, app, dns.TypeA)
	if m.Rcode != dns.RcodeSuccess || !m.Authoritative {
		t.Fatalf("rcode %s aa %v, want authoritative NOERROR", dns.RcodeToString[m.Rcode], m.Authoritative)
	}
	if got, want := addrs(m), []string{"10.0.1.1", "10.0.3.1", "10.0.2.1"}; !slices.Equal(got, want) {
		t.Errorf("A: got %v, want %v", got, want)
	}
	m = ask(t, g, app, dns.TypeAAAA)
	if got, want := addrs(m), []string{"fd00::1:1", "fd00::2:1"}; !slices.Equal(got, want) {
		t.Errorf("AAAA: got %v, want %v", got, want)
	}
}

func TestFailoverFirstPrimaryWithTargets(t *testing.T) {
	st := newFakeStore(host(app, "10.0.1.1"))
	g, _, us, _ := twoPeers(t, "strategy failover\nprimary us ap eu", st)

	if got := addrs(ask(t, g, app, dns.TypeA)); !slices.Equal(got, []string{"10.0.2.1"}) {
		t.Fatalf("primary us up: got %v, want us's 10.0.2.1", got)
	}
	// us stops having targets (NODATA is "up, no targets"): ap is next.
	before := testutil.ToFloat64(failovers.WithLabelValues(zone, "ap"))
	us.set(app)
	testkit.Eventually(t, 5*time.Second, "failover to ap", func() bool {
		return slices.Equal(addrs(ask(t, g, app, dns.TypeA)), []string{"10.0.3.1"})
	})
	if after := testutil.ToFloat64(failovers.WithLabelValues(zone, "ap")); after <= before {
		t.Errorf("failovers_total{tag=ap} %v, want it to grow from %v", after, before)
	}
}

func TestFailoverNoPrimaryHasTargetsAnswersAll(t *testing.T) {
	st := newFakeStore(withProps(host(app, "10.0.1.1"), propStrategy, "failover", propPrimary, "xx,yy"))
	g, _, _, _ := twoPeers(t, "", st)
	if got, want := addrs(ask(t, g, app, dns.TypeA)), []string{"10.0.1.1", "10.0.3.1", "10.0.2.1"}; !slices.Equal(got, want) {
		t.Errorf("got %v, want all %v", got, want)
	}
}

func TestFailoverPerFamily(t *testing.T) {
	// ap has A only. With ap primary, an AAAA query gets the next tier's
	// AAAA (us's), an A query ap's: each family from the first tier that
	// has it, so an IPv6-only client is not cut off.
	st := newFakeStore(withProps(host(app, "10.0.1.1", "fd00::1:1"), propStrategy, "failover", propPrimary, "ap,us,eu"))
	g, _, _, _ := twoPeers(t, "", st)
	if got := addrs(ask(t, g, app, dns.TypeAAAA)); !slices.Equal(got, []string{"fd00::2:1"}) {
		t.Errorf("AAAA: got %v, want us's (ap, the primary, has no AAAA)", got)
	}
	if got := addrs(ask(t, g, app, dns.TypeA)); !slices.Equal(got, []string{"10.0.3.1"}) {
		t.Errorf("A: got %v, want ap's", got)
	}

	// No tier has AAAA: NODATA, with the zone's SOA.
	st2 := newFakeStore(withProps(host(app, "10.0.1.1"), propStrategy, "failover", propPrimary, "ap,us,eu"))
	g2, _, us2, _ := twoPeers(t, "", st2)
	us2.set(app, "10.0.2.1")
	testkit.Eventually(t, 5*time.Second, "us without AAAA", func() bool { return len(ask(t, g2, app, dns.TypeAAAA).Answer) == 0 })
	m := ask(t, g2, app, dns.TypeAAAA)
	if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 0 {
		t.Fatalf("AAAA, no tier with AAAA: got %s %v, want NODATA", dns.RcodeToString[m.Rcode], addrs(m))
	}
	if len(m.Ns) != 1 || m.Ns[0].Header().Rrtype != dns.TypeSOA {
		t.Fatalf("NODATA authority: got %v, want the zone SOA", m.Ns)
	}
	// RFC 2308 §3: TTL min(SOA TTL, MINIMUM) = min(300, 60).
	if ttl := m.Ns[0].Header().Ttl; ttl != 60 {
		t.Errorf("SOA TTL %d, want 60", ttl)
	}
	if !m.Authoritative {
		t.Error("NODATA not authoritative")
	}
	if got := addrs(ask(t, g, app, dns.TypeA)); !slices.Equal(got, []string{"10.0.3.1"}) {
		t.Errorf("A: got %v, want ap's", got)
	}
}

func TestWeightedDrawsOneTagByWeight(t *testing.T) {
	st := newFakeStore(withProps(host(app, "10.0.1.1"), propStrategy, "weighted", propWeight, "eu=80,us=20,ap=0"))
	g, _, _, _ := twoPeers(t, "", st)
	count := map[string]int{}
	const n = 2000
	for range n {
		got := addrs(ask(t, g, app, dns.TypeA))
		if len(got) != 1 {
			t.Fatalf("weighted answer %v, want one tag's targets", got)
		}
		count[got[0]]++
	}
	if count["10.0.3.1"] != 0 {
		t.Errorf("ap (weight 0) drawn %d times", count["10.0.3.1"])
	}
	if eu := count["10.0.1.1"]; eu < n*70/100 || eu > n*90/100 {
		t.Errorf("eu drawn %d of %d, want about 80%%", eu, n)
	}
}

func TestWeightedSkipsTagsWithoutTargets(t *testing.T) {
	st := newFakeStore(withProps(host(app), propStrategy, "weighted", propWeight, "eu=90,us=10"))
	g, _, _, _ := twoPeers(t, "", st)
	for range 50 {
		if got := addrs(ask(t, g, app, dns.TypeA)); !slices.Equal(got, []string{"10.0.2.1"}) {
			t.Fatalf("got %v, want us's (eu has no targets, ap weighs 0)", got)
		}
	}
}

func TestFallThrough(t *testing.T) {
	verbatim := host("k8gb."+zone, "10.9.9.9")
	verbatim.Verbatim = true
	// A CNAME (or TXT) alone at a name declares no address: zone data.
	alias := host("alias." + zone)
	alias.AddressDeclared = false
	st := newFakeStore(host(app, "10.0.1.1"), verbatim, host("localtargets-app."+zone, "10.0.1.1"),
		host(zone), host("gslb-ns-eu."+zone, "127.0.0.1"), alias)
	g, n, us, ap := twoPeers(t, "", st)
	before := us.queries.Load() + ap.queries.Load()

	for _, c := range []struct {
		name  string
		qtype uint16
	}{
		{app, dns.TypeMX},
		{app, dns.TypeTXT},
		{app, dns.TypeSOA},
		{"nothere." + zone, dns.TypeA},
		{"random-123." + zone, dns.TypeAAAA},
		{"k8gb." + zone, dns.TypeA},
		{"alias." + zone, dns.TypeA},
		{"alias." + zone, dns.TypeAAAA},
		{"localtargets-app." + zone, dns.TypeA},
		{zone, dns.TypeA},
		{"gslb-ns-eu." + zone, dns.TypeA},
		{"app.other.example.", dns.TypeA},
		{"_gslb-explain.nothere." + zone, dns.TypeTXT},
	} {
		calls := n.calls.Load()
		m := ask(t, g, c.name, c.qtype)
		if n.calls.Load() != calls+1 || m.Rcode != dns.RcodeNameError {
			t.Errorf("%s %s did not fall through (rcode %s)", c.name, dns.TypeToString[c.qtype], dns.RcodeToString[m.Rcode])
		}
	}
	time.Sleep(50 * time.Millisecond)
	// Undeclared names cost no peer query (background refreshes of app may
	// happen meanwhile, at most a few).
	if after := us.queries.Load() + ap.queries.Load(); after-before > 8 {
		t.Errorf("peers got %d queries during fall-through queries", after-before)
	}
}

func TestTTLRule(t *testing.T) {
	withTTL := host("ttl."+zone, "10.0.1.1")
	withTTL.TTL, withTTL.TTLSet = 120, true
	override := withProps(host("over."+zone, "10.0.1.1"), propTTL, "5")
	override.TTL, override.TTLSet = 120, true
	st := newFakeStore(host(app, "10.0.1.1"), withTTL, override)
	g, _, _, _ := twoPeers(t, "ttl 42", st)
	for name, want := range map[string]uint32{app: 42, "ttl." + zone: 120, "over." + zone: 5} {
		m := ask(t, g, name, dns.TypeA)
		if len(m.Answer) == 0 {
			t.Fatalf("%s: no answer", name)
		}
		if ttl := m.Answer[0].Header().Ttl; ttl != want {
			t.Errorf("%s: TTL %d, want %d", name, ttl, want)
		}
	}
}

func TestQuestionCasePreservedAndHostMatchedLowerCase(t *testing.T) {
	st := newFakeStore(host(app, "10.0.1.1"))
	g, _, _, _ := twoPeers(t, "strategy failover\nprimary eu", st)
	m := ask(t, g, "APP.Gslb.Example.COM.", dns.TypeA)
	if len(m.Answer) != 1 || m.Answer[0].Header().Name != "APP.Gslb.Example.COM." {
		t.Fatalf("got %v, want one A with the question's case", m.Answer)
	}
}

func TestK8gbStrategyLabelAccepted(t *testing.T) {
	h := host(app, "10.0.1.1")
	h.Labels["strategy"] = "failover"
	h.Properties[propPrimary] = "ap"
	g, _, _, _ := twoPeers(t, "", newFakeStore(h))
	if got := addrs(ask(t, g, app, dns.TypeA)); !slices.Equal(got, []string{"10.0.3.1"}) {
		t.Errorf("got %v, want ap's (k8gb label strategy=failover)", got)
	}
}

func TestConcurrentMissesMakeOneQuery(t *testing.T) {
	us := startPeer(t, map[string][]string{})
	st := newFakeStore()
	g, _ := newGSLB(t, fmt.Sprintf(`gslb %s {
		geotag eu
		peer us %s
		timeout 500ms
		refresh 1m
	}`, zone, us.addr), st)
	waitReady(t, g)

	// A host declared after the walk: nobody has asked us about it yet.
	const name = "new." + zone
	us.set(name, "10.0.2.7")
	st.Put(host(name, "10.0.1.7"))
	before := us.queries.Load()
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			m := ask(t, g, name, dns.TypeA)
			if got := addrs(m); !slices.Contains(got, "10.0.2.7") {
				t.Errorf("got %v, want us's target too", got)
			}
		})
	}
	wg.Wait()
	// One A and one AAAA query, from either the query path or a prefetch.
	if q := us.queries.Load() - before; q > 4 {
		t.Errorf("50 concurrent misses made %d peer queries, want 2", q)
	}
}
