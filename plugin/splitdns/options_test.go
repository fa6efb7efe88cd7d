package splitdns

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coredns/caddy"
	"github.com/miekg/dns"
)

// routeOf parses a splitdns block and builds its table.
func routeOf(t *testing.T, input string) (*SplitDNS, *table) {
	t.Helper()
	c := caddy.NewTestController("dns", input)
	s, kd, err := parseSplitDNS(c)
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, input)
	}
	tb, errs := s.build(kd)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return s, tb
}

func TestRouteOptionsParseAndInherit(t *testing.T) {
	s, tb := routeOf(t, `splitdns {
		route a.internal 10.0.0.1 10.0.0.2 {
			policy sequential
			failover SERVFAIL refused
			next NXDOMAIN
			tls_servername a.example
			health_check 2s no_rec domain probe.example
			max_fails 5
			expire 30s
			force_tcp
			except x.a.internal y.a.internal
			failfast_all_unhealthy_upstreams
			max_concurrent 7
		}
		route b.internal 10.0.0.3
		default 10.0.0.53
		policy round_robin
		failover SERVFAIL
		prefer_udp
		max_fails 0
		max_concurrent 1000
	}`)
	a, b, def := tb.zones["a.internal."], tb.zones["b.internal."], tb.def
	if s.maxConcurrent != 1000 {
		t.Errorf("block max_concurrent = %d, want 1000", s.maxConcurrent)
	}
	// a.internal: its own words, and the block's prefer_udp.
	if a.policy.String() != "sequential" || !eqInts(a.failover, dns.RcodeServerFailure, dns.RcodeRefused) ||
		!eqInts(a.next, dns.RcodeNameError) || !a.forceTCP || !a.preferUDP || !a.failfast ||
		a.maxConcurrent != 7 || strings.Join(a.except, " ") != "x.a.internal. y.a.internal." {
		t.Errorf("route a.internal: %+v", a)
	}
	u := a.upstreams[0]
	if u.maxFails != 5 || u.interval != 2*time.Second {
		t.Errorf("route a.internal upstream: max_fails %d, health_check %s", u.maxFails, u.interval)
	}
	// b.internal and the default: the block's, but never its limit.
	for _, r := range []*route{b, def} {
		if r.policy.String() != "round_robin" || !eqInts(r.failover, dns.RcodeServerFailure) || r.next != nil ||
			r.forceTCP || !r.preferUDP || r.failfast || r.maxConcurrent != 0 || r.except != nil {
			t.Errorf("route %s: %+v", r.zone, r)
		}
		if u := r.upstreams[0]; u.maxFails != 0 || u.interval != defaultHealthCheck {
			t.Errorf("route %s upstream: max_fails %d, health_check %s", r.zone, u.maxFails, u.interval)
		}
	}
}

func TestRouteBlockOnOneLineReadsAsMultiLine(t *testing.T) {
	_, tb := routeOf(t, `splitdns {
		route a.internal 10.0.0.1 { force_tcp }
		route b.internal 10.0.0.2 { except x.b.internal y.b.internal }
		route c.internal 10.0.0.3
		default 10.0.0.53
	}`)
	if a := tb.zones["a.internal."]; !a.forceTCP {
		t.Errorf("route a.internal { force_tcp }: %+v", a)
	}
	if b := tb.zones["b.internal."]; strings.Join(b.except, " ") != "x.b.internal. y.b.internal." {
		t.Errorf("route b.internal { except ... }: except %v", b.except)
	}
	if c := tb.zones["c.internal."]; c == nil || c.forceTCP {
		t.Errorf("the route after the one-line blocks: %+v", c)
	}
	if tb.def == nil {
		t.Errorf("default after the route blocks is missing")
	}
}

func TestRoutesWithOtherProxySettingsDoNotShareAnUpstream(t *testing.T) {
	_, tb := routeOf(t, `splitdns {
		route a.internal 10.0.0.1
		route b.internal 10.0.0.1
		route c.internal 10.0.0.1 {
			expire 1m
		}
		route d.internal 10.0.0.1 {
			policy sequential
		}
	}`)
	up := func(z string) *upstream { return tb.zones[z].upstreams[0] }
	if up("a.internal.") != up("b.internal.") || up("a.internal.") != up("d.internal.") {
		t.Errorf("routes with the same proxy settings do not share the upstream")
	}
	if up("a.internal.") == up("c.internal.") {
		t.Errorf("a route with its own expire shares the other routes' upstream")
	}
}

