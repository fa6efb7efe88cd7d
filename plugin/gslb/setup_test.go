package gslb

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/coredns/caddy"
)

func TestParse(t *testing.T) {
	g, err := parse(caddy.NewTestController("dns", `gslb gslb.example.com {
		geotag eu
		peer us 127.0.0.2 127.0.0.3:1053
		peer ap [::1]:5353
		peers_from_ns 127.0.0.10 127.0.0.11:1053 {
			pattern ns-{geotag}.{zone}
			refresh 1s
			port 1053
		}
		strategy failover
		primary eu us ap
		weight eu 80 us 20 ap 0
		geo cidr 10.1.0.0/16 eu
		geo cidr 10.1.2.0/24 us
		geo map EU eu
		geo metadata geoip/continent/code
		ttl 15
		timeout 250ms
		refresh 5s
		split_brain_threshold 20s
		explain 127.0.0.0/8 10.0.0.1
		prefix lt-
	}`))
	if err != nil {
		t.Fatal(err)
	}
	if g.zone != "gslb.example.com." || g.geotag != "eu" {
		t.Errorf("zone %q geotag %q", g.zone, g.geotag)
	}
	if got := strings.Join(g.static["us"], " "); got != "127.0.0.2:53 127.0.0.3:1053" {
		t.Errorf("peer us: %s", got)
	}
	if got := strings.Join(g.static["ap"], " "); got != "[::1]:5353" {
		t.Errorf("peer ap: %s", got)
	}
	if d := g.disc; d == nil || d.refresh != time.Second || d.port != "1053" || strings.Join(d.servers, " ") != "127.0.0.10:53 127.0.0.11:1053" {
		t.Errorf("peers_from_ns: %+v", d)
	}
	if tag, ok := g.ns.tag("ns-us.gslb.example.com."); !ok || tag != "us" {
		t.Errorf("pattern: tag %q ok %v", tag, ok)
	}
	if g.defaults.strategy != failover || strings.Join(g.defaults.primary, ",") != "eu,us,ap" {
		t.Errorf("strategy %s primary %v", g.defaults.strategy, g.defaults.primary)
	}
	if g.defaults.weights["eu"] != 80 || g.defaults.weights["ap"] != 0 || len(g.defaults.weights) != 3 {
		t.Errorf("weights %v", g.defaults.weights)
	}
	if len(g.geo.cidrs) != 2 || g.geo.cidrs[0].tag != "us" {
		t.Errorf("cidrs not most specific first: %v", g.geo.cidrs)
	}
	if g.geo.values["EU"] != "eu" || g.geo.metaKey != "geoip/continent/code" {
		t.Errorf("geo map/metadata: %+v", g.geo)
	}
	if g.defaults.ttl != 15 || g.timeout != 250*time.Millisecond || g.refresh != 5*time.Second || g.splitBrain != 20*time.Second {
		t.Errorf("ttl %d timeout %s refresh %s split brain %s", g.defaults.ttl, g.timeout, g.refresh, g.splitBrain)
	}
	if len(g.explain) != 2 || g.explain[1].String() != "10.0.0.1/32" || g.prefix != "lt-" {
		t.Errorf("explain %v prefix %q", g.explain, g.prefix)
	}
}

