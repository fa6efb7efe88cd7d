package dnssec_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"
	"github.com/miekg/dns"
)

// fleet is two signed clusters, eu running deploy/gslb/dnssec's Corefile
// and us the chart's (gslb.dnssec.keySecret set), one key set, the parent
// delegating to both, and a child zone below an insecure delegation.
type fleet struct {
	k      *harness.Kube
	keys   *keySet
	eu, us *cluster
	parent string
	child  string // the insecure child's server

	euCorefile, usCorefile string // as started, before localize
}

var geoTargets = map[string]string{"eu": "198.18.5.1", "us": "198.18.5.2"}

// geoSource gives the shipped Corefiles (which name no geo source: a
// cluster adds its own mmdb) two client networks, one a region.
func geoSource(cf string) string {
	return strings.Replace(cf, "strategy roundRobin", "strategy roundRobin\n           geo cidr 198.18.128.0/24 eu\n           geo cidr 198.18.129.0/24 us", 1)
}

func fleetObjects(tag, euIP, usIP, childIP string, target string) []testkit.Endpoint {
	return []testkit.Endpoint{
		testkit.EP("gslb.example.com", "NS", 300, "gslb-ns-eu.gslb.example.com", "gslb-ns-us.gslb.example.com"),
		testkit.EP("gslb-ns-eu.gslb.example.com", "A", 300, euIP),
		testkit.EP("gslb-ns-us.gslb.example.com", "A", 300, usIP),
		{DNSName: "app.gslb.example.com", RecordType: "A", TTL: 30, Targets: []string{target},
			ProviderSpecific: [][2]string{{"gslb/strategy", "failover"}, {"gslb/primary", "eu,us"}}},
		testkit.EP("static.gslb.example.com", "A", 300, "198.18.3.3"),
		// An insecure delegation below the zone (no DS), and two whose name
		// server lies under one of them (sibling glue).
		testkit.EP("child.gslb.example.com", "NS", 300, "ns.child.gslb.example.com"),
		testkit.EP("ns.child.gslb.example.com", "A", 300, childIP),
		testkit.EP("sib.gslb.example.com", "NS", 300, "ns.child.gslb.example.com"),
		// A geo host: each region its own cluster's target.
		{DNSName: "geo.gslb.example.com", RecordType: "A", TTL: 30, Targets: []string{geoTargets[tag]},
			ProviderSpecific: [][2]string{{"gslb/strategy", "geoip"}}},
	}
}

// startFleet starts the fleet; edit (if any) changes both Corefiles first.
func startFleet(t *testing.T, edit ...func(string) string) *fleet {
	t.Helper()
	f := &fleet{k: harness.SharedKube(t), keys: newKeySet(t)}
	euIP, usIP := harness.NewIP(t), harness.NewIP(t)
	childIP := harness.NewIP(t)
	f.child = harness.StartKnotAt(t, childIP, map[string]string{"child.gslb.example.com.": "$TTL 60\n@ IN SOA ns hostmaster 1 60 60 600 60\n@ IN NS ns\nns IN A " + childIP + "\nwww IN A 198.18.4.4\n"}).Addr
	f.parent = startParent(t, map[string]string{"eu": euIP, "us": usIP})
	parentIP, _, _ := strings.Cut(f.parent, ":")
	for tag, target := range map[string]string{"eu": "198.18.1.1", "us": "198.18.2.1"} {
		ns := "dnssec-" + tag
		f.k.EnsureNamespace(t, ns)
		f.k.Apply(t, testkit.DNSEndpoint(ns, "zone", nil, fleetObjects(tag, euIP, usIP, childIP, target)...))
	}
	chart := chartCorefile(t, helmTemplate(t, "--set", "mode=gslb", "--set", "gslb.dnssec.keySecret=fleetdns-dnssec-keys"))
	comp := signedCorefile(t)
	for _, e := range edit {
		comp, chart = e(comp), e(chart)
	}
	f.eu = startCluster(t, f.k, comp, "eu", euIP, "dnssec-eu", parentIP, f.keys.dir)
	f.us = startCluster(t, f.k, chart, "us", usIP, "dnssec-us", parentIP, f.keys.dir)
	f.euCorefile, f.usCorefile = comp, chart
	return f
}

