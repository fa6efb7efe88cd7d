package gslb

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin/test"
	"github.com/fleetdns/fleetdns/internal/store"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// tv is a tag's view with targets: addresses with a ':' are AAAA.
func tv(tag string, addrs ...string) tagView {
	v := tagView{tag: tag, state: stateUp}
	for _, a := range addrs {
		ip := netip.MustParseAddr(a)
		if ip.Is4() {
			v.a = append(v.a, ip)
		} else {
			v.aaaa = append(v.aaaa, ip)
		}
	}
	return v
}

// composed returns a GSLB parsed from the body of a gslb block, and the
// policy a host with props gets under it.
func composed(t testing.TB, body string, props ...string) (*GSLB, *policy) {
	t.Helper()
	g, err := parse(caddy.NewTestController("dns", "gslb "+zone+" {\ngeotag eu\n"+body+"\n}"))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	m := map[string]string{}
	for i := 0; i < len(props); i += 2 {
		m[props[i]] = props[i+1]
	}
	pol, errs := hostPolicy(&g.defaults, m, nil)
	if len(errs) != 0 {
		t.Fatalf("policy: %v", errs)
	}
	return g, pol
}

func answerTags(views []tagView, d decision) string {
	switch {
	case d.allDown:
		return "all-down"
	case d.chosen >= 0:
		return views[d.chosen].tag
	case d.combined != nil:
		return "combined " + strings.Join(d.combined, "+")
	}
	return "all"
}

func TestTiersDrawByWeightWithinTheFirstTier(t *testing.T) {
	g, pol := composed(t, "strategy failover", propPrimary, "eu+us,ap", propWeight, "eu=70,us=30")
	views := []tagView{tv("eu", "198.18.1.1"), tv("us", "198.18.2.1"), tv("ap", "198.18.3.1")}
	n := map[string]int{}
	for range 4000 {
		d := g.decide(pol, views, &client{}, false)
		if d.step != stepFirst || d.tier != 1 {
			t.Fatalf("step %d tier %d", d.step, d.tier)
		}
		n[answerTags(views, d)]++
	}
	if n["ap"] != 0 || n["eu"]+n["us"] != 4000 {
		t.Fatalf("the draw left the first tier: %v", n)
	}
	if eu := float64(n["eu"]) / 40; eu < 65 || eu > 75 {
		t.Errorf("eu drawn %.1f%%, want 70 +- 5: %v", eu, n)
	}
}

func TestTiersLowerTierOnlyWhenTheTierAboveHasNoTargetsPerFamily(t *testing.T) {
	g, pol := composed(t, "strategy failover", propPrimary, "eu+us,ap", propWeight, "eu=70,us=30")
	// eu has only AAAA, us nothing: an A query gets ap, an AAAA query eu.
	views := []tagView{tv("eu", "fd00::1"), tv("us"), tv("ap", "198.18.3.1", "fd00::3")}
	d := g.decide(pol, views, &client{}, false)
	if answerTags(views, d) != "ap" || d.step != stepLower || d.tier != 2 {
		t.Errorf("A: %s step %d tier %d", answerTags(views, d), d.step, d.tier)
	}
	if got := stepText(pol, &d); got != "tier 2 (ap)" {
		t.Errorf("step text %q", got)
	}
	d6 := g.decide(pol, views, &client{}, true)
	if answerTags(views, d6) != "eu" || d6.tier != 1 {
		t.Errorf("AAAA: %s tier %d", answerTags(views, d6), d6.tier)
	}

	// A tag of the first tier not asked yet: no lower tier in its place.
	views = []tagView{tv("eu"), {tag: "us", state: stateUnknown}, tv("ap", "198.18.3.1")}
	if d := g.decide(pol, views, &client{}, false); !d.unknown {
		t.Errorf("an unknown first tier fell to %s", answerTags(views, d))
	}
}

