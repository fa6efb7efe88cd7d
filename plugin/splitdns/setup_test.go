package splitdns

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
)

func TestSetupParse(t *testing.T) {
	dir := t.TempDir()
	resolv := filepath.Join(dir, "resolv.conf")
	os.WriteFile(resolv, []byte("nameserver 10.0.0.53\nnameserver 10.0.0.54\noptions ndots:5\n"), 0o644)
	selfResolv := filepath.Join(dir, "self.conf")
	os.WriteFile(selfResolv, []byte("nameserver 127.0.0.1\noptions ndots:5\n"), 0o644)

	tests := []struct {
		input   string
		bind    []string
		wantErr string // "" for success
	}{
		{`splitdns {
			route svc.acme.internal 192.168.240.1 tls://10.0.0.9
			default 8.8.8.8:53
			policy sequential
			health_check 1s
			timeout 1s
			tls_servername dns.acme.internal
			ready_requires all
		}`, nil, ""},
		{`splitdns {
			resolv ` + resolv + `
		}`, nil, ""},
		{`splitdns {
			route svc.acme.internal 10.0.0.1
			default 10.0.0.53
			ready_requires default svc.acme.internal
		}`, nil, ""},
		{`splitdns {
			route svc.acme.internal 10.0.0.1
			ready_requires default
		}`, nil, ""}, // the default default: nothing to wait for
		{`splitdns {
			route svc.acme.internal 10.0.0.1
			ready_requires default svc.acme.internal
		}`, nil, "ready_requires: no route for ."},
		{`splitdns {
			route svc.acme.internal 10.0.0.1
			ready_requires other.internal
		}`, nil, "ready_requires: no route for other.internal."},
		{`splitdns arg {
		}`, nil, "Wrong argument count"},
		{`splitdns {
			route svc.acme.internal
		}`, nil, "Wrong argument count"},
		{`splitdns {
			route . 10.0.0.1
		}`, nil, "root zone is the default route"},
		{`splitdns {
			route 10.0.0.0/8 10.0.0.1
			route 172.16.0.0/12 10.0.0.1
		}`, nil, ""},
		{`splitdns {
			route 10.0.0.0/8 10.0.0.1
			route 10.in-addr.arpa 10.0.0.2
		}`, nil, "zone 10.in-addr.arpa. is routed twice"},
		{`splitdns {
			route a.corp 10.0.0.1
			route A.corp. 10.0.0.2
		}`, nil, "routed twice"},
		{`splitdns {
			route a.corp not-an-ip
		}`, nil, "not an IP address"},
		{`splitdns {
			route a.corp https://10.0.0.1
		}`, nil, "only dns:// and tls://"},
		{`splitdns {
			default 10.0.0.1
			resolv ` + resolv + `
		}`, nil, "only one of"},
		{`splitdns {
			policy fastest
		}`, nil, "unknown policy"},
		{`splitdns {
			timeout soon
		}`, nil, "not a positive duration"},
		{`splitdns {
			frobnicate
		}`, nil, "unknown property 'frobnicate'"},
		{`splitdns {
			kubedns ` + filepath.Join(dir, "missing") + `
		}`, nil, ""}, // an absent folder has no files: nothing to route yet
		// Loop refusal: the sidecar trap and friends.
		{`splitdns {
			resolv ` + selfResolv + `
		}`, []string{"127.0.0.1"}, "upstream 127.0.0.1:53 is this server itself (it listens on 127.0.0.1:53)"},
		{`splitdns {
			default 127.0.0.53
		}`, []string{""}, "is this server itself (it listens on every local address, port 53)"},
		{`splitdns {
			route a.corp 127.0.0.1:5353
			default 127.0.0.53
		}`, []string{"127.0.0.1"}, ""}, // another port, another address: not us
		{`splitdns {
			route a.corp dns://127.0.0.1
		}`, []string{"127.0.0.1"}, "forwarding there would loop"},
		{"splitdns { route svc.acme.internal }", nil, "Testfile:1 - Error during parsing: Wrong argument count or unexpected line ending after 'svc.acme.internal'"},
		{"splitdns { policy }", nil, "Testfile:1 - Error during parsing: Wrong argument count or unexpected line ending after 'policy'"},
		{"splitdns { frobnicate }", nil, "Testfile:1 - Error during parsing: unknown property 'frobnicate'"},
		{"splitdns {\n default 10.0.0.1\n timeout soon }", nil, `Testfile:3 - Error during parsing: bad timeout "soon": not a positive duration`},
		{"splitdns {\n default 10.0.0.1\n route a.corp not-an-ip }", nil, "Testfile:3 - Error during parsing: route a.corp: not an IP address"},
	}
	for i, tc := range tests {
		c := caddy.NewTestController("dns", tc.input)
		cfg := dnsserver.GetConfig(c)
		cfg.Port = "53"
		if tc.bind != nil {
			cfg.ListenHosts = tc.bind
		}
		_, _, err := parseSplitDNS(c)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("test %d: unexpected error %v", i, err)
		case tc.wantErr != "" && err == nil:
			t.Errorf("test %d: want error containing %q, got none", i, tc.wantErr)
		case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
			t.Errorf("test %d: error %q does not contain %q", i, err, tc.wantErr)
		}
	}
}