// testValidates: every kind of answer of the signed GSLB zone
// validates through Unbound (the zone's DS its trust anchor, one resolver
// a cluster) and through delv asking each cluster: the failover answer
// before and after eu loses its app, NXDOMAIN and NODATA (NSEC black
// lies), a localtargets- name, the DNSKEY RRset, and a name below an
// insecure delegation (unsigned, never SERVFAIL). One DS validates both
// clusters, one of them running the chart's Corefile.
func testValidates(t *testing.T, f *fleet) {
	uEU := startUnbound(t, f.keys.ds, []string{f.eu.Addr}, nil, 0)
	uUS := startUnbound(t, f.keys.ds, []string{f.us.Addr}, nil, 0)
	appA := func(m *dns.Msg) string { return strings.Join(harness.Targets(m, dns.TypeA), " ") }

	// eu first (failover, primary eu), from both clusters.
	testkit.Eventually(t, 20*time.Second, "both clusters answer app with eu's target", func() (bool, string) {
		a, _ := harness.Ask(f.eu.Addr, "app.gslb.example.com.", dns.TypeA, harness.NoRD)
		b, _ := harness.Ask(f.us.Addr, "app.gslb.example.com.", dns.TypeA, harness.NoRD)
		return a != nil && b != nil && appA(a) == "198.18.1.1" && appA(b) == "198.18.1.1", fmt.Sprint(a, b)
	})
	for _, c := range []struct {
		u    *unbound
		addr string
		name string
	}{{uEU, f.eu.Addr, "eu"}, {uUS, f.us.Addr, "us"}} {
		if m := validated(t, c.u, c.name+": failover answer", "app.gslb.example.com.", dns.TypeA, dns.RcodeSuccess, true); m != nil && appA(m) != "198.18.1.1" {
			t.Errorf("%s: app A = %s, want eu's 198.18.1.1", c.name, appA(m))
		}
		validated(t, c.u, c.name+": NXDOMAIN (black lie: NODATA with an NSEC)", "nope.gslb.example.com.", dns.TypeA, dns.RcodeSuccess, true)
		validated(t, c.u, c.name+": NODATA", "static.gslb.example.com.", dns.TypeTXT, dns.RcodeSuccess, true)
		validated(t, c.u, c.name+": k8scrd answer", "static.gslb.example.com.", dns.TypeA, dns.RcodeSuccess, true)
		validated(t, c.u, c.name+": DNSKEY", zone, dns.TypeDNSKEY, dns.RcodeSuccess, true)
		if m := validated(t, c.u, c.name+": below an insecure delegation", "www.child.gslb.example.com.", dns.TypeA, dns.RcodeSuccess, false); m != nil && appA(m) != "198.18.4.4" {
			t.Errorf("%s: www.child A = %s, want the child's 198.18.4.4", c.name, appA(m))
		}
		validated(t, c.u, c.name+": localtargets- name", "localtargets-app.gslb.example.com.", dns.TypeA, dns.RcodeSuccess, true)

		for _, q := range []struct{ name, qtype, want string }{
			{"app.gslb.example.com", "A", "; fully validated"},
			{"localtargets-app.gslb.example.com", "A", "; fully validated"},
			{"nope.gslb.example.com", "A", "; negative response, fully validated"},
			{"static.gslb.example.com", "TXT", "; negative response, fully validated"},
		} {
			if got, out := delv(t, f.keys.ds, c.addr, q.name, q.qtype); got != q.want {
				t.Errorf("%s: delv %s %s: %q, want %q\n%s", c.name, q.name, q.qtype, got, q.want, out)
			}
		}
	}
}