func TestTiersWithoutWeightsCombineTheTier(t *testing.T) {
	g, pol := composed(t, "strategy failover\nprimary eu+us ap")
	views := []tagView{tv("eu", "198.18.1.1"), tv("us", "198.18.2.1", "198.18.1.1"), tv("ap", "198.18.3.1")}
	d := g.decide(pol, views, &client{}, false)
	got := g.targets(app, views, d, false)
	if answerTags(views, d) != "combined eu+us" || fmt.Sprint(got) != "[198.18.1.1 198.18.2.1]" {
		t.Errorf("tier eu+us: %s %v", answerTags(views, d), got)
	}
}

func TestTiersWeightZeroNeverDrawnWhileAnotherHasWeight(t *testing.T) {
	g, pol := composed(t, "strategy failover", propPrimary, "eu+us,ap", propWeight, "eu=0,us=10")
	views := []tagView{tv("eu", "198.18.1.1"), tv("us", "198.18.2.1"), tv("ap", "198.18.3.1")}
	for range 500 {
		if d := g.decide(pol, views, &client{}, false); answerTags(views, d) != "us" {
			t.Fatalf("weight 0 drawn: %s", answerTags(views, d))
		}
	}
	// us gone: eu, weight 0 but the tier's only tag with targets, answers
	// before the lower tier.
	views[1] = tv("us")
	if d := g.decide(pol, views, &client{}, false); answerTags(views, d) != "eu" {
		t.Errorf("eu alone in its tier: %s", answerTags(views, d))
	}
}

func TestFallbackIsTheRegionsOwnOrder(t *testing.T) {
	body := geoCIDRs + "\nfallback eu us ap\nfallback us eu ap"
	g, pol := composed(t, body)
	eu := &client{addr: netip.MustParseAddr("10.1.0.1"), bits: 32}
	views := []tagView{tv("eu"), tv("us", "198.18.2.1"), tv("ap", "198.18.3.1")}
	d := g.decide(pol, views, eu, false)
	if answerTags(views, d) != "us" || d.step != stepFallback || d.tier != 1 {
		t.Errorf("eu client: %s step %d", answerTags(views, d), d.step)
	}
	if got := stepText(pol, &d); got != "fallback step 1 of eu=us,ap" {
		t.Errorf("step text %q", got)
	}
	views[1] = tv("us")
	if d := g.decide(pol, views, eu, false); answerTags(views, d) != "ap" || d.tier != 2 {
		t.Errorf("eu client, us down: %s tier %d", answerTags(views, d), d.tier)
	}
	// The client's region has targets: no fallback.
	views[0] = tv("eu", "198.18.1.1")
	if d := g.decide(pol, views, eu, false); answerTags(views, d) != "eu" || d.step != stepFirst {
		t.Errorf("eu client, eu up: %s", answerTags(views, d))
	}
	// A region without a fallback line: every target, as before.
	ap := &client{addr: netip.MustParseAddr("10.3.0.1"), bits: 32}
	views = []tagView{tv("eu", "198.18.1.1"), tv("us"), tv("ap")}
	if d := g.decide(pol, views, ap, false); answerTags(views, d) != "all" || d.step != stepAll {
		t.Errorf("ap client: %s", answerTags(views, d))
	}
}