func TestParseDefaults(t *testing.T) {
	g, err := parse(caddy.NewTestController("dns", "gslb gslb.example.com {\n geotag eu\n}"))
	if err != nil {
		t.Fatal(err)
	}
	if g.defaults.strategy != roundRobin || g.defaults.ttl != 30 || g.timeout != time.Second ||
		g.refresh != 30*time.Second || g.splitBrain != time.Minute || g.prefix != "localtargets-" || g.disc != nil {
		t.Errorf("defaults: %+v", g)
	}
	if tag, ok := g.ns.tag("gslb-ns-us.gslb.example.com."); !ok || tag != "us" {
		t.Errorf("default pattern: %q %v", tag, ok)
	}
	// k8gb: gslb-ns-<geotag>-<zone with dashes>.<parent>
	if tag, ok := g.ns.tag("gslb-ns-us-west-gslb-example-com.example.com."); !ok || tag != "us-west" {
		t.Errorf("k8gb pattern: %q %v", tag, ok)
	}
	if tag, ok := g.ns.tag("gslb-ns-ap-gslb.example.com."); !ok || tag != "ap" {
		t.Errorf("k8gb short pattern: %q %v", tag, ok)
	}
	if _, ok := g.ns.tag("app.gslb.example.com."); ok {
		t.Error("app matched the name server pattern")
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ input, want string }{
		{"gslb gslb.example.com {\n}", "geotag is required"},
		{"gslb a.example b.example {\n geotag eu\n}", "exactly one zone"},
		{"gslb gslb.example.com {\n geotag eu\n bogus 1\n}", `unknown property "bogus"`},
		{"gslb gslb.example.com {\n geotag eu\n strategy nearest\n}", `unknown strategy "nearest"`},
		{"gslb gslb.example.com {\n geotag eu\n strategy geoip\n}", "needs a geo source"},
		{"gslb gslb.example.com {\n geotag eu\n peer us\n}", "Wrong argument count"},
		{"gslb gslb.example.com {\n geotag eu\n peer us not-an-ip\n}", "not an IP address"},
		{"gslb gslb.example.com {\n geotag eu\n peer us 127.0.0.2\n peer us 127.0.0.3\n}", "given twice"},
		{"gslb gslb.example.com {\n geotag eu\n weight eu\n}", "TAG N pairs"},
		{"gslb gslb.example.com {\n geotag eu\n weight eu -1\n}", "bad weight"},
		{"gslb gslb.example.com {\n geotag eu\n geo cidr 10.0.0.0/33 eu\n}", "geo cidr"},
		{"gslb gslb.example.com {\n geotag eu\n geo mmdb /nonexistent.mmdb continent.code\n}", "geo mmdb"},
		{"gslb gslb.example.com {\n geotag eu\n geo ip 1 2\n}", `unknown geo source "ip"`},
		{"gslb gslb.example.com {\n geotag eu\n ttl -5\n}", "bad ttl"},
		{"gslb gslb.example.com {\n geotag eu\n timeout soon\n}", "bad timeout"},
		{"gslb gslb.example.com {\n geotag eu\n refresh 1ms\n}", "below"},
		{"gslb gslb.example.com {\n geotag eu\n explain everyone\n}", "explain"},
		{"gslb gslb.example.com {\n geotag eu\n peers_from_ns 127.0.0.1 {\n refresh 10ms\n }\n}", "below"},
		{"gslb gslb.example.com {\n geotag eu\n peers_from_ns 127.0.0.1 {\n pattern ns.{zone}\n }\n}", "{geotag} once"},
		{"gslb gslb.example.com {\n geotag eu\n peers_from_ns 127.0.0.1 {\n port 70000\n }\n}", "bad port"},
		{"gslb gslb.example.com {\n geotag eu\n peers_from_ns 127.0.0.1 {\n tls\n }\n}", `unknown property "tls" in peers_from_ns`},
		{"gslb gslb.example.com {\n geotag eu\n peers_from_ns\n}", "Wrong argument count"},
		{"gslb gslb.example.com {\n geotag eu\n prefix lt.x-\n}", "without dots"},
		{"gslb example.com { geotag }", "Testfile:1 - Error during parsing: Wrong argument count or unexpected line ending after 'geotag'"},
		{"gslb example.com { geotag eu us }", "Testfile:1 - Error during parsing: Wrong argument count or unexpected line ending after 'us'"},
		{"gslb example.com { bogus 1 }", `Testfile:1 - Error during parsing: unknown property "bogus"`},
		{"gslb example.com {\n geotag eu\n peer us not-an-ip }", `Testfile:3 - Error during parsing: peer us: "not-an-ip" is not an IP address`},
		{"gslb example.com {\n geotag eu\n peers_from_ns 127.0.0.1 { refresh 10ms }\n}", "Testfile:3 - Error during parsing: refresh 10ms is below 1s"},
		{"gslb example.com {\n geotag eu\n peers_from_ns 127.0.0.1 { tls } }", `Testfile:3 - Error during parsing: unknown property "tls" in peers_from_ns`},
		{"gslb example.com {\n geotag eu\n timeout soon }", `Testfile:3 - Error during parsing: bad timeout "soon"`},
	} {
		_, err := parse(caddy.NewTestController("dns", c.input))
		if err == nil {
			t.Errorf("%q: no error, want %q", c.input, c.want)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %q, want it to say %q", c.input, err, c.want)
		}
	}
}

