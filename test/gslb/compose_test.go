package gslb

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

// Composed hosts: tiers drawn by weight, a region's fallback order and the
// all-down answer, declared alike in every cluster.
const (
	hostTiers = "tiers." + zone
	hostDown  = "down." + zone
	hostSorry = "sorry." + zone
)

// hostRegion is a geoip host whose cluster tag declares it without targets:
// a client of that region falls back.
func hostRegion(tag string) string { return "region-" + tag + "." + zone }

// tiersFresh tiers hosts alike, hostTiersN(0...tiersFresh-1).
const tiersFresh = 400

func hostTiersN(i int) string { return "tiers-" + strconv.Itoa(i) + "." + zone }

var composedV6 = map[string][]string{"eu": {"fd00:10::1"}, "us": {"fd00:20::1"}, "ap": {"fd00:30::1"}}

const (
	allDownA    = "198.18.99.1"
	allDownAAAA = "fd00:99::1"
	fallbackAll = "eu=us,ap;us=eu,ap;ap=us,eu"
)

// composedHosts is one cluster's composed hosts; down lists the hosts
// declared here without targets.
func composedHosts(tag string, down ...string) string {
	var eps []testkit.Endpoint
	add := func(name string, props [][2]string) {
		a, aaaa := targetsOf[tag], composedV6[tag]
		for _, d := range down {
			if d == name {
				a, aaaa = nil, nil
			}
		}
		eps = append(eps,
			testkit.Endpoint{DNSName: name, RecordType: "A", TTL: 7, Targets: a, ProviderSpecific: props},
			testkit.Endpoint{DNSName: name, RecordType: "AAAA", TTL: 7, Targets: aaaa})
	}
	add(hostTiers, [][2]string{{"gslb/strategy", "failover"}, {"gslb/primary", "eu+us,ap"}, {"gslb/weight", "eu=70,us=30"},
		{"gslb/all-down", allDownA + "," + allDownAAAA}})
	// One tiers host per answer through a caching resolver, each asked
	// once: every answer is a fresh draw.
	for i := range tiersFresh {
		add(hostTiersN(i), [][2]string{{"gslb/strategy", "failover"}, {"gslb/primary", "eu+us,ap"}, {"gslb/weight", "eu=70,us=30"}})
	}
	for _, r := range tags {
		add(hostRegion(r), [][2]string{{"gslb/strategy", "geoip"}, {"gslb/fallback", fallbackAll}})
	}
	add(hostDown, [][2]string{{"gslb/strategy", "failover"}, {"gslb/primary", "eu,us,ap"}, {"gslb/all-down", allDownA + "," + allDownAAAA}})
	add(hostSorry, [][2]string{{"gslb/all-down", "sorry.example.net."}})
	return testkit.DNSEndpoint("apps", "composed", nil, eps...)
}

func (f *fleet) setComposed(t *testing.T, tag string, down ...string) {
	t.Helper()
	testkit.WriteFile(t, f.clusters[tag].dir, "composed.yaml", composedHosts(tag, down...))
}