func TestAllDownWhenNoTagHasTargets(t *testing.T) {
	g, pol := composed(t, "strategy failover\nprimary eu us\nall_down 198.18.9.9 fd00::9")
	views := []tagView{tv("eu"), tv("us"), tv("ap")}
	for _, aaaa := range []bool{false, true} {
		d := g.decide(pol, views, &client{}, aaaa)
		if !d.allDown || d.step != stepAllDown {
			t.Fatalf("aaaa %v: %+v", aaaa, d)
		}
	}
	rrs := g.allDownAnswer(pol.allDown, app, 30, dns.TypeA)
	if len(rrs) != 1 || rrs[0].(*dns.A).A.String() != "198.18.9.9" {
		t.Errorf("A all-down %v", rrs)
	}
	rrs = g.allDownAnswer(pol.allDown, app, 30, dns.TypeAAAA)
	if len(rrs) != 1 || rrs[0].(*dns.AAAA).AAAA.String() != "fd00::9" {
		t.Errorf("AAAA all-down %v", rrs)
	}
	// A tag with AAAA only: the service is up, an A query gets NODATA (the
	// lower tiers' targets, here none), not the maintenance page.
	views[2] = tv("ap", "fd00::3")
	if d := g.decide(pol, views, &client{}, false); d.allDown {
		t.Errorf("all-down while ap has AAAA targets")
	}
	// A peer not asked yet may have targets.
	views[2] = tagView{tag: "ap", state: stateUnknown}
	if d := g.decide(pol, views, &client{}, false); d.allDown {
		t.Errorf("all-down while ap is unknown")
	}
	// Without all-down: every target (fail open).
	g2, pol2 := composed(t, "strategy failover\nprimary eu us")
	if d := g2.decide(pol2, []tagView{tv("eu"), tv("us")}, &client{}, false); d.allDown || d.step != stepAll {
		t.Errorf("default all-down: %+v", d)
	}
}

func TestAllDownCNAME(t *testing.T) {
	g, pol := composed(t, "strategy roundRobin", propAllDown, "Sorry.Example.NET")
	rrs := g.allDownAnswer(pol.allDown, app, 30, dns.TypeAAAA)
	if len(rrs) != 1 || rrs[0].(*dns.CNAME).Target != "sorry.example.net." {
		t.Fatalf("CNAME all-down %v", rrs)
	}
	// Refused at the apex: the answer falls back to every target.
	d := decision{allDown: true, step: stepAllDown}
	g.settleAllDown(pol, &store.Host{Name: zone}, &d)
	if d.allDown || d.step != stepAll || d.why != whyAllDownRefused {
		t.Errorf("CNAME at the apex not refused: %+v", d)
	}
	d = decision{allDown: true, step: stepAllDown}
	g.settleAllDown(pol, &store.Host{Name: app}, &d)
	if !d.allDown {
		t.Errorf("CNAME below the apex refused")
	}
	// Refused beside other data at the host (RFC 1034 §3.6.2).
	d = decision{allDown: true, step: stepAllDown}
	g.settleAllDown(pol, &store.Host{Name: app, OtherTypes: true}, &d)
	if d.allDown || d.step != stepAll || d.why != whyAllDownBeside {
		t.Errorf("CNAME beside other data not refused: %+v", d)
	}
	// Addresses stand beside other data.
	g2, pol2 := composed(t, "strategy roundRobin", propAllDown, "198.18.9.9")
	d = decision{allDown: true, step: stepAllDown}
	g2.settleAllDown(pol2, &store.Host{Name: app, OtherTypes: true}, &d)
	if !d.allDown {
		t.Errorf("all-down addresses refused beside other data")
	}
}