// testFailover: eu's app is gone; us answers its own target, signed and
// validated, from a fresh validator and from delv.
func testFailover(t *testing.T, f *fleet) {
	appA := func(m *dns.Msg) string { return strings.Join(harness.Targets(m, dns.TypeA), " ") }
	// eu's app is gone: us answers its own target, signed, from either cluster.
	f.k.Apply(t, testkit.DNSEndpoint("dnssec-eu", "zone", nil, fleetObjects("eu", f.eu.ip, f.us.ip, "127.0.0.1", "198.18.1.1")[:3]...))
	testkit.Eventually(t, 30*time.Second, "us answers app with its own target", func() (bool, string) {
		b, _ := harness.Ask(f.us.Addr, "app.gslb.example.com.", dns.TypeA, harness.NoRD)
		return b != nil && appA(b) == "198.18.2.1", fmt.Sprint(b)
	})
	after := startUnbound(t, f.keys.ds, []string{f.us.Addr}, nil, 0)
	if m := validated(t, after, "us after failover", "app.gslb.example.com.", dns.TypeA, dns.RcodeSuccess, true); m != nil && appA(m) != "198.18.2.1" {
		t.Errorf("after failover: app A = %s, want us's 198.18.2.1", appA(m))
	}
	if got, out := delv(t, f.keys.ds, f.us.Addr, "app.gslb.example.com", "A"); got != "; fully validated" {
		t.Errorf("after failover: delv app A at us: %q\n%s", got, out)
	}
}

// testSiblingGlue: a referral to sib.gslb.example.com, whose
// name server ns.child.gslb.example.com lies under the delegation of
// child (sibling glue), asked with DO: the signed cluster gives the glue
// in the additional section, unsigned, as Knot serving the same zone
// gives it.
func testSiblingGlue(t *testing.T, f *fleet) {
	childIP, _, _ := strings.Cut(f.child, ":")
	var zf strings.Builder
	zf.WriteString("$TTL 300\n@ IN SOA gslb-ns-eu hostmaster.example.com. 1 60 60 600 30\n")
	for _, e := range fleetObjects("eu", f.eu.ip, f.us.ip, childIP, "198.18.1.1") {
		for _, tg := range e.Targets {
			v := tg
			if e.RecordType == "NS" {
				v = dns.Fqdn(tg)
			}
			fmt.Fprintf(&zf, "%s. IN %s %s\n", e.DNSName, e.RecordType, v)
		}
	}
	knot := harness.StartKnot(t, map[string]string{zone: zf.String()})
	glue := func(m *dns.Msg) string {
		var out []string
		for _, rr := range m.Extra {
			if rr.Header().Rrtype != dns.TypeOPT {
				out = append(out, fmt.Sprintf("%s %s %s", strings.ToLower(rr.Header().Name), dns.TypeToString[rr.Header().Rrtype], strings.TrimPrefix(rr.String(), rr.Header().String())))
			}
		}
		sort.Strings(out)
		return strings.Join(out, "; ")
	}
	for _, opts := range [][]harness.QueryOption{{harness.EDNS(1232), harness.DO}, {harness.TCP, harness.DO}} {
		k := harness.Exchange(t, knot.Addr, "x.sib.gslb.example.com.", dns.TypeA, append(opts, harness.NoRD)...)
		c := harness.Exchange(t, f.eu.Addr, "x.sib.gslb.example.com.", dns.TypeA, append(opts, harness.NoRD)...)
		if glue(k) == "" || glue(c) != glue(k) || c.Truncated {
			t.Errorf("x.sib.gslb.example.com A with DO: additional %q TC=%v, Knot gives %q\n%v", glue(c), c.Truncated, glue(k), c)
		}
	}
}

// TestSignedFleet runs the fleet once and asks it everything, the tests
// that change it (a failover, a key roll) last.
func TestSignedFleet(t *testing.T) {
	start := time.Now()
	f := startFleet(t, geoSource)
	t.Logf("fleet started in %v", time.Since(start).Round(time.Millisecond))
	for _, c := range []struct {
		name string
		fn   func(*testing.T, *fleet)
	}{
		{"every answer validates", testValidates},
		{"sibling glue with DO as Knot gives it", testSiblingGlue},
		{"DNSViz and Zonemaster find what they find in a Knot-signed copy", testJudges},
		{"signature cache over geo answers", testGeoCache},
		{"expired signature window", testExpired},
		{"answer after a failover validates", testFailover},
		{"ZSK roll", testZSKRoll},
	} {
		t0 := time.Now()
		t.Run(c.name, func(t *testing.T) { c.fn(t, f) })
		t.Logf("%s: %v", c.name, time.Since(t0).Round(time.Millisecond))
	}
}