func TestWildcardBindRefusesLocalAddresses(t *testing.T) {
	l := listener{hosts: []string{""}, port: "53", local: localAddrs()}
	for _, a := range l.local {
		if err := l.self(a.String() + ":53"); a.To4() != nil && err == nil {
			t.Errorf("%s:53 accepted as an upstream of a wildcard :53 listener", a)
		}
	}
	if err := l.self("192.0.2.1:53"); err != nil {
		t.Errorf("remote upstream refused: %v", err)
	}
	if err := l.self("127.0.0.1:54"); err != nil {
		t.Errorf("other port refused: %v", err)
	}
}

func TestRouteForACIDRCoversItsReverseZones(t *testing.T) {
	c := caddy.NewTestController("dns", `splitdns {
		route 172.16.0.0/12 10.0.0.1
	}`)
	s, kd, err := parseSplitDNS(c)
	if err != nil {
		t.Fatal(err)
	}
	tbl, _ := s.build(kd)
	for _, name := range []string{"1.0.16.172.in-addr.arpa.", "9.9.31.172.in-addr.arpa."} {
		if r := tbl.lookup(name); r == nil || r.source != "route" {
			t.Errorf("%s is not routed", name)
		}
	}
	if r := tbl.lookup("1.0.32.172.in-addr.arpa."); r != nil {
		t.Errorf("172.32.0.1 is outside 172.16.0.0/12 but routed to %s", r.zone)
	}
}

func TestSetupOneLineBlockIsTheMultiLineBlock(t *testing.T) {
	for _, property := range []string{
		"route svc.acme.internal 192.168.240.1 tls://10.0.0.9",
		"route 172.16.0.0/12 10.0.0.1",
		"default 8.8.8.8:53 8.8.4.4",
		"policy sequential",
		"health_check 1s",
		"timeout 1s",
		"tls_servername dns.acme.internal",
		"ready_requires all",
		"ready_requires default",
	} {
		multi, _, err := parseSplitDNS(caddy.NewTestController("dns", "splitdns {\n "+property+"\n}"))
		if err != nil {
			t.Fatalf("%s: %v", property, err)
		}
		oneLine := "splitdns { " + property + " }"
		one, _, err := parseSplitDNS(caddy.NewTestController("dns", oneLine))
		if err != nil {
			t.Errorf("%q: %v", oneLine, err)
			continue
		}
		if !reflect.DeepEqual(one.cfg, multi.cfg) || one.pool.interval != multi.pool.interval || one.pool.timeout != multi.pool.timeout ||
			one.pool.tls.ServerName != multi.pool.tls.ServerName {
			t.Errorf("%q parsed to %+v, want %+v as on several lines", oneLine, one.cfg, multi.cfg)
		}
	}
}
