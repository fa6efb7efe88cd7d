package gslb

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/metadata"
	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"
	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/internal/testkit/mmdbtest"
	"github.com/miekg/dns"
)

const geoCIDRs = `strategy geoip
		geo cidr 10.1.0.0/16 eu
		geo cidr 10.2.0.0/16 us
		geo cidr 10.3.0.0/24 ap
		geo cidr 10.3.0.0/16 us`

func TestGeoipBySubnetEchoesECSWithScope(t *testing.T) {
	st := newFakeStore(host(app, "10.0.1.1"))
	g, _, _, _ := twoPeers(t, geoCIDRs, st)

	for _, c := range []struct {
		subnet string
		bits   uint8
		want   []string
		scope  uint8
	}{
		{"10.2.3.0", 24, []string{"10.0.2.1"}, 16},
		{"10.1.0.0", 16, []string{"10.0.1.1"}, 16},
		{"10.3.0.0", 24, []string{"10.0.3.1"}, 24},                            // most specific CIDR wins
		{"10.3.7.0", 24, []string{"10.0.2.1"}, 22},                            // us, deaggregated around ap's 10.3.0.0/24 (RFC 7871 §7.2.1)
		{"192.168.1.0", 24, []string{"10.0.1.1", "10.0.3.1", "10.0.2.1"}, 24}, // no tag: all, scope of the client's subnet
	} {
		m := ask(t, g, app, dns.TypeA, withECS(1, c.subnet, c.bits))
		if got := addrs(m); !slices.Equal(got, c.want) {
			t.Errorf("%s/%d: got %v, want %v", c.subnet, c.bits, got, c.want)
		}
		ecs, _ := replyECS(m)
		if ecs == nil {
			t.Fatalf("%s/%d: reply has no ECS", c.subnet, c.bits)
		}
		if ecs.Family != 1 || ecs.SourceNetmask != c.bits || !ecs.Address.Equal(net.ParseIP(c.subnet)) || ecs.SourceScope != c.scope {
			t.Errorf("%s/%d: reply ECS %s family %d, want %s/%d/%d", c.subnet, c.bits, ecs, ecs.Family, c.subnet, c.bits, c.scope)
		}
	}
}

func TestGeoipBySourceAddressWithoutECS(t *testing.T) {
	g, _, _, _ := twoPeers(t, geoCIDRs, newFakeStore(host(app, "10.0.1.1")))
	m := ask(t, g, app, dns.TypeA, from("10.3.0.77"))
	if got := addrs(m); !slices.Equal(got, []string{"10.0.3.1"}) {
		t.Errorf("source 10.3.0.77: got %v, want ap's", got)
	}
	if m.IsEdns0() != nil {
		t.Error("reply has an OPT record, the query had none")
	}
	m = ask(t, g, app, dns.TypeA, from("10.2.0.1"), withEDNS())
	if got := addrs(m); !slices.Equal(got, []string{"10.0.2.1"}) {
		t.Errorf("source 10.2.0.1: got %v, want us's", got)
	}
	if ecs, hasOPT := replyECS(m); !hasOPT || ecs != nil {
		t.Errorf("query with EDNS but no ECS: reply OPT %v, ECS %v; want OPT without ECS", hasOPT, ecs)
	}
}

func TestECSSourcePrefixZeroUsesSourceAddressAndScopeZero(t *testing.T) {
	g, _, _, _ := twoPeers(t, geoCIDRs, newFakeStore(host(app, "10.0.1.1")))
	m := ask(t, g, app, dns.TypeA, from("10.2.0.1"), withECS(0, "0.0.0.0", 0))
	if got := addrs(m); !slices.Equal(got, []string{"10.0.2.1"}) {
		t.Errorf("got %v, want us's (source address)", got)
	}
	if ecs, _ := replyECS(m); ecs == nil || ecs.SourceScope != 0 {
		t.Errorf("reply ECS %v, want scope 0", ecs)
	}
}

func TestClientIndependentAnswerHasScopeZero(t *testing.T) {
	g, _, _, _ := twoPeers(t, "strategy roundRobin\ngeo cidr 10.2.0.0/16 us", newFakeStore(host(app, "10.0.1.1")))
	m := ask(t, g, app, dns.TypeA, withECS(1, "10.2.3.0", 24))
	ecs, _ := replyECS(m)
	if ecs == nil || ecs.SourceScope != 0 || ecs.SourceNetmask != 24 {
		t.Errorf("roundRobin answer ECS %v, want 10.2.3.0/24/0", ecs)
	}
}

func TestGeoipClientTagWithoutTargetsAnswersAll(t *testing.T) {
	g, _, us, _ := twoPeers(t, geoCIDRs, newFakeStore(host(app, "10.0.1.1")))
	us.set(app)
	testkit.Eventually(t, 5*time.Second, "us without targets", func() bool {
		return slices.Equal(addrs(ask(t, g, app, dns.TypeA, withECS(1, "10.2.3.0", 24))), []string{"10.0.1.1", "10.0.3.1"})
	})
}

