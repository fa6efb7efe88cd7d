package localtargets

import (
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
			want.proto, want.port = "tcp", 443
			if hc == nil || *hc != want {
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
			want := healthCheck{proto: "https", port: 443, path: "/healthz", host: "app.example.org",
				interval: 2 * time.Second, timeout: 500 * time.Millisecond, fails: 4, passes: 1}
			if hc == nil || *hc != want {
				t.Errorf("healthcheck %+v, want %+v", hc, want)
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