func TestStubDomainsTakeTheBlockOptions(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "stubDomains"), []byte(`{"corp.internal": ["10.0.0.9"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, tb := routeOf(t, `splitdns {
		kubedns `+dir+`
		failover REFUSED
		policy sequential
	}`)
	r := tb.zones["corp.internal."]
	if r == nil || r.policy.String() != "sequential" || !eqInts(r.failover, dns.RcodeRefused) {
		t.Fatalf("stubDomains route: %+v", r)
	}
}

func TestExceptAndNextFindTheNextLongestRoute(t *testing.T) {
	_, tb := routeOf(t, `splitdns {
		route acme.internal 10.0.0.1
		route svc.acme.internal 10.0.0.2 {
			except legacy.svc.acme.internal
		}
		default 10.0.0.53
	}`)
	for name, want := range map[string]string{
		"svc.acme.internal.":          "svc.acme.internal.", // the zone itself is never excepted, as in forward
		"db.svc.acme.internal.":       "svc.acme.internal.",
		"legacy.svc.acme.internal.":   "acme.internal.",
		"x.legacy.svc.acme.internal.": "acme.internal.",
		"legacyx.svc.acme.internal.":  "svc.acme.internal.",
		"www.example.org.":            ".",
	} {
		if got := tb.route(name).zone; got != want {
			t.Errorf("route(%s) = %s, want %s", name, got, want)
		}
	}
	if p := tb.parent(tb.zones["svc.acme.internal."]); p.zone != "acme.internal." {
		t.Errorf("parent of svc.acme.internal = %s", p.zone)
	}
	if p := tb.parent(tb.zones["acme.internal."]); p != tb.def {
		t.Errorf("parent of acme.internal = %v, want the default route", p)
	}
	if p := tb.parent(tb.def); p != nil {
		t.Errorf("parent of the default route = %v, want none", p)
	}
}

func TestRouteOptionErrorsNameTheLine(t *testing.T) {
	tests := []struct{ block, want string }{
		{"route a.internal 10.0.0.1 {\n policy fastest\n }", "Testfile:3 - Error during parsing: policy: unknown policy 'fastest'"},
		{"route a.internal 10.0.0.1 {\n failover NOERROR\n }", "Testfile:3 - Error during parsing: failover: NOERROR cannot be used"},
		{"route a.internal 10.0.0.1 {\n failover SERVFAIL BOGUS\n }", "Testfile:3 - Error during parsing: failover: BOGUS is not a valid rcode"},
		{"route a.internal 10.0.0.1 {\n failover\n }", "Testfile:3 - Error during parsing: Wrong argument count"},
		{"route a.internal 10.0.0.1 {\n next BOGUS\n }", "Testfile:3 - Error during parsing: next: BOGUS is not a valid rcode"},
		{"route a.internal 10.0.0.1 {\n tls_servername\n }", "Testfile:3 - Error during parsing: Wrong argument count"},
		{"route a.internal 10.0.0.1 {\n health_check 0s\n }", "Testfile:3 - Error during parsing: health_check: \"0s\" is not a positive duration"},
		{"route a.internal 10.0.0.1 {\n health_check 1s sometimes\n }", "Testfile:3 - Error during parsing: health_check: unknown option sometimes"},
		{"route a.internal 10.0.0.1 {\n health_check 1s domain\n }", "Testfile:3 - Error during parsing: Wrong argument count"},
		{"route a.internal 10.0.0.1 {\n max_fails -1\n }", "Testfile:3 - Error during parsing: max_fails: \"-1\" is not a number"},
		{"route a.internal 10.0.0.1 {\n expire soon\n }", "Testfile:3 - Error during parsing: expire: \"soon\" is not a duration"},
		{"route a.internal 10.0.0.1 {\n force_tcp yes\n }", "Testfile:3 - Error during parsing: Wrong argument count"},
		{"route a.internal 10.0.0.1 {\n prefer_udp yes\n }", "Testfile:3 - Error during parsing: Wrong argument count"},
		{"route a.internal 10.0.0.1 {\n failfast_all_unhealthy_upstreams 1\n }", "Testfile:3 - Error during parsing: Wrong argument count"},
		{"route a.internal 10.0.0.1 {\n max_concurrent -5\n }", "Testfile:3 - Error during parsing: max_concurrent: \"-5\" is not a number of queries"},
		{"route a.internal 10.0.0.1 {\n except b.internal\n }", "Testfile:3 - Error during parsing: except: b.internal. is not inside the route's zone a.internal."},
		{"route a.internal 10.0.0.1 {\n except\n }", "Testfile:3 - Error during parsing: Wrong argument count"},
		{"route a.internal 10.0.0.1 {\n policy random\n policy sequential\n }", "Testfile:4 - Error during parsing: policy: given twice"},
		{"route a.internal 10.0.0.1 {\n timeout 1s\n }", "Testfile:3 - Error during parsing: route: unknown property 'timeout'"},
		{"except a.internal", "Testfile:2 - Error during parsing: except: only inside a route's block"},
		{"max_concurrent 10 20", "Testfile:2 - Error during parsing: Wrong argument count"},
	}
	for _, tc := range tests {
		input := "splitdns {\n " + tc.block + "\n}"
		_, _, err := parseSplitDNS(caddy.NewTestController("dns", input))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.block, err, tc.want)
		}
	}
}

func eqInts(got []int, want ...int) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}