func TestMalformedECSIsFormErr(t *testing.T) {
	g, _, _, _ := twoPeers(t, geoCIDRs, newFakeStore(host(app, "10.0.1.1")))
	// Address bits beyond the source prefix (RFC 7871 §6).
	m := ask(t, g, app, dns.TypeA, withECS(1, "10.2.3.4", 16))
	if m.Rcode != dns.RcodeFormatError {
		t.Errorf("bits beyond the prefix: rcode %s, want FORMERR", dns.RcodeToString[m.Rcode])
	}
	// Two ECS options.
	m = ask(t, g, app, dns.TypeA, withECS(1, "10.2.3.0", 24), withECS(1, "10.1.0.0", 16))
	if m.Rcode != dns.RcodeFormatError {
		t.Errorf("two ECS options: rcode %s, want FORMERR", dns.RcodeToString[m.Rcode])
	}
	if ecs, _ := replyECS(m); ecs != nil {
		t.Errorf("FORMERR reply echoes ECS %v", ecs)
	}

	// The FORMERR is written by gslb: its return must tell the server not
	// to write a second reply.
	q := new(dns.Msg)
	q.SetQuestion(app, dns.TypeA)
	withECS(1, "10.2.3.4", 16)(q, nil)
	rec := dnstest.NewRecorder(&test.ResponseWriter{})
	rcode, _ := g.ServeDNS(context.Background(), rec, q)
	if !plugin.ClientWrite(rcode) || rec.Msg == nil {
		t.Errorf("ServeDNS returned %s after writing FORMERR: the server would answer twice", dns.RcodeToString[rcode])
	}
}

func TestECSIPv6(t *testing.T) {
	g, _, _, _ := twoPeers(t, "strategy geoip\ngeo cidr 2001:db8:2::/48 us", newFakeStore(host(app, "10.0.1.1", "fd00::1:1")))
	m := ask(t, g, app, dns.TypeAAAA, withECS(2, "2001:db8:2:100::", 56))
	if got := addrs(m); !slices.Equal(got, []string{"fd00::2:1"}) {
		t.Errorf("got %v, want us's AAAA", got)
	}
	if ecs, _ := replyECS(m); ecs == nil || ecs.Family != 2 || ecs.SourceNetmask != 56 || ecs.SourceScope != 48 {
		t.Errorf("reply ECS %v, want 2001:db8:2:100::/56/48", ecs)
	}
}

// euNA is a MaxMind database's networks: 10.1.0.0/16 in Europe, 10.2.0.0/15
// in North America.
var euNA = []mmdbtest.Network{{CIDR: "10.1.0.0/16", Continent: "EU"}, {CIDR: "10.2.0.0/15", Continent: "NA"}}

func TestGeoipFromMaxMindDB(t *testing.T) {
	path := mmdbtest.ContinentsFile(t, euNA...)
	g, _, _, _ := twoPeers(t, "strategy geoip\ngeo mmdb "+path+" continent.code\ngeo map EU eu\ngeo map NA us", newFakeStore(host(app, "10.0.1.1")))
	for _, c := range []struct {
		subnet string
		want   []string
		scope  uint8
	}{
		{"10.1.9.0", []string{"10.0.1.1"}, 16},
		{"10.3.9.0", []string{"10.0.2.1"}, 15},
		{"172.16.0.0", []string{"10.0.1.1", "10.0.3.1", "10.0.2.1"}, 0},
	} {
		m := ask(t, g, app, dns.TypeA, withECS(1, c.subnet, 24))
		if got := addrs(m); !slices.Equal(got, c.want) {
			t.Errorf("%s: got %v, want %v", c.subnet, got, c.want)
		}
		ecs, _ := replyECS(m)
		if ecs == nil {
			t.Fatalf("%s: no ECS in reply", c.subnet)
		}
		if c.scope != 0 && ecs.SourceScope != c.scope {
			t.Errorf("%s: scope %d, want the MaxMind network's %d", c.subnet, ecs.SourceScope, c.scope)
		}
	}
	// Without ECS: the source address.
	if got := addrs(ask(t, g, app, dns.TypeA, from("10.2.200.1"))); !slices.Equal(got, []string{"10.0.2.1"}) {
		t.Errorf("source 10.2.200.1: got %v, want us's", got)
	}
}

func TestGeoipFromMetadata(t *testing.T) {
	g, _, _, _ := twoPeers(t, "strategy geoip\ngeo metadata geoip/continent/code\ngeo map NA us\ngeo map AS ap", newFakeStore(host(app, "10.0.1.1")))
	for code, want := range map[string][]string{"NA": {"10.0.2.1"}, "AS": {"10.0.3.1"}, "": {"10.0.1.1", "10.0.3.1", "10.0.2.1"}} {
		ctx := metadata.ContextWithMetadata(context.Background())
		metadata.SetValueFunc(ctx, "geoip/continent/code", func() string { return code })
		m := askCtx(ctx, t, g, app, dns.TypeA)
		if got := addrs(m); !slices.Equal(got, want) {
			t.Errorf("continent %q: got %v, want %v", code, got, want)
		}
	}
}