func TestMalformedComposedPropertyIgnoredAsAWhole(t *testing.T) {
	g, err := parse(caddy.NewTestController("dns", "gslb "+zone+" {\ngeotag eu\nstrategy failover\nprimary eu+us ap\nfallback eu us ap\n}"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ prop, val string }{
		{propPrimary, "eu+,ap"},
		{propPrimary, "eu+us,us"},
		{propFallback, "eu"},
		{propFallback, "eu=us;eu=ap"},
		{propFallback, "=us"},
		{propAllDown, "sorry.example.net.,198.18.0.1"},
		{propAllDown, "a.example.net,b.example.net"},
		{propAllDown, "not an address/"},
		{propAllDown, ""},
	} {
		pol, errs := hostPolicy(&g.defaults, map[string]string{tc.prop: tc.val}, nil)
		if len(errs) != 1 {
			t.Errorf("%s=%q: errors %v", tc.prop, tc.val, errs)
			continue
		}
		if pe, ok := errs[0].(*propError); !ok || pe.prop != tc.prop {
			t.Errorf("%s=%q: error %v not of the property", tc.prop, tc.val, errs[0])
		}
		if strings.Join(pol.primary, ",") != "eu+us,ap" || len(pol.fallback) != 1 || pol.allDown != nil {
			t.Errorf("%s=%q: defaults not kept: %+v", tc.prop, tc.val, pol)
		}
	}
}

func TestComposedCorefile(t *testing.T) {
	g, err := parse(caddy.NewTestController("dns", `gslb `+zone+` {
		geotag eu
		strategy failover
		primary eu+us ap
		weight eu 70 us 30
		fallback eu us ap
		fallback us eu ap
		all_down 198.18.9.9 fd00::9
	}`))
	if err != nil {
		t.Fatal(err)
	}
	d := g.defaults
	if fmt.Sprint(d.tiers) != "[[eu us] [ap]]" || fmt.Sprint(d.fallback) != "map[eu:[us ap] us:[eu ap]]" || d.allDown.String() != "198.18.9.9,fd00::9" {
		t.Errorf("defaults %+v", d)
	}
	for _, bad := range []string{
		"primary eu+ ap",
		"primary eu us+eu",
		"fallback eu",
		"fallback eu us\nfallback eu ap",
		"all_down",
		"all_down sorry.example.net. 198.18.0.1",
		"all_down 198.18.0.1\nall_down 198.18.0.2",
	} {
		_, err := parse(caddy.NewTestController("dns", "gslb "+zone+" {\ngeotag eu\n"+bad+"\n}"))
		if err == nil || !strings.Contains(err.Error(), "Testfile:") {
			t.Errorf("%q: error %v, want one naming the line", bad, err)
		}
	}
}

// TestComposedProperties draws views and policies at random: an answer
// never mixes tiers, never holds a tag of weight 0 while another tag of its
// tier with targets has weight, and never comes from a fallback while the
// client's region has targets.
func TestComposedProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 1))
	tags := []string{"eu", "us", "ap", "sa"}
	g, _ := composed(t, "geo cidr 10.1.0.0/16 eu\ngeo cidr 10.2.0.0/16 us\ngeo cidr 10.3.0.0/16 ap\ngeo cidr 10.4.0.0/16 sa")
	clients := map[string]*client{}
	for i, tag := range tags {
		clients[tag] = &client{addr: netip.MustParseAddr(fmt.Sprintf("10.%d.0.1", i+1)), bits: 32}
	}
	for iter := range 20000 {
		perm := slices.Clone(tags)
		r.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		// Random tiers over a random prefix of perm.
		var tiers [][]string
		var entries []string
		for k := 0; k < len(perm); {
			n := 1 + r.IntN(len(perm)-k)
			tiers = append(tiers, perm[k:k+n])
			entries = append(entries, strings.Join(perm[k:k+n], "+"))
			k += n
		}
		pol := &policy{strategy: failover}
		if err := pol.setPrimary(entries); err != nil {
			t.Fatal(err)
		}
		if r.IntN(3) > 0 {
			pol.weights = map[string]int{}
			for _, tag := range tags {
				pol.weights[tag] = r.IntN(3) * 10
			}
		}
		// Fallback orders over a random prefix of perm, their steps
		// sometimes tiers.
		pol.fallback = map[string][]string{}
		fbTiers := map[string][][]string{}
		for _, tag := range tags {
			order := perm[:1+r.IntN(len(perm))]
			for k := 0; k < len(order); {
				n := 1
				if r.IntN(2) == 0 {
					n = 1 + r.IntN(len(order)-k)
				}
				pol.fallback[tag] = append(pol.fallback[tag], strings.Join(order[k:k+n], "+"))
				fbTiers[tag] = append(fbTiers[tag], order[k:k+n])
				k += n
			}
		}
		pol.prepare()
		var views []tagView
		for i, tag := range tags {
			v := tagView{tag: tag, state: stateUp}
			if r.IntN(2) == 0 {
				v.a = []netip.Addr{netip.AddrFrom4([4]byte{198, 18, byte(i), 1})}
			}
			if r.IntN(2) == 0 {
				v.aaaa = []netip.Addr{netip.MustParseAddr(fmt.Sprintf("fd00::%d", i+1))}
			}
			views = append(views, v)
		}
		aaaa := r.IntN(2) == 0

		d := g.decide(pol, views, &client{}, aaaa)
		ans := combined(views, d.combined, aaaa)
		if d.chosen >= 0 {
			ans = []int{d.chosen}
		}
		if len(ans) > 0 {
			tierOf := func(tag string) int {
				for n, tr := range tiers {
					if slices.Contains(tr, tag) {
						return n
					}
				}
				return -1
			}
			tr := tierOf(views[ans[0]].tag)
			for _, i := range ans {
				if tierOf(views[i].tag) != tr {
					t.Fatalf("iter %d: answer mixes tiers: %s of %v", iter, answerTags(views, d), tiers)
				}
				if pol.weights != nil && pol.weights[views[i].tag] == 0 {
					for _, tag := range tiers[tr] {
						if j := findTag(views, tag); views[j].has(aaaa) && pol.weights[tag] > 0 {
							t.Fatalf("iter %d: weight 0 tag %s drawn beside %s (weights %v)", iter, views[i].tag, tag, pol.weights)
						}
					}
				}
			}
			for n := range tr {
				for _, tag := range tiers[n] {
					if views[findTag(views, tag)].has(aaaa) {
						t.Fatalf("iter %d: tier %d answered while %s of tier %d has targets", iter, tr+1, tag, n+1)
					}
				}
			}
		}

		pol.strategy = geoip
		region := tags[r.IntN(len(tags))]
		d = g.decide(pol, views, clients[region], aaaa)
		if views[findTag(views, region)].has(aaaa) && (d.step == stepFallback || answerTags(views, d) != region) {
			t.Fatalf("iter %d: region %s has targets, answer %s step %d", iter, region, answerTags(views, d), d.step)
		}
		if d.step == stepFallback {
			// One step of the region's order answers, the first with
			// targets, never mixed with another step.
			step := fbTiers[region][d.tier-1]
			ans := combined(views, d.combined, aaaa)
			if d.chosen >= 0 {
				ans = []int{d.chosen}
			}
			for _, i := range ans {
				if !slices.Contains(step, views[i].tag) {
					t.Fatalf("iter %d: fallback answer %s outside step %d %v of %v", iter, answerTags(views, d), d.tier, step, pol.fallback[region])
				}
			}
			for _, earlier := range fbTiers[region][:d.tier-1] {
				for _, tag := range earlier {
					if views[findTag(views, tag)].has(aaaa) {
						t.Fatalf("iter %d: fallback step %d answered while %s of an earlier step has targets", iter, d.tier, tag)
					}
				}
			}
		}
	}
}

