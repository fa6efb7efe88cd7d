package gslb

import (
	"fmt"
	"testing"

	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

// TestLocalTargetsLargeAnswer serves a host with 100 A targets from one
// cluster: a peer asking localtargets- over UDP without EDNS gets TC, and
// the same question over TCP gets all 100, as real peers retry.
func TestLocalTargetsLargeAnswer(t *testing.T) {
	requirePlugins(t, "k8scrd", "localtargets")
	ip := harness.NewIP(t)
	dir := t.TempDir()
	var targets []string
	for i := range 100 {
		targets = append(targets, fmt.Sprintf("10.70.0.%d", i+1))
	}
	writeManifest(t, dir, "big.yaml", manifest("big", "apps", nil,
		endpoint{name: "big." + zone, rtype: "A", ttl: 7, targets: targets}))
	srv := harness.StartCoreDNS(t, fmt.Sprintf(`%s:53 {
    bind %s
    localtargets
    k8scrd {
        directory %s
    }
}
`, zone, ip, dir), harness.WithProbe("big."+zone, dns.TypeA))

	m := harness.Exchange(t, srv.Addr, "localtargets-big."+zone, dns.TypeA)
	if !m.Truncated || len(m.Answer) >= 100 {
		t.Errorf("over UDP without EDNS: TC=%v with %d answers, want TC and fewer than 100", m.Truncated, len(m.Answer))
	}
	m = harness.Exchange(t, srv.Addr, "localtargets-big."+zone, dns.TypeA, harness.TCP)
	if got := harness.Targets(m, dns.TypeA); m.Truncated || len(got) != 100 {
		t.Errorf("over TCP: TC=%v with %d answers, want all 100", m.Truncated, len(got))
	}
	// dig retries over TCP on TC, as a resolver does.
	if got := harness.DigShort(t, srv.Addr, "localtargets-big."+zone, "A", "+noedns"); len(got) != 100 {
		t.Errorf("dig +noedns: %d targets, want 100 after its TCP retry", len(got))
	}
}
