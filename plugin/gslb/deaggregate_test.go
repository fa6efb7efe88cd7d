package gslb

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/fleetdns/fleetdns/internal/testkit/mmdbtest"
	"github.com/miekg/dns"
	"github.com/oschwald/maxminddb-golang/v2"
)

// nestedCIDRs is the README's "most specific match wins" map with a CIDR
// inside another: ap's /24 inside us's /23, eu's /24 elsewhere, and an IPv6
// pair nested alike.
const nestedCIDRs = `strategy geoip
		geo cidr 10.0.32.0/23 us
		geo cidr 10.0.33.0/24 ap
		geo cidr 10.0.40.0/24 eu
		geo cidr 2001:db8:100::/47 us
		geo cidr 2001:db8:101::/48 ap`

// TestECSScopeDeaggregatesNestedCIDRs: the scope of an answer is the
// prefix within which no more specific configured network changes it
// (RFC 7871 §7.2.1), as gdnsd answers: us's clients in 10.0.32.0/24 get
// scope 24, not us's 23 (which would cover ap's /24), and an unmatched
// source prefix that contains a configured CIDR gets the prefix that
// excludes it.
func TestECSScopeDeaggregatesNestedCIDRs(t *testing.T) {
	g, _, _, _ := twoPeers(t, nestedCIDRs, newFakeStore(host(app, "10.0.1.1", "fd00::1:1")))
	all := []string{"10.0.1.1", "10.0.3.1", "10.0.2.1"}
	for _, c := range []struct {
		family uint16
		subnet string
		bits   uint8
		qtype  uint16
		want   []string
		scope  uint8
	}{
		{1, "10.0.32.0", 24, dns.TypeA, []string{"10.0.2.1"}, 24}, // us, not /23: ap's /24 is beside it
		{1, "10.0.32.128", 25, dns.TypeA, []string{"10.0.2.1"}, 24},
		{1, "10.0.33.0", 24, dns.TypeA, []string{"10.0.3.1"}, 24},
		{1, "10.0.32.0", 23, dns.TypeA, []string{"10.0.2.1"}, 24}, // the /23's first address is us's; ap's differs
		{1, "10.0.40.0", 24, dns.TypeA, []string{"10.0.1.1"}, 24},
		{1, "10.0.0.0", 16, dns.TypeA, all, 19},  // unmatched, contains the CIDRs: 10.0.0.0/19 holds none
		{1, "10.0.0.0", 8, dns.TypeA, all, 19},   // the same from a shorter source prefix
		{1, "10.0.34.0", 24, dns.TypeA, all, 24}, // unmatched, contains none: the client's own
		{1, "10.0.48.0", 20, dns.TypeA, all, 20},
		{2, "2001:db8:100::", 48, dns.TypeAAAA, []string{"fd00::2:1"}, 48},
		{2, "2001:db8:101::", 56, dns.TypeAAAA, []string{"fd00::1:1", "fd00::2:1"}, 48}, // ap has no AAAA: every AAAA target
		{2, "2001:db8::", 32, dns.TypeAAAA, []string{"fd00::1:1", "fd00::2:1"}, 40},
	} {
		m := ask(t, g, app, c.qtype, withECS(c.family, c.subnet, c.bits))
		if got := addrs(m); !slices.Equal(got, c.want) {
			t.Errorf("%s/%d: got %v, want %v", c.subnet, c.bits, got, c.want)
		}
		ecs, _ := replyECS(m)
		if ecs == nil || ecs.SourceNetmask != c.bits || ecs.SourceScope != c.scope {
			t.Errorf("%s/%d: reply ECS %v, want scope %d", c.subnet, c.bits, ecs, c.scope)
		}
	}
}

