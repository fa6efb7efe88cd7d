package gslb

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

// TestPeersServingOnlyTheZoneAreUp starts a new GSLB zone, as deploy/gslb
// ships it: three clusters whose server blocks serve only the GSLB zone, and
// a k8gb-style peer (stock CoreDNS, `file`, the zone only) in the
// delegation, with no host declared anywhere yet. Every cluster reports
// every peer up (coredns_gslb_peer_state) from its probe alone, although
// none of them serves the parent zone. A peer that stops answering then
// leaves up with no host to ask about. When a host is declared, the first
// answer a cluster gives for it already carries its peers' targets.
func TestPeersServingOnlyTheZoneAreUp(t *testing.T) {
	f := newFleet(t)
	k8gbIP, k8gb := startK8gbPeer(t)
	f.delegation["za"] = nsEntry{name: k8gbNSName("za"), ip: k8gbIP}

	metrics := map[string]string{}
	extra := map[string]string{}
	for _, tag := range tags {
		metrics[tag] = harness.HostPort(t, f.clusters[tag].ip)
		extra[tag] = "    prometheus " + metrics[tag] + "\n"
	}
	f.start(t, fleetOptions{noHosts: true, blockExtra: extra})

	peersOf := func(tag string) []string {
		var out []string
		for _, p := range append(append([]string(nil), tags...), "za") {
			if p != tag {
				out = append(out, p)
			}
		}
		return out
	}
	// The clusters start one after another, so a cluster may have found a
	// later one not running yet: one more probe (a tick) and it is up.
	for _, tag := range tags {
		msg, ok := testkit.Within(3*peerRefresh+slack, func() (bool, string) {
			var bad []string
			for _, p := range peersOf(tag) {
				if st := peerStateOf(t, metrics[tag], p); st != "up" {
					bad = append(bad, p+" "+st)
				}
			}
			return len(bad) == 0, fmt.Sprintf("%s's coredns_gslb_peer_state with no host declared: %v, want every peer up",
				tag, bad)
		})
		if !ok {
			t.Error(msg)
		}
	}

	// The k8gb peer goes away while no host is declared: it is still
	// probed, so it is stale, then down after split_brain_threshold.
	k8gb.Kill()
	for _, tag := range tags {
		testkit.Eventually(t, splitBrain+3*peerRefresh+slack, "the dead peer marked down", func() (bool, string) {
			st := peerStateOf(t, metrics[tag], "za")
			return st == "down", fmt.Sprintf("%s's state of the dead peer za = %s, want down", tag, st)
		})
	}

	// The host is declared at us and ap first, then at eu: eu's very first
	// answer carries us's and ap's targets (it asks the peers, up and
	// with no answer cached, on the query path), not eu's alone.
	for _, tag := range []string{"us", "ap"} {
		c := f.clusters[tag]
		testkit.WriteFile(t, c.dir, "hosts.yaml", clusterHosts(tag, f.targets[tag]))
		testkit.Eventually(t, 5*time.Second, "localtargets- answered at every cluster", func() (bool, string) {
			got, err := ask(c.addr, "localtargets-"+hostRR, dns.TypeA)
			return err == nil && equal(got, sorted(f.targets[tag])), fmt.Sprintf("localtargets-%s at %s = %v (%v)", hostRR, tag, got, err)
		})
	}
	eu := f.clusters["eu"]
	testkit.WriteFile(t, eu.dir, "hosts.yaml", clusterHosts("eu", f.targets["eu"]))
	var first []string
	testkit.Eventually(t, 5*time.Second, "eu's first answer for the new host", func() (bool, string) {
		got, err := ask(eu.addr, hostRR, dns.TypeA)
		if err != nil || !strings.Contains(strings.Join(got, " "), f.targets["eu"][0]) {
			return false, fmt.Sprintf("%s at eu = %v (%v): not declared at eu yet", hostRR, got, err)
		}
		first = got
		return true, ""
	})
	if want := f.union(tags...); !equal(first, want) {
		t.Errorf("eu's first answer for %s once declared = %v, want every cluster's targets %v; %s", hostRR, first, want, f.explain(eu, hostRR))
	}
	for _, tag := range tags {
		if st := peerStateOf(t, metrics["eu"], tag); tag != "eu" && st != "up" {
			t.Errorf("eu's state of %s after the host was declared = %s, want up", tag, st)
		}
	}
}

// peerStateOf scrapes a cluster's coredns_gslb_peer_state and returns the
// state that is 1 for peer ("" when the peer has no series).
func peerStateOf(t *testing.T, hostport, peer string) string {
	t.Helper()
	m := harness.Scrape(t, hostport)
	for _, s := range []string{"unknown", "up", "stale", "down"} {
		if v, ok := m.Value("coredns_gslb_peer_state", "peer", peer, "state", s, "zone", zone+"."); ok && v == 1 {
			return s
		}
	}
	return ""
}