// TestComposedPolicies: three clusters answer tiers by weight, a client of
// each region its region's fallback, and the all-down answer when every
// cluster's targets are gone, to A and AAAA clients alike.
func TestComposedPolicies(t *testing.T) {
	f := newFleet(t)
	for _, tag := range tags {
		own := hostRegion(tag)
		f.setComposed(t, tag, own, hostSorry)
	}
	o := fleetOptions{blockExtra: map[string]string{}}
	metrics := map[string]string{}
	for _, tag := range tags {
		metrics[tag] = harness.HostPort(t, f.clusters[tag].ip)
		o.blockExtra[tag] = "    prometheus " + metrics[tag] + "\n"
	}
	f.start(t, o)
	// The composed hosts are known everywhere once every cluster answers
	// the tiers host's first tier.
	for _, tag := range tags {
		c := f.clusters[tag]
		testkit.Eventually(t, 10*time.Second, tag+" serves "+hostTiers, func() bool {
			got, err := ask(c.addr, hostTiers, dns.TypeA)
			return err == nil && (equal(got, f.union("eu")) || equal(got, f.union("us")))
		})
	}

	t.Run("tiers drawn by weight within the first tier", func(t *testing.T) {
		for _, tag := range tags {
			c := f.clusters[tag]
			n := map[string]int{}
			const draws = 400
			for range draws {
				got, err := ask(c.addr, hostTiers, dns.TypeA)
				switch {
				case err != nil:
					t.Fatal(err)
				case equal(got, f.union("eu")):
					n["eu"]++
				case equal(got, f.union("us")):
					n["us"]++
				default:
					t.Fatalf("%s: %s A = %v: not one tag of the first tier eu+us", tag, hostTiers, got)
				}
			}
			if eu := 100 * n["eu"] / draws; eu < 60 || eu > 80 {
				t.Errorf("%s: eu drawn %d%% of %d, want 70 +- 10 (%v)", tag, eu, draws, n)
			}
			// AAAA alike: one tag of the tier.
			got, err := ask(c.addr, hostTiers, dns.TypeAAAA)
			if err != nil || !(equal(got, composedV6["eu"]) || equal(got, composedV6["us"])) {
				t.Errorf("%s: %s AAAA = %v (%v), want eu's or us's", tag, hostTiers, got, err)
			}
			if x := explainTCP(t, c, hostTiers); !strings.Contains(x, "tier 1 (eu+us), drawn by weight") {
				t.Errorf("%s: explain lacks the tier: %s", tag, x)
			}
			if s := metricSum(t, metrics[tag], "coredns_gslb_answer_steps_total", `strategy="failover"`, `step="first"`); s < draws {
				t.Errorf("%s: answer_steps_total first = %v, want >= %d", tag, s, draws)
			}
		}
	})

	t.Run("a client of each region falls back in its region's order", func(t *testing.T) {
		next := map[string]string{"eu": "us", "us": "eu", "ap": "us"}
		for _, region := range tags {
			for _, tag := range tags {
				c := f.clusters[tag]
				for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA} {
					want := f.union(next[region])
					if qtype == dns.TypeAAAA {
						want = composedV6[next[region]]
					}
					m, err := harness.Ask(c.addr, hostRegion(region), qtype, harness.ECS(subnetIn(region)))
					if err != nil {
						t.Fatal(err)
					}
					if got := harness.Targets(m, qtype); !equal(got, want) {
						t.Errorf("%s: %s %s for a client of %s = %v, want %s's %v (not every target)", tag, hostRegion(region), dns.TypeToString[qtype], region, got, next[region], want)
					}
					// A client whose region has targets: its own, no fallback.
					other := next[region]
					m, err = harness.Ask(c.addr, hostRegion(region), qtype, harness.ECS(subnetIn(other)))
					if err != nil {
						t.Fatal(err)
					}
					want = f.union(other)
					if qtype == dns.TypeAAAA {
						want = composedV6[other]
					}
					if got := harness.Targets(m, qtype); !equal(got, want) {
						t.Errorf("%s: %s %s for a client of %s = %v, want its own %v", tag, hostRegion(region), dns.TypeToString[qtype], other, got, want)
					}
				}
			}
		}
		// The explain record for a client of eu (its subnet in ECS).
		c := f.clusters["ap"]
		x := ""
		m, err := harness.Ask(c.addr, "_gslb-explain."+hostRegion("eu"), dns.TypeTXT, harness.ECS(subnetIn("eu")), harness.TCP)
		if err == nil && len(m.Answer) == 1 {
			x = strings.Join(m.Answer[0].(*dns.TXT).Txt, "")
		}
		if !strings.Contains(x, "fallback eu=us,ap") || !strings.Contains(x, "fallback step 1 of eu=us,ap") {
			t.Errorf("explain of %s for a client of eu: %s", hostRegion("eu"), x)
		}
		if s := metricSum(t, metrics["ap"], "coredns_gslb_answer_steps_total", `strategy="geoip"`, `step="fallback"`); s < 2 {
			t.Errorf("answer_steps_total fallback = %v", s)
		}
	})

	t.Run("the all-down answer when every cluster's targets are gone", func(t *testing.T) {
		// Before: no cluster declares sorry with targets: CNAME to A and AAAA.
		for _, tag := range tags {
			for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA} {
				m := harness.Exchange(t, f.clusters[tag].addr, hostSorry, qtype)
				if len(m.Answer) != 1 || m.Answer[0].Header().Rrtype != dns.TypeCNAME || m.Answer[0].(*dns.CNAME).Target != "sorry.example.net." {
					t.Errorf("%s: %s %s = %v, want the all-down CNAME", tag, hostSorry, dns.TypeToString[qtype], m.Answer)
				}
			}
		}
		// eu and us go: the tiers host answers its lower tier, down ap.
		f.setComposed(t, "eu", hostRegion("eu"), hostSorry, hostTiers, hostDown)
		f.setComposed(t, "us", hostRegion("us"), hostSorry, hostTiers, hostDown)
		for _, tag := range tags {
			c := f.clusters[tag]
			testkit.Eventually(t, 10*time.Second, tag+" answers the lower tier ap", func() bool {
				got, err := ask(c.addr, hostTiers, dns.TypeA)
				got6, err6 := ask(c.addr, hostTiers, dns.TypeAAAA)
				return err == nil && err6 == nil && equal(got, f.union("ap")) && equal(got6, composedV6["ap"])
			})
		}
		// The last ones go: every cluster answers all-down, A and AAAA.
		f.setComposed(t, "ap", hostRegion("ap"), hostSorry, hostTiers, hostDown)
		for _, tag := range tags {
			c := f.clusters[tag]
			for _, name := range []string{hostTiers, hostDown} {
				testkit.Eventually(t, 10*time.Second, tag+" answers all-down for "+name, func() bool {
					got, err := ask(c.addr, name, dns.TypeA)
					got6, err6 := ask(c.addr, name, dns.TypeAAAA)
					return err == nil && err6 == nil && equal(got, []string{allDownA}) && equal(got6, []string{allDownAAAA})
				})
			}
			if x := explainTCP(t, c, hostDown); !strings.Contains(x, "answer A all-down") {
				t.Errorf("%s: explain: %s", tag, x)
			}
			if s := metricSum(t, metrics[tag], "coredns_gslb_answer_steps_total", `step="all_down"`); s == 0 {
				t.Errorf("%s: no all_down step counted", tag)
			}
		}
		// eu comes back: its targets, not the all-down answer.
		f.setComposed(t, "eu", hostRegion("eu"), hostSorry)
		c := f.clusters["ap"]
		testkit.Eventually(t, 10*time.Second, "ap answers eu again", func() bool {
			got, err := ask(c.addr, hostDown, dns.TypeA)
			return err == nil && equal(got, f.union("eu"))
		})
	})
}

