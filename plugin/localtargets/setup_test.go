package localtargets

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/coredns/caddy"
)

func TestParse(t *testing.T) {
	tests := []struct {
		input   string
		errPart string // "" for a valid Corefile
		check   func(t *testing.T, lt *LocalTargets, hc *healthCheck)
	}{
		{`localtargets`, "", func(t *testing.T, lt *LocalTargets, hc *healthCheck) {
			if lt.prefix != "localtargets-" || hc != nil || lt.ttl != 0 {
				t.Errorf("defaults: prefix %q ttl %d healthcheck %v", lt.prefix, lt.ttl, hc)
			}
			if len(lt.Zones) != 1 || lt.Zones[0] != "example.org." {
				t.Errorf("zones %v, want the server block's", lt.Zones)
			}
		}},
		{`localtargets gslb.example.org {
			prefix LT-
			ttl 10
		}`, "", func(t *testing.T, lt *LocalTargets, _ *healthCheck) {
			if lt.prefix != "lt-" || lt.ttl != 10 || lt.Zones[0] != "gslb.example.org." {
				t.Errorf("prefix %q ttl %d zones %v", lt.prefix, lt.ttl, lt.Zones)
			}
		}},
		{`localtargets {
			healthcheck tcp 443
		}`, "", func(t *testing.T, _ *LocalTargets, hc *healthCheck) {
			want := newHealthCheck()
			want.def.proto, want.def.port = "tcp", 443
			if hc == nil || !reflect.DeepEqual(*hc, want) {
				t.Errorf("healthcheck %+v, want %+v", hc, want)
			}
		}},
		{`localtargets {
			healthcheck https 443 /healthz app.example.org {
				interval 2s
				timeout 500ms
				fails 4
				passes 1
			}
		}`, "", func(t *testing.T, _ *LocalTargets, hc *healthCheck) {
			want := newHealthCheck()
			want.def = probeSpec{proto: "https", port: 443, path: "/healthz", host: "app.example.org", expectLo: 200, expectHi: 399}
			want.interval, want.timeout, want.fails, want.passes = 2*time.Second, 500*time.Millisecond, 4, 1
			if hc == nil || !reflect.DeepEqual(*hc, want) {
				t.Errorf("healthcheck %+v, want %+v", hc, want)
			}
		}},
		{`localtargets {
			healthcheck http 80 /healthz {
				expect 200-299 ready now
				workers 4
				max_per_host 2
				max_per_zone 100
				allow 127.0.0.0/8 ::1/128
			}
		}`, "", func(t *testing.T, _ *LocalTargets, hc *healthCheck) {
			want := newHealthCheck()
			want.def = probeSpec{proto: "http", port: 80, path: "/healthz", expectLo: 200, expectHi: 299, body: "ready now"}
			want.workers, want.maxPerHost, want.maxPerZone = 4, 2, 100
			want.allow = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
			if hc == nil || !reflect.DeepEqual(*hc, want) {
				t.Errorf("healthcheck %+v, want %+v", hc, want)
			}
		}},
		{`localtargets {
			healthcheck tcp 80 {
				deny 10.96.0.0/12 fd00:96::/108
				tenant_address off
				tenant_body off
			}
		}`, "", func(t *testing.T, _ *LocalTargets, hc *healthCheck) {
			want := newHealthCheck()
			want.def.proto, want.def.port = "tcp", 80
			want.deny = []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("fd00:96::/108")}
			want.tenantAddress, want.tenantBody = false, false
			if hc == nil || !reflect.DeepEqual(*hc, want) {
				t.Errorf("healthcheck %+v, want %+v", hc, want)
			}
		}},
		{`localtargets {
			healthcheck none
		}`, "", func(t *testing.T, _ *LocalTargets, hc *healthCheck) {
			if hc == nil || !hc.none {
				t.Errorf("healthcheck none: %+v", hc)
			}
		}},
		{`localtargets {
			healthcheck http 80 /
		}`, "", nil},
		{"localtargets\nlocaltargets", "only be used once", nil},
		{"localtargets {\nprefix a.b-\n}", "without dots", nil},
		{"localtargets {\nprefix\n}", "Wrong argument count", nil},
		{"localtargets {\nttl -1\n}", "not a number", nil},
		{"localtargets {\nbogus\n}", `unknown property "bogus"`, nil},
		{"localtargets {\nhealthcheck udp 53\n}", "want tcp, http or https", nil},
		{"localtargets {\nhealthcheck tcp 0\n}", "not a port number", nil},
		{"localtargets {\nhealthcheck tcp 80 /x\n}", "only a port", nil},
		{"localtargets {\nhealthcheck http 80\n}", "needs PORT PATH", nil},
		{"localtargets {\nhealthcheck http 80 healthz\n}", "must start with /", nil},
		{"localtargets {\nhealthcheck tcp 80 {\ninterval soon\n}\n}", "not a positive duration", nil},
		{"localtargets {\nhealthcheck tcp 80 {\nfails 0\n}\n}", "not a positive number", nil},
		{"localtargets {\nhealthcheck tcp 80 {\ninterval 1s\ntimeout 2s\n}\n}", "longer than its interval", nil},
		{"localtargets {\nhealthcheck tcp 80 {\nallow 127.0.0.1/40\n}\n}", "not a CIDR or an address", nil},
		{"localtargets {\nhealthcheck tcp 80 {\ntenant_body no\n}\n}", "want on or off", nil},
		{"localtargets {\nhealthcheck tcp 80 {\ntenant_address\n}\n}", "want on or off", nil},
		{"localtargets {\nhealthcheck tcp 80 {\ndeny 10.0.0.0/33\n}\n}", "not a CIDR or an address", nil},
		{"localtargets {\nhealthcheck tcp 80 {\nexpect 2xx\n}\n}", "a range such as 200-399", nil},
		{"localtargets {\nhealthcheck tcp 80 {\nworkers 0\n}\n}", "not a positive number", nil},
		{"localtargets {\nhealthcheck tcp 80 {\nretries 2\n}\n}", `unknown healthcheck property "retries"`, nil},
		{"localtargets {\nhealthcheck tcp 80 {\ninterval 1s\n", "not closed", nil},
		{`localtargets {
			healthcheck tcp 80 {
			}
			prefix lt-
		}`, "", func(t *testing.T, lt *LocalTargets, hc *healthCheck) {
			if hc == nil || lt.prefix != "lt-" {
				t.Errorf("empty healthcheck block then prefix: hc %v prefix %q", hc, lt.prefix)
			}
		}},
		{`localtargets {
			healthcheck tcp 80
			healthcheck tcp 81
		}`, "given twice", nil},
		{"localtargets { prefix }", "Testfile:1 - Error during parsing: Wrong argument count or unexpected line ending after 'prefix'", nil},
		{"localtargets { prefix a b }", "Testfile:1 - Error during parsing: Wrong argument count or unexpected line ending after 'b'", nil},
		{"localtargets { healthcheck tcp }", "Testfile:1 - Error during parsing: Wrong argument count or unexpected line ending after 'tcp'", nil},
		{"localtargets { healthcheck tcp 80 { interval soon } }", `Testfile:1 - Error during parsing: bad interval "soon": not a positive duration`, nil},
		{"localtargets {\n healthcheck tcp 80 { retries 2 }\n}", `Testfile:2 - Error during parsing: unknown healthcheck property "retries"`, nil},
		{"localtargets {\n ttl 10\n bogus }", `Testfile:3 - Error during parsing: unknown property "bogus"`, nil},
	}
	for i, tt := range tests {
		c := caddy.NewTestController("dns", tt.input)
		c.ServerBlockKeys = []string{"example.org."}
		lt, hc, err := parse(c)
		if tt.errPart != "" {
			if err == nil || !strings.Contains(err.Error(), tt.errPart) {
				t.Errorf("test %d: error %v, want one containing %q", i, err, tt.errPart)
			}
			continue
		}
		if err != nil {
			t.Errorf("test %d: %v", i, err)
			continue
		}
		if tt.check != nil {
			tt.check(t, lt, hc)
		}
	}
}