// TestECSScopeDeaggregatesMaxMindNetworks: a MaxMind network that holds a
// configured `geo cidr` (10.2.0.0/15 NA with ap's 10.3.128.0/17) is
// deaggregated the same way.
func TestECSScopeDeaggregatesMaxMindNetworks(t *testing.T) {
	path := mmdbtest.ContinentsFile(t, euNA...)
	g, _, _, _ := twoPeers(t, "strategy geoip\ngeo cidr 10.3.128.0/17 ap\ngeo mmdb "+path+" continent.code\ngeo map EU eu\ngeo map NA us",
		newFakeStore(host(app, "10.0.1.1")))
	for _, c := range []struct {
		subnet string
		want   []string
		scope  uint8
	}{
		{"10.2.9.0", []string{"10.0.2.1"}, 16},   // NA's /15 holds ap's /17: 10.2.0.0/16 excludes it
		{"10.3.9.0", []string{"10.0.2.1"}, 17},   // 10.3.0.0/17: beside ap's /17
		{"10.3.200.0", []string{"10.0.3.1"}, 17}, // ap's geo cidr wins over the database
		{"10.1.9.0", []string{"10.0.1.1"}, 16},   // EU's /16, nothing inside it
	} {
		m := ask(t, g, app, dns.TypeA, withECS(1, c.subnet, 24))
		if got := addrs(m); !slices.Equal(got, c.want) {
			t.Errorf("%s: got %v, want %v", c.subnet, got, c.want)
		}
		if ecs, _ := replyECS(m); ecs == nil || ecs.SourceScope != c.scope {
			t.Errorf("%s: reply ECS %v, want scope %d", c.subnet, ecs, c.scope)
		}
	}
}

// TestECSScopeHoldsForEveryAddressInside checks the scope's promise on
// random maps and clients: every address inside the answer's scope gets
// the same tag. That is what a resolver relies on when it hands the cached
// answer to every client in the scope.
func TestECSScopeHoldsForEveryAddressInside(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 7871))
	tags := []string{"eu", "us", "ap"}
	// Networks that split 10.0.0.0/16 unevenly (mmdbwriter deaggregates an
	// inserted network around a later, more specific one).
	mmdbPath := mmdbtest.ContinentsFile(t,
		mmdbtest.Network{CIDR: "10.0.0.0/17", Continent: "EU"}, mmdbtest.Network{CIDR: "10.0.64.0/20", Continent: "AS"},
		mmdbtest.Network{CIDR: "10.0.128.0/18", Continent: "NA"}, mmdbtest.Network{CIDR: "10.0.200.0/22", Continent: "EU"})
	for round := range 200 {
		r := &geoResolver{values: map[string]string{}}
		// CIDRs within 10.0.0.0/16, nested at random.
		for range 1 + rng.IntN(8) {
			bits := 16 + rng.IntN(13)
			a := netip.AddrFrom4([4]byte{10, 0, byte(rng.IntN(256)), byte(rng.IntN(256))})
			r.cidrs = append(r.cidrs, cidrTag{prefix: netip.PrefixFrom(a, bits).Masked(), tag: tags[rng.IntN(3)]})
		}
		slices.SortStableFunc(r.cidrs, func(a, b cidrTag) int { return b.prefix.Bits() - a.prefix.Bits() })
		if round%2 == 1 {
			reader, err := maxminddb.Open(mmdbPath)
			if err != nil {
				t.Fatal(err)
			}
			r.mmdb, r.field = reader, []any{"continent", "code"}
		}
		for range 50 {
			bits := 8 + rng.IntN(25)
			a := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, byte(rng.IntN(256)), byte(rng.IntN(256))}), bits).Masked()
			tag, scope, _ := r.lookup(&client{addr: a.Addr(), bits: bits})
			block := netip.PrefixFrom(a.Addr(), scope).Masked()
			for range 64 {
				inside := randomIn(rng, block)
				if got, _, _ := r.lookup(&client{addr: inside, bits: 32}); got != tag {
					var m []string
					for _, c := range r.cidrs {
						m = append(m, c.prefix.String()+" "+c.tag)
					}
					t.Fatalf("map %v (mmdb %v): client %s got %q with scope %d, but %s inside %s gets %q",
						m, r.mmdb != nil, a, tag, scope, inside, block, got)
				}
			}
		}
		if r.mmdb != nil {
			r.mmdb.Close()
		}
	}
}

// randomIn returns a random address of the IPv4 prefix p.
func randomIn(rng *rand.Rand, p netip.Prefix) netip.Addr {
	b := p.Addr().As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	if p.Bits() < 32 {
		v |= rng.Uint32() & (1<<(32-p.Bits()) - 1)
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}