func TestHostPolicyFromProperties(t *testing.T) {
	def := &policy{strategy: roundRobin, ttl: 30}
	pol, errs := hostPolicy(def, map[string]string{
		propStrategy: "Failover", propPrimary: "us, eu", propWeight: "eu=80,us=20,ap=0", propTTL: "7",
	}, nil)
	if len(errs) != 0 || pol.strategy != failover || strings.Join(pol.primary, ",") != "us,eu" ||
		pol.weights["eu"] != 80 || pol.weights["ap"] != 0 || !pol.ttlSet || pol.ttl != 7 {
		t.Errorf("policy %+v errs %v", pol, errs)
	}
	if pol, _ := hostPolicy(def, nil, nil); pol != def {
		t.Error("no properties should share the defaults")
	}
	pol, errs = hostPolicy(def, map[string]string{propStrategy: "nearest", propWeight: "eu:1", propTTL: "x"}, nil)
	if len(errs) != 3 || pol.strategy != roundRobin || pol.ttlSet {
		t.Errorf("invalid properties: policy %+v errs %v", pol, errs)
	}
}

// settings is what parse reads from the Corefile, for comparing two parses.
func settings(g *GSLB) map[string]any {
	s := map[string]any{
		"zone": g.zone, "geotag": g.geotag, "prefix": g.prefix, "prefixSet": g.prefixSet,
		"defaults": g.defaults, "timeout": g.timeout, "refresh": g.refresh, "floor": g.floor, "tick": g.tick,
		"splitBrain": g.splitBrain, "explain": g.explain, "static": g.static, "ns": fmt.Sprint(g.ns.prefixes, g.ns.res),
	}
	if g.geo != nil {
		s["geo"] = fmt.Sprintf("%+v", *g.geo)
	}
	if g.disc != nil {
		s["disc"] = fmt.Sprint(g.disc.servers, g.disc.refresh, g.disc.port)
	}
	return s
}