// TestComposedThroughUnbound: the same, as clients behind Unbound with its
// subnetcache see it (ECS from the client's /24): tiers by weight over
// fresh answers, each region's client its fallback, the all-down answer.
func TestComposedThroughUnbound(t *testing.T) {
	f := newFleet(t)
	for _, tag := range tags {
		f.setComposed(t, tag, hostRegion(tag), hostSorry)
	}
	f.start(t, fleetOptions{gslbExtra: map[string]string{"": resolverGeo}})
	eu := f.clusters["eu"]
	testkit.Eventually(t, 10*time.Second, "eu serves "+hostTiers, func() bool {
		got, err := ask(eu.addr, hostTiers, dns.TypeA)
		return err == nil && (equal(got, f.union("eu")) || equal(got, f.union("us")))
	})
	u := startUpstream(t, eu.addr)
	addr := startUnboundSubnet(t, u)
	client := map[string]string{}
	for _, c := range resolverClients {
		client[c.region] = c.ip
	}

	t.Run("tiers by weight over 400 fresh answers", func(t *testing.T) {
		n := map[string]int{}
		for i := range tiersFresh {
			got, err := askResolver(client["eu"], addr, hostTiersN(i))
			switch {
			case err != nil:
				t.Fatal(err)
			case equal(got, f.union("eu")):
				n["eu"]++
			case equal(got, f.union("us")):
				n["us"]++
			default:
				t.Fatalf("%s A = %v: not one tag of the first tier eu+us", hostTiersN(i), got)
			}
			if q, _ := u.queries(hostTiersN(i)); q != 1 {
				t.Fatalf("%s: eu was asked %d times, want once (a fresh answer)", hostTiersN(i), q)
			}
		}
		if eu := 100 * n["eu"] / tiersFresh; eu < 60 || eu > 80 {
			t.Errorf("eu drawn %d%% of %d, want 70 +- 10 (%v)", eu, tiersFresh, n)
		}
	})

	t.Run("a client of each region gets its fallback", func(t *testing.T) {
		// resolverGeo: eu 127.0.40.0/24, us 127.0.32.0/23, ap 127.0.33.0/24.
		next := map[string]string{"eu": "us", "us": "eu", "ap": "us"}
		for _, region := range tags {
			got, err := askFrom(client[region], addr, hostRegion(region), dns.TypeA)
			if err != nil || !equal(got, f.union(next[region])) {
				t.Errorf("client of %s: %s A = %v (%v), want %s's %v", region, hostRegion(region), got, err, next[region], f.union(next[region]))
			}
			got, err = askFrom(client[region], addr, hostRegion(region), dns.TypeAAAA)
			if err != nil || !equal(got, composedV6[next[region]]) {
				t.Errorf("client of %s: %s AAAA = %v (%v), want %s's %v", region, hostRegion(region), got, err, next[region], composedV6[next[region]])
			}
		}
	})

	t.Run("the all-down answer", func(t *testing.T) {
		for _, tag := range tags {
			f.setComposed(t, tag, hostRegion(tag), hostSorry, hostTiers, hostDown)
		}
		testkit.Eventually(t, 10*time.Second, "eu answers all-down", func() bool {
			got, err := ask(eu.addr, hostDown, dns.TypeA)
			return err == nil && equal(got, []string{allDownA})
		})
		for _, region := range tags {
			got, err := askFrom(client[region], addr, hostDown, dns.TypeA)
			if err != nil || !equal(got, []string{allDownA}) {
				t.Errorf("client of %s: %s A = %v (%v), want all-down %s", region, hostDown, got, err, allDownA)
			}
			got, err = askFrom(client[region], addr, hostDown, dns.TypeAAAA)
			if err != nil || !equal(got, []string{allDownAAAA}) {
				t.Errorf("client of %s: %s AAAA = %v (%v), want all-down %s", region, hostDown, got, err, allDownAAAA)
			}
		}
		// The CNAME reaches the client (its target is in no zone here).
		m := new(dns.Msg)
		m.SetQuestion(hostSorry+".", dns.TypeAAAA)
		r, err := exchangeFrom(client["eu"], addr, m)
		if err != nil || len(r.Answer) == 0 || r.Answer[0].Header().Rrtype != dns.TypeCNAME {
			t.Errorf("%s AAAA through Unbound: %v (%v), want the all-down CNAME", hostSorry, r, err)
		}
	})
}