func explainText(t *testing.T, g *GSLB, name string, opts ...queryOpt) string {
	t.Helper()
	m := ask(t, g, "_gslb-explain."+name, dns.TypeTXT, append([]queryOpt{from("127.0.0.1")}, opts...)...)
	if len(m.Answer) != 1 {
		t.Fatalf("explain %s: %v", name, m)
	}
	return strings.Join(m.Answer[0].(*dns.TXT).Txt, "\n")
}

func wantLines(t *testing.T, txt string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(txt, w) {
			t.Errorf("explain lacks %q:\n%s", w, txt)
		}
	}
}

func TestServeTiersAndExplain(t *testing.T) {
	st := newFakeStore(withProps(host(app, "10.0.1.1"), propStrategy, "failover", propPrimary, "us+ap,eu", propWeight, "us=70,ap=30"))
	g, _, _, _ := twoPeers(t, "", st)
	n := map[string]int{}
	for range 400 {
		for _, a := range addrs(ask(t, g, app, dns.TypeA)) {
			n[a]++
		}
	}
	if n["10.0.1.1"] != 0 || n["10.0.2.1"]+n["10.0.3.1"] != 400 || n["10.0.2.1"] < 240 || n["10.0.2.1"] > 320 {
		t.Errorf("tier us+ap by 70/30: %v", n)
	}
	txt := explainText(t, g, app)
	wantLines(t, txt, "primary us+ap,eu weights ap=30,us=70", "answer AAAA us: tier 1 (us+ap), first primary tag with targets")
	if !strings.Contains(txt, "answer A us: tier 1 (us+ap), drawn by weight within the first tier") && !strings.Contains(txt, "answer A ap: tier 1 (us+ap), drawn by weight within the first tier") {
		t.Errorf("explain A line:\n%s", txt)
	}
}