func TestParseOneLineBlockIsTheMultiLineBlock(t *testing.T) {
	for _, tc := range []struct{ multi, oneLine string }{
		{"gslb example.com {\n geotag eu\n}", "gslb example.com { geotag eu }"},
		{"gslb example.com {\n peer us 127.0.0.2 [::1]:5353\n geotag eu\n}", "gslb example.com {\n geotag eu\n peer us 127.0.0.2 [::1]:5353 }"},
		{"gslb example.com {\n geotag eu\n peers_from_ns 127.0.0.10\n}", "gslb example.com {\n geotag eu\n peers_from_ns 127.0.0.10 }"},
		{
			"gslb example.com {\n geotag eu\n peers_from_ns 127.0.0.10 {\n pattern ns-{geotag}.{zone}\n }\n}",
			"gslb example.com {\n geotag eu\n peers_from_ns 127.0.0.10 { pattern ns-{geotag}.{zone} }\n}",
		},
		{
			"gslb example.com {\n geotag eu\n peers_from_ns 127.0.0.10 {\n refresh 1m\n }\n}",
			"gslb example.com {\n geotag eu\n peers_from_ns 127.0.0.10 { refresh 1m } }",
		},
		{
			"gslb example.com {\n geotag eu\n peers_from_ns 127.0.0.10 {\n port 1053\n }\n ttl 5\n}",
			"gslb example.com {\n geotag eu\n peers_from_ns 127.0.0.10 { port 1053 }\n ttl 5 }",
		},
		{"gslb example.com {\n geotag eu\n strategy failover\n primary eu us\n}", "gslb example.com {\n geotag eu\n strategy failover\n primary eu us }"},
		{"gslb example.com {\n geotag eu\n weight eu 80 us 20\n}", "gslb example.com {\n geotag eu\n weight eu 80 us 20 }"},
		{"gslb example.com {\n geotag eu\n geo cidr 10.1.0.0/16 eu\n}", "gslb example.com {\n geotag eu\n geo cidr 10.1.0.0/16 eu }"},
		{"gslb example.com {\n geotag eu\n geo map EU eu\n}", "gslb example.com {\n geotag eu\n geo map EU eu }"},
		{"gslb example.com {\n geotag eu\n geo metadata geoip/continent/code\n}", "gslb example.com {\n geotag eu\n geo metadata geoip/continent/code }"},
		{"gslb example.com {\n geotag eu\n ttl 15\n}", "gslb example.com {\n geotag eu\n ttl 15 }"},
		{"gslb example.com {\n geotag eu\n timeout 250ms\n}", "gslb example.com {\n geotag eu\n timeout 250ms }"},
		{"gslb example.com {\n geotag eu\n refresh 5s\n}", "gslb example.com {\n geotag eu\n refresh 5s }"},
		{"gslb example.com {\n geotag eu\n split_brain_threshold 20s\n}", "gslb example.com {\n geotag eu\n split_brain_threshold 20s }"},
		{"gslb example.com {\n geotag eu\n explain 127.0.0.0/8 10.0.0.1\n}", "gslb example.com {\n geotag eu\n explain 127.0.0.0/8 10.0.0.1 }"},
		{"gslb example.com {\n geotag eu\n prefix lt-\n}", "gslb example.com {\n geotag eu\n prefix lt- }"},
	} {
		multi, err := parse(caddy.NewTestController("dns", tc.multi))
		if err != nil {
			t.Fatalf("%q: %v", tc.multi, err)
		}
		one, err := parse(caddy.NewTestController("dns", tc.oneLine))
		if err != nil {
			t.Errorf("%q: %v", tc.oneLine, err)
			continue
		}
		if got, want := settings(one), settings(multi); !reflect.DeepEqual(got, want) {
			t.Errorf("%q parsed to %v, want %v as on several lines", tc.oneLine, got, want)
		}
	}
}

func TestParsePeerAddresses(t *testing.T) {
	for _, tc := range []struct{ arg, want string }{
		{"127.0.0.2", "127.0.0.2:53"},
		{"127.0.0.2:1053", "127.0.0.2:1053"},
		{"::1", "[::1]:53"},
		{"[::1]", "[::1]:53"},
		{"[::1]:5353", "[::1]:5353"},
		{"fe80::1%eth0", "[fe80::1%eth0]:53"},
		{"not-an-ip", ""},
		{"example.com:53", ""},
		{"127.0.0.2:99999", ""},
		{"127.0.0.2:dns", ""},
		{"[127.0.0.2", ""},
	} {
		g, err := parse(caddy.NewTestController("dns", "gslb example.com {\n geotag eu\n peer us "+tc.arg+"\n}"))
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("peer %s: accepted as %v", tc.arg, g.static["us"])
		case tc.want == "" && !strings.Contains(err.Error(), "is not an IP address with an optional port"):
			t.Errorf("peer %s: error %v", tc.arg, err)
		case tc.want != "" && err != nil:
			t.Errorf("peer %s: %v", tc.arg, err)
		case tc.want != "" && strings.Join(g.static["us"], " ") != tc.want:
			t.Errorf("peer %s: %v, want %s", tc.arg, g.static["us"], tc.want)
		}
	}
}