func TestParseOneLineBlockIsTheMultiLineBlock(t *testing.T) {
	type parsed struct {
		lt *LocalTargets
		hc *healthCheck
	}
	parseAt := func(input string) (parsed, error) {
		c := caddy.NewTestController("dns", input)
		c.ServerBlockKeys = []string{"example.org."}
		lt, hc, err := parse(c)
		return parsed{lt, hc}, err
	}
	for _, tc := range []struct{ multi, oneLine string }{
		{"localtargets {\n prefix lt-\n}", "localtargets { prefix lt- }"},
		{"localtargets gslb.example.org {\n ttl 10\n}", "localtargets gslb.example.org { ttl 10 }"},
		{"localtargets {\n healthcheck tcp 443\n}", "localtargets { healthcheck tcp 443 }"},
		{"localtargets {\n healthcheck http 80 /healthz app.example.org\n}", "localtargets { healthcheck http 80 /healthz app.example.org }"},
		{"localtargets {\n healthcheck tcp 80 {\n interval 5s\n }\n}", "localtargets {\n healthcheck tcp 80 { interval 5s }\n}"},
		{"localtargets {\n healthcheck tcp 80 {\n interval 5s\n }\n}", "localtargets { healthcheck tcp 80 { interval 5s } }"},
		{"localtargets {\n healthcheck tcp 80 {\n fails 4\n }\n prefix lt-\n}", "localtargets {\n healthcheck tcp 80 { fails 4 }\n prefix lt- }"},
		{"localtargets {\n healthcheck tcp 80 {\n }\n}", "localtargets { healthcheck tcp 80 { } }"},
		{"localtargets {\n healthcheck tcp 80 {\n interval 2s\n timeout 500ms\n passes 3 }\n}", "localtargets {\n healthcheck tcp 80 {\n interval 2s\n timeout 500ms\n passes 3\n }\n}"},
	} {
		multi, err := parseAt(tc.multi)
		if err != nil {
			t.Fatalf("%q: %v", tc.multi, err)
		}
		one, err := parseAt(tc.oneLine)
		if err != nil {
			t.Errorf("%q: %v", tc.oneLine, err)
			continue
		}
		if one.lt.prefix != multi.lt.prefix || one.lt.ttl != multi.lt.ttl || !reflect.DeepEqual(one.lt.Zones, multi.lt.Zones) ||
			!reflect.DeepEqual(one.hc, multi.hc) {
			t.Errorf("%q parsed to prefix %q ttl %d zones %v healthcheck %+v, want prefix %q ttl %d zones %v healthcheck %+v as on several lines",
				tc.oneLine, one.lt.prefix, one.lt.ttl, one.lt.Zones, one.hc, multi.lt.prefix, multi.lt.ttl, multi.lt.Zones, multi.hc)
		}
	}
}