func TestServeFallbackAndExplain(t *testing.T) {
	// f is declared here (eu) only: the peers have no targets for it.
	st := newFakeStore(host("f."+zone, "10.0.1.1"))
	g, _, _, _ := twoPeers(t, geoCIDRs+"\nfallback ap us eu", st)
	m := ask(t, g, "f."+zone, dns.TypeA, withECS(1, "10.3.0.0", 24))
	if got := addrs(m); fmt.Sprint(got) != "[10.0.1.1]" {
		t.Errorf("ap client: %v", got)
	}
	wantLines(t, explainText(t, g, "f."+zone, withECS(1, "10.3.0.0", 24)),
		"client 10.3.0.0/24 geo tag ap", "fallback ap=us,eu", "answer A eu: fallback step 2 of ap=us,eu, the client's tag has no targets: first tag of its fallback order")
}

func TestServeAllDown(t *testing.T) {
	// Declared with no targets here; the peers have none either.
	st := newFakeStore(
		withProps(host("down."+zone), propStrategy, "failover", propAllDown, "198.18.9.9,fd00::9"),
		withProps(host("sorry."+zone), propAllDown, "sorry.example.net."),
		host("open."+zone))
	g, _, _, _ := twoPeers(t, "", st)
	if got := addrs(ask(t, g, "down."+zone, dns.TypeA)); fmt.Sprint(got) != "[198.18.9.9]" {
		t.Errorf("A all-down %v", got)
	}
	if got := addrs(ask(t, g, "down."+zone, dns.TypeAAAA)); fmt.Sprint(got) != "[fd00::9]" {
		t.Errorf("AAAA all-down %v", got)
	}
	m := ask(t, g, "sorry."+zone, dns.TypeAAAA)
	if len(m.Answer) != 1 || m.Answer[0].(*dns.CNAME).Target != "sorry.example.net." {
		t.Errorf("CNAME all-down %v", m.Answer)
	}
	// No all-down: fail open, every declared target (none here): NODATA.
	if m := ask(t, g, "open."+zone, dns.TypeA); len(m.Answer) != 0 || m.Rcode != dns.RcodeSuccess {
		t.Errorf("no all-down: %v", m)
	}
	wantLines(t, explainText(t, g, "down."+zone), "all-down 198.18.9.9,fd00::9", "answer A all-down: no tag has targets: the all-down answer")
}

func TestMalformedComposedPropertyLoggedOnceAndCounted(t *testing.T) {
	st := newFakeStore(withProps(host(app, "10.0.1.1"), propStrategy, "geoip", propFallback, "eu=us;eu=ap"))
	g, _, _, _ := twoPeers(t, geoCIDRs+"\nfallback eu ap", st)
	before := testutil.ToFloat64(policyErrors.WithLabelValues(zone, "fallback"))
	g.walk()
	g.walk()
	if d := testutil.ToFloat64(policyErrors.WithLabelValues(zone, "fallback")) - before; d != 0 {
		// twoPeers' first walk counted it already: later walks add nothing.
		t.Errorf("policy_errors_total fallback grew by %v on later walks", d)
	}
	if v := testutil.ToFloat64(policyErrors.WithLabelValues(zone, "fallback")); v < 1 {
		t.Errorf("policy_errors_total fallback = %v, want counted", v)
	}
	// The Corefile's fallback applies, the host's is ignored as a whole.
	if got := addrs(ask(t, g, app, dns.TypeA, withECS(1, "10.1.0.0", 24))); fmt.Sprint(got) != "[10.0.1.1]" {
		t.Errorf("eu client: %v", got)
	}
	if pol := g.policyOf(mustHost(t, g, app)); fmt.Sprint(pol.fallback) != "map[eu:[ap]]" {
		t.Errorf("fallback %v, want the default", pol.fallback)
	}
}

