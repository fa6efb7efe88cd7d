package gslb

import (
	"fmt"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

// hostFamily is a failover host (eu, us, ap) whose tiers hold one family
// each: eu declares only AAAA targets, us and ap only A.
const hostFamily = "family." + zone

var familyTargets = map[string]struct{ rrtype, target string }{
	"eu": {"AAAA", "fd00:10::10"},
	"us": {"A", "10.20.0.10"},
	"ap": {"A", "10.30.0.10"},
}

func familyHost(tag string) string {
	ft := familyTargets[tag]
	return testkit.DNSEndpoint("apps", "family", nil,
		testkit.Endpoint{DNSName: hostFamily, RecordType: ft.rrtype, TTL: 7, Targets: []string{ft.target},
			ProviderSpecific: [][2]string{{"gslb/strategy", "failover"}, {"gslb/primary", "eu,us,ap"}}})
}

// askAny asks ANY over UDP with EDNS and returns the A and AAAA targets.
func askAny(addr, name string) (a, aaaa []string, m *dns.Msg, err error) {
	m, err = harness.Ask(addr, name, dns.TypeANY, harness.EDNS(1232), harness.Attempts(1), harness.Timeout(2*time.Second))
	if err != nil {
		return nil, nil, nil, err
	}
	return harness.Targets(m, dns.TypeA), harness.Targets(m, dns.TypeAAAA), m, nil
}

// TestPerFamilyAndANYAcrossTheFleet: an IPv4-only client (asking A) of a
// host whose primary tier has only AAAA gets the next tier's A, never
// NODATA; an IPv6-only client (asking AAAA) gets the primary's AAAA. ANY
// at a GSLB host is gslb's own answer in every cluster (both families as
// A and AAAA queries get them), not the cluster's static declaration, and
// it follows the peers' health: when eu stops, ANY moves on to us.
func TestPerFamilyAndANYAcrossTheFleet(t *testing.T) {
	f := newFleet(t)
	for _, tag := range tags {
		testkit.WriteFile(t, f.clusters[tag].dir, "family.yaml", familyHost(tag))
	}
	f.start(t, fleetOptions{})

	// The IPv4-only client asks over IPv4 for A, the IPv6-only one for
	// AAAA; both from every cluster.
	for _, tag := range tags {
		c := f.clusters[tag]
		testkit.Eventually(t, 3*peerRefresh+slack, "per-family answers at "+tag, func() (bool, string) {
			a, errA := ask(c.addr, hostFamily, dns.TypeA)
			aaaa, errAAAA := ask(c.addr, hostFamily, dns.TypeAAAA)
			return errA == nil && errAAAA == nil && equal(a, []string{"10.20.0.10"}) && equal(aaaa, []string{"fd00:10::10"}),
				fmt.Sprintf("%s: A %v (%v), AAAA %v (%v); want us's A 10.20.0.10 (eu, the primary, has only AAAA) and eu's AAAA; %s",
					tag, a, errA, aaaa, errAAAA, f.explain(c, hostFamily))
		})
	}

	// ANY: gslb's answer. At ap, whose static declaration is ap's own
	// targets, the failover host's ANY is eu's A targets (primary), the
	// family host's ANY us's A and eu's AAAA.
	ap := f.clusters["ap"]
	a, aaaa, m, err := askAny(ap.addr, hostFailover)
	if err != nil || m.Rcode != dns.RcodeSuccess || !m.Authoritative || !equal(a, f.union("eu")) || len(aaaa) != 0 {
		t.Fatalf("ANY %s at ap: %v A %v AAAA %v, want eu's %v (failover), not ap's own %v; %v", hostFailover, err, a, aaaa, f.union("eu"), f.union("ap"), m)
	}
	a, aaaa, m, err = askAny(ap.addr, hostFamily)
	if err != nil || !equal(a, []string{"10.20.0.10"}) || !equal(aaaa, []string{"fd00:10::10"}) {
		t.Fatalf("ANY %s at ap: %v A %v AAAA %v, want us's A and eu's AAAA; %v", hostFamily, err, a, aaaa, m)
	}
	// The dual-stack roundRobin host: every cluster's A and AAAA.
	if a, aaaa, _, err := askAny(ap.addr, hostDualRR); err != nil || !equal(a, f.union(tags...)) || !equal(aaaa, sorted(append(append([]string(nil), v6Of["eu"]...), v6Of["ap"]...))) {
		t.Errorf("ANY %s at ap: %v A %v AAAA %v, want every cluster's targets", hostDualRR, err, a, aaaa)
	}

	// eu stops answering: once it is down (split_brain_threshold), ANY at
	// ap fails over to us for the failover host, and the family host has
	// no AAAA left (eu's was the only one).
	f.clusters["eu"].srv.Stop()
	bound := splitBrain + 2*peerRefresh + 2*peerTimeout + slack
	testkit.Eventually(t, bound, "ANY follows eu's outage", func() (bool, string) {
		a, aaaa, _, err := askAny(ap.addr, hostFailover)
		if err != nil || !equal(a, f.union("us")) || len(aaaa) != 0 {
			return false, fmt.Sprintf("ANY %s at ap: %v A %v AAAA %v, want us's %v", hostFailover, err, a, aaaa, f.union("us"))
		}
		a, aaaa, m, err := askAny(ap.addr, hostFamily)
		return err == nil && equal(a, []string{"10.20.0.10"}) && len(aaaa) == 0,
			fmt.Sprintf("ANY %s at ap: %v A %v AAAA %v, want us's A only; %v", hostFamily, err, a, aaaa, m)
	})
	// An undeclared name is no GSLB host: ANY falls through to k8scrd.
	if _, _, m, err := askAny(ap.addr, "nothere."+zone); err != nil || m.Rcode != dns.RcodeNameError {
		t.Errorf("ANY nothere.%s at ap: %v %v, want NXDOMAIN from k8scrd", zone, err, m)
	}
}
