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

// TestDiscoveryFollowsTheDelegation starts ap while the parent does not
// delegate to it: ap reports the missing parent link once (log line and
// metric), and eu and us do not know it. Once the parent delegates to ap,
// everyone acts on it at the next discovery; when the parent goes away the
// last good peer set stays; when the restarted parent drops us, us leaves.
func TestDiscoveryFollowsTheDelegation(t *testing.T) {
	f := newFleet(t)
	delete(f.delegation, "ap")
	metrics := harness.HostPort(t, f.clusters["ap"].ip)
	f.start(t, fleetOptions{blockExtra: map[string]string{"ap": "    prometheus " + metrics + "\n"}})
	ap := f.clusters["ap"]

	rr := func(what string, want []string, from ...string) {
		t.Helper()
		for _, tag := range from {
			c := f.clusters[tag]
			testkit.Eventually(t, 4*peerRefresh, "the fleet's answer", func() (bool, string) {
				got, err := ask(c.addr, hostRR, dns.TypeA)
				return err == nil && equal(got, want), fmt.Sprintf("%s: %s at %s = %v (%v), want %v", what, hostRR, tag, got, err, want)
			})
		}
	}

	rr("ap not delegated", f.union("eu", "us"), "eu", "us")
	rr("ap not delegated, ap still finds the others", f.union(tags...), "ap")
	const missing = "does not include this cluster's name server"
	if !ap.srv.WaitLog(missing, 3*peerRefresh) {
		t.Errorf("ap did not log that the delegation misses its name server (%q)", missing)
	}
	if v, ok := harness.Scrape(t, metrics).Value("coredns_gslb_parent_link", "geotag", "ap"); !ok || v != 0 {
		t.Errorf("ap's coredns_gslb_parent_link = %v (series present: %v), want 0", v, ok)
	}
	// Several more discoveries: still one log line.
	time.Sleep(3 * peerRefresh)
	rr("still not delegated", f.union("eu", "us"), "eu")
	if n := strings.Count(ap.srv.Log(), missing); n != 1 {
		t.Errorf("ap logged the missing parent link %d times, want once", n)
	}

	f.delegation["ap"] = nsEntry{name: nsName("ap"), ip: ap.ip}
	f.setDelegation(t)
	rr("ap delegated", f.union(tags...), tags...)
	testkit.Eventually(t, 3*peerRefresh, "ap's parent link up", func() (bool, string) {
		v, ok := harness.Scrape(t, metrics).Value("coredns_gslb_parent_link", "geotag", "ap")
		return ok && v == 1, fmt.Sprintf("ap's coredns_gslb_parent_link = %v (series present: %v) after the delegation includes it", v, ok)
	})

	// The parent goes away: the last good set is kept.
	f.parent.Kill()
	time.Sleep(3 * peerRefresh)
	rr("parent unreachable", f.union(tags...), tags...)

	// The parent returns without us in the delegation.
	delete(f.delegation, "us")
	f.setDelegation(t)
	f.parent.Restart()
	rr("us no longer delegated", f.union("eu", "ap"), "eu", "ap")
}
