package k8scrd

import (
	"strings"
	"testing"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin/test"
	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/miekg/dns"
)

func k8gb() map[string]string { return map[string]string{"k8gb.io/dnstype": "local"} }

// answerOf is the A targets of name, or the rcode, or "referral".
func answerOf(t *testing.T, k *K8sCRD, name string) string {
	t.Helper()
	m, _ := ask(t, k, name, dns.TypeA)
	switch {
	case m.Rcode != dns.RcodeSuccess:
		return dns.RcodeToString[m.Rcode]
	case !m.Authoritative && len(m.Ns) > 0:
		return "referral"
	case len(m.Answer) == 0:
		return "NODATA"
	}
	var out []string
	for _, rr := range m.Answer {
		if a, ok := rr.(*dns.A); ok {
			out = append(out, a.A.String())
		}
	}
	return strings.Join(out, ",")
}

func expectAnswers(t *testing.T, k *K8sCRD, want map[string]string) {
	t.Helper()
	for name, w := range want {
		if got := answerOf(t, k, name); got != w {
			t.Errorf("%s A = %s, want %s", name, got, w)
		}
	}
}

// TestLiteralLocalTargetsOnlyFromTheHostsOwner: a localtargets- record is
// what peers take as this cluster's targets; another namespace's, or one
// not written by the k8gb operator, is refused in either tenancy.
func TestLiteralLocalTargetsOnlyFromTheHostsOwner(t *testing.T) {
	for _, mode := range []string{"shared", "strict"} {
		t.Run(mode, func(t *testing.T) {
			k, _ := newTestPlugin(t, "example.org", zoneBody+"\ntenancy "+mode, map[string]string{
				"app.yaml": testkit.DNSEndpoint("apps", "app", nil, testkit.EP("app.example.org", "A", 0, "192.0.2.1")),
				"evil.yaml": testkit.DNSEndpoint("evil", "hijack", nil,
					testkit.EP("localtargets-app.example.org", "A", 0, "198.51.100.66")),
				"evilk8gb.yaml": testkit.DNSEndpoint("evil", "hijack-k8gb", k8gb(),
					testkit.EP("localtargets-app.example.org", "A", 0, "198.51.100.67")),
				"unlabelled.yaml": testkit.DNSEndpoint("apps", "by-hand", nil,
					testkit.EP("localtargets-app.example.org", "A", 0, "198.51.100.68")),
				// The k8gb operator's own objects: served as written.
				"k8gb.yaml": testkit.DNSEndpoint("k8gb", "gslb", k8gb(),
					testkit.EP("k8gb.example.org", "A", 0, "192.0.2.5", "192.0.2.6"),
					testkit.EP("localtargets-k8gb.example.org", "A", 0, "192.0.2.5")),
			})
			expectAnswers(t, k, map[string]string{
				"localtargets-app.example.org.":  "NXDOMAIN", // localtargets (not in this block) would assemble it
				"localtargets-k8gb.example.org.": "192.0.2.5",
			})
		})
	}
}

// TestCoveringRecordsOfAnotherNamespaceRefused: under tenancy strict, a
// delegation or a wildcard of one namespace never covers names another
// namespace owns, however old; over its own names they are served.
func TestCoveringRecordsOfAnotherNamespaceRefused(t *testing.T) {
	k, _ := newTestPlugin(t, "example.org", zoneBody+"\ntenancy strict", map[string]string{
		"app.yaml": withCreated(testkit.DNSEndpoint("apps", "app", nil,
			testkit.EP("app.sub.example.org", "A", 0, "192.0.2.1"),
			testkit.EP("app.example.org", "A", 0, "192.0.2.2")), "2025-01-01T00:00:00Z"),
		"evil.yaml": withCreated(testkit.DNSEndpoint("evil", "cover", nil,
			testkit.EP("sub.example.org", "NS", 0, "ns.attacker.example.net"),
			testkit.EP("*.example.org", "A", 0, "198.51.100.66"),
			// Its own subtree: delegation and wildcard served.
			testkit.EP("mine.example.org", "A", 0, "192.0.2.9"),
			testkit.EP("*.mine.example.org", "A", 0, "192.0.2.10"),
			testkit.EP("d.mine.example.org", "NS", 0, "ns.elsewhere.example.net")), "2020-01-01T00:00:00Z"),
	})
	expectAnswers(t, k, map[string]string{
		"app.sub.example.org.":  "192.0.2.1",
		"x.sub.example.org.":    "NXDOMAIN",
		"apq.example.org.":      "NXDOMAIN", // a typo of app: no wildcard catches it
		"x.mine.example.org.":   "192.0.2.10",
		"x.d.mine.example.org.": "referral",
	})

	// Shared tenancy trusts every namespace: both are served.
	shared, _ := newTestPlugin(t, "example.org", zoneBody, map[string]string{
		"app.yaml":  testkit.DNSEndpoint("apps", "app", nil, testkit.EP("app.sub.example.org", "A", 0, "192.0.2.1")),
		"evil.yaml": testkit.DNSEndpoint("evil", "cover", nil, testkit.EP("sub.example.org", "NS", 0, "ns.attacker.example.net")),
	})
	expectAnswers(t, shared, map[string]string{"app.sub.example.org.": "referral"})
}