func TestTierDrawIsOneForBothFamiliesOfANY(t *testing.T) {
	st := newFakeStore(withProps(host(app, "10.0.1.1", "fd00::1:1"), propStrategy, "failover", propPrimary, "eu+us,ap", propWeight, "eu=50,us=50"))
	g, _, _, _ := twoPeers(t, "", st)
	for range 50 {
		got := addrs(ask(t, g, app, dns.TypeANY, from("127.0.0.1"), func(m *dns.Msg, _ *test.ResponseWriter) { m.SetEdns0(4096, false) }))
		s := fmt.Sprint(got)
		if s != "[10.0.1.1 fd00::1:1]" && s != "[10.0.2.1 fd00::2:1]" {
			t.Fatalf("ANY mixes tags of the tier: %v", got)
		}
	}
}

func mustHost(t *testing.T, g *GSLB, name string) *store.Host {
	t.Helper()
	h, ok := g.host(name)
	if !ok {
		t.Fatalf("no host %s", name)
	}
	return h
}

// TestFallbackTiers: a step of a region's fallback order may be a tier:
// drawn by weight among its tags with targets, else their targets
// combined; a tag in two steps is refused.
func TestFallbackTiers(t *testing.T) {
	g, pol := composed(t, geoCIDRs+"\nfallback eu us+ap sa")
	eu := &client{addr: netip.MustParseAddr("10.1.0.1"), bits: 32}
	views := []tagView{tv("eu"), tv("us", "198.18.2.1"), tv("ap", "198.18.3.1"), tv("sa", "198.18.4.1")}
	d := g.decide(pol, views, eu, false)
	if answerTags(views, d) != "combined us+ap" || d.step != stepFallback || d.tier != 1 || d.why != whyFallbackCombined {
		t.Errorf("eu client: %s step %d tier %d %q", answerTags(views, d), d.step, d.tier, d.why)
	}
	if got := stepText(pol, &d); got != "fallback step 1 of eu=us+ap,sa" {
		t.Errorf("step text %q", got)
	}
	// One tag of the tier with targets: that tag.
	views[1] = tv("us")
	if d := g.decide(pol, views, eu, false); answerTags(views, d) != "ap" || d.tier != 1 {
		t.Errorf("us down: %s tier %d", answerTags(views, d), d.tier)
	}
	// The tier without targets: the next step.
	views[2] = tv("ap")
	if d := g.decide(pol, views, eu, false); answerTags(views, d) != "sa" || d.tier != 2 {
		t.Errorf("us and ap down: %s tier %d", answerTags(views, d), d.tier)
	}

	// With weights, one tag of the tier drawn by weight, never weight 0.
	g, pol = composed(t, geoCIDRs+"\nfallback eu us+ap\nweight us 1 ap 0")
	views = []tagView{tv("eu"), tv("us", "198.18.2.1"), tv("ap", "198.18.3.1")}
	for range 200 {
		if d := g.decide(pol, views, eu, false); answerTags(views, d) != "us" || d.why != whyFallbackDrawn {
			t.Fatalf("weighted fallback tier: %s %q", answerTags(views, d), d.why)
		}
	}

	for _, bad := range []string{"eu=us+ap,us", "eu=us+,ap", "eu=us+us"} {
		if _, err := parseFallback(bad); err == nil {
			t.Errorf("parseFallback(%q) accepted", bad)
		}
	}
}
