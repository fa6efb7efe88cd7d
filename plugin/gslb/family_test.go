package gslb

import (
	"fmt"
	"slices"
	"testing"

	"github.com/coredns/coredns/plugin/test"
	"github.com/fleetdns/fleetdns/internal/store/storetest"
	"github.com/miekg/dns"
)

// TestWeightedPerFamily: a weighted draw is among the tags that have the
// asked family, so an AAAA query never draws ap (A only) into NODATA.
func TestWeightedPerFamily(t *testing.T) {
	st := newFakeStore(withProps(host(app, "10.0.1.1"), propStrategy, "weighted", propWeight, "eu=0,us=1,ap=1"))
	g, _, _, _ := twoPeers(t, "", st)
	seen := map[string]int{}
	for range 200 {
		got := addrs(ask(t, g, app, dns.TypeAAAA))
		if !slices.Equal(got, []string{"fd00::2:1"}) {
			t.Fatalf("AAAA: got %v, want us's (ap and eu have no AAAA)", got)
		}
		a := addrs(ask(t, g, app, dns.TypeA))
		if len(a) != 1 {
			t.Fatalf("A: got %v, want one tag's", a)
		}
		seen[a[0]]++
	}
	if seen["10.0.2.1"] == 0 || seen["10.0.3.1"] == 0 || seen["10.0.1.1"] != 0 {
		t.Errorf("A draws %v, want us and ap, never eu (weight 0)", seen)
	}
}

// anyRRs splits an ANY answer into its A and AAAA addresses.
func anyRRs(m *dns.Msg) (a, aaaa []string, other []dns.RR) {
	for _, rr := range m.Answer {
		switch x := rr.(type) {
		case *dns.A:
			a = append(a, x.A.String())
		case *dns.AAAA:
			aaaa = append(aaaa, x.AAAA.String())
		default:
			other = append(other, rr)
		}
	}
	return a, aaaa, other
}

// TestANYIsTheStrategysAnswer: ANY at a GSLB host is answered by gslb, each
// family as an A or AAAA query would get it (strategy, per-family tiers,
// withdrawn targets left out), never by the static declaration below it.
func TestANYIsTheStrategysAnswer(t *testing.T) {
	// eu's own targets: 10.0.1.2 and fd00::1:1 withdrawn by source health.
	h := withProps(host(app, "10.0.1.1", "10.0.1.2", "fd00::1:1"), propStrategy, "failover", propPrimary, "ap,eu,us")
	st := newFakeStore(storetest.Withdraw(h, "10.0.1.2", "fd00::1:1"))
	g, n, _, _ := twoPeers(t, "", st)

	calls := n.calls.Load()
	m := ask(t, g, app, dns.TypeANY, withEDNS())
	if m.Rcode != dns.RcodeSuccess || !m.Authoritative || m.Truncated {
		t.Fatalf("ANY: %s aa=%v tc=%v, want authoritative NOERROR", dns.RcodeToString[m.Rcode], m.Authoritative, m.Truncated)
	}
	a, aaaa, other := anyRRs(m)
	// ap (primary) has A only; AAAA from the next tier that has it: eu's
	// is withdrawn, so us's.
	if !slices.Equal(a, []string{"10.0.3.1"}) || !slices.Equal(aaaa, []string{"fd00::2:1"}) || len(other) != 0 {
		t.Errorf("ANY: A %v AAAA %v other %v, want ap's A 10.0.3.1 and us's AAAA fd00::2:1", a, aaaa, other)
	}
	for _, rr := range m.Answer {
		if rr.Header().Ttl != 30 || rr.Header().Name != app {
			t.Errorf("ANY record %s: want owner %s and the default TTL 30", rr, app)
		}
	}
	if n.calls.Load() != calls {
		t.Error("ANY at a GSLB host fell through to the next plugin")
	}

	// geoip: the client's region for both families.
	st.Put(withProps(host(app, "10.0.1.1", "fd00::1:1"), propStrategy, "geoip"))
	g2, _, _, _ := twoPeers(t, geoCIDRs, st)
	m = ask(t, g2, app, dns.TypeANY, withECS(1, "10.2.3.0", 24))
	if a, aaaa, _ := anyRRs(m); !slices.Equal(a, []string{"10.0.2.1"}) || !slices.Equal(aaaa, []string{"fd00::2:1"}) {
		t.Errorf("ANY from us's subnet: A %v AAAA %v, want us's", a, aaaa)
	}
	if ecs, _ := replyECS(m); ecs == nil || ecs.SourceScope != 16 {
		t.Errorf("ANY geoip reply ECS %v, want scope 16", ecs)
	}

	// Names that are not GSLB hosts fall through as before.
	calls = n.calls.Load()
	ask(t, g, "nothere."+zone, dns.TypeANY)
	if n.calls.Load() != calls+1 {
		t.Error("ANY at an undeclared name did not fall through")
	}
}

// TestANYOverUDPLeavesAAAAOutWhenBothDoNotFit: one RRset is enough for ANY
// (RFC 8482 §4.1): when A and AAAA together exceed the client's UDP size,
// the AAAA set is left out without TC; over TCP both are given.
func TestANYOverUDPLeavesAAAAOutWhenBothDoNotFit(t *testing.T) {
	targets := []string{"10.0.1.1"}
	for i := range 20 {
		targets = append(targets, fmt.Sprintf("fd00::1:%x", 0x100+i))
	}
	g, _, _, _ := twoPeers(t, "strategy failover\nprimary eu", newFakeStore(host(app, targets...)))
	m := ask(t, g, app, dns.TypeANY)
	a, aaaa, _ := anyRRs(m)
	if m.Truncated || !slices.Equal(a, []string{"10.0.1.1"}) || len(aaaa) != 0 {
		t.Errorf("ANY over UDP/512: tc=%v A %v AAAA %d, want eu's A only, no TC", m.Truncated, a, len(aaaa))
	}
	if l := m.Len(); l > dns.MinMsgSize {
		t.Errorf("ANY over UDP/512 is %d octets", l)
	}
	m = ask(t, g, app, dns.TypeANY, overTCP())
	if a, aaaa, _ := anyRRs(m); len(a) != 1 || len(aaaa) != 20 {
		t.Errorf("ANY over TCP: A %v AAAA %d, want both sets in full", a, len(aaaa))
	}
	// A large EDNS buffer takes both over UDP.
	m = ask(t, g, app, dns.TypeANY, withEDNS())
	if a, aaaa, _ := anyRRs(m); len(a) != 1 || len(aaaa) != 20 {
		t.Errorf("ANY over UDP/4096: A %v AAAA %d, want both sets", a, len(aaaa))
	}
}

func overTCP() queryOpt {
	return func(_ *dns.Msg, w *test.ResponseWriter) { w.TCP = true }
}