// TestReservedNamesRefused: gslb answers _gslb-explain, _gslb-peers and the
// fleet view at and below _fleet.<zone> itself; store records there are
// never served in its place.
func TestReservedNamesRefused(t *testing.T) {
	k, _ := newTestPlugin(t, "example.org", zoneBody, map[string]string{
		"a.yaml": testkit.DNSEndpoint("apps", "a", nil,
			testkit.EP("_gslb-explain.app.example.org", "TXT", 0, "peers: none"),
			testkit.EP("_gslb-peers.example.org", "TXT", 0, "eu up"),
			testkit.EP("_fleet.example.org", "TXT", 0, "view"),
			testkit.EP("h._fleet.example.org", "TXT", 0, "hosts"),
			testkit.EP("app.example.org", "A", 0, "192.0.2.1"),
			testkit.EP("fleet.example.org", "A", 0, "192.0.2.3")),
	})
	check(t, k, []test.Case{
		{Qname: "_gslb-explain.app.example.org.", Qtype: dns.TypeTXT, Rcode: dns.RcodeNameError, Authoritative: true, Ns: []dns.RR{negSOA}},
		{Qname: "_gslb-peers.example.org.", Qtype: dns.TypeTXT, Rcode: dns.RcodeNameError, Authoritative: true, Ns: []dns.RR{negSOA}},
		{Qname: "_fleet.example.org.", Qtype: dns.TypeTXT, Rcode: dns.RcodeNameError, Authoritative: true, Ns: []dns.RR{negSOA}},
		{Qname: "h._fleet.example.org.", Qtype: dns.TypeTXT, Rcode: dns.RcodeNameError, Authoritative: true, Ns: []dns.RR{negSOA}},
		{Qname: "app.example.org.", Qtype: dns.TypeA, Authoritative: true,
			Answer: []dns.RR{test.A("app.example.org. 30 IN A 192.0.2.1")}},
		{Qname: "fleet.example.org.", Qtype: dns.TypeA, Authoritative: true,
			Answer: []dns.RR{test.A("fleet.example.org. 30 IN A 192.0.2.3")}},
	})
}

// TestGrantsDecideWhoPublishes: with tenant lines, a name is published only
// by the namespace of the most specific grant covering it, whatever the
// objects' ages; a namespace without a grant publishes nothing.
func TestGrantsDecideWhoPublishes(t *testing.T) {
	k, _ := newTestPlugin(t, "example.org", zoneBody+"\ntenancy strict\ntenant platform example.org\ntenant shop shop.example.org", map[string]string{
		"platform.yaml": withCreated(testkit.DNSEndpoint("platform", "p", nil,
			testkit.EP("www.example.org", "A", 0, "192.0.2.1"),
			testkit.EP("cart.shop.example.org", "A", 0, "198.51.100.1"),
			testkit.EP("shop.example.org", "NS", 0, "ns.elsewhere.example.net")), "2020-01-01T00:00:00Z"),
		"shop.yaml": withCreated(testkit.DNSEndpoint("shop", "s", nil,
			testkit.EP("cart.shop.example.org", "A", 0, "192.0.2.2"),
			testkit.EP("www.example.org", "A", 0, "198.51.100.2")), "2025-01-01T00:00:00Z"),
		"other.yaml": testkit.DNSEndpoint("other", "o", nil, testkit.EP("free.example.org", "A", 0, "198.51.100.3")),
	})
	expectAnswers(t, k, map[string]string{
		"www.example.org.":       "192.0.2.1",
		"cart.shop.example.org.": "192.0.2.2", // platform's delegation above it is refused too
		"free.example.org.":      "NXDOMAIN",
	})
}

// TestOwnershipIsAFunctionOfTheObjects: the same objects give the same
// answers whatever order they arrived in (a replica started later decides
// as the others do).
func TestOwnershipIsAFunctionOfTheObjects(t *testing.T) {
	files := map[string]string{
		"a.yaml": withCreated(testkit.DNSEndpoint("team-a", "a", nil, testkit.EP("t.example.org", "A", 0, "192.0.2.1"),
			testkit.EP("t.sub.example.org", "A", 0, "192.0.2.3")), "2025-01-01T00:00:00Z"),
		"b.yaml": withCreated(testkit.DNSEndpoint("team-b", "b", nil, testkit.EP("t.example.org", "A", 0, "198.51.100.1"),
			testkit.EP("sub.example.org", "NS", 0, "ns.b.example.net")), "2025-01-01T00:00:00Z"),
	}
	first, dir := newTestPlugin(t, "example.org", zoneBody+"\ntenancy strict", map[string]string{"b.yaml": files["b.yaml"]})
	writeFile(t, dir, "a.yaml", files["a.yaml"])
	testkit.Eventually(t, 5*time.Second, "team-a's objects applied", hasA(first, t, "t.sub.example.org.", "192.0.2.3"))
	second, _ := newTestPlugin(t, "example.org", zoneBody+"\ntenancy strict", files)
	for _, name := range []string{"t.example.org.", "t.sub.example.org.", "x.sub.example.org."} {
		if a, b := answerOf(t, first, name), answerOf(t, second, name); a != b {
			t.Errorf("%s: %s from the replica that saw b first, %s from one that saw both at once", name, a, b)
		}
	}
	// Equal creationTimestamps: namespace order decides, team-a.
	expectAnswers(t, second, map[string]string{"t.example.org.": "192.0.2.1"})
}

func TestTenantGrantErrors(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{"tenant a example.org\ntenant b example.org", `namespace "a" is granted the same suffix`},
		{"tenant a other.net", "outside the zones"},
		{"tenant a", "Wrong argument count"},
	} {
		_, err := parse(caddy.NewTestController("dns", "k8scrd example.org {\n"+tc.body+"\n}"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one with %q", tc.body, err, tc.want)
		}
		if err != nil && !strings.Contains(err.Error(), "Testfile:") {
			t.Errorf("%q: error %v does not name the line", tc.body, err)
		}
	}
}
