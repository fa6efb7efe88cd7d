package bounds_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

// TestStrayDatagramBeforeThePeersAnswer (finding 5): the peer process
// sends a 2-byte datagram from its own address and port before every real
// answer. The cluster reads past it: the peer stays up, its targets are in
// the answer, and no failure is counted for it. Before issue 16 the first
// datagram was taken as the answer ("dns: short read") and the peer went down.
func TestStrayDatagramBeforeThePeersAnswer(t *testing.T) {
	peerIP := harness.NewIP(t)
	peer := startFake(t, roleStrayPeer, peerIP, "127.40.0.1", "127.40.0.2")
	c := startCluster(t, fmt.Sprintf(`        peer us %s
        timeout 1s
        refresh 1s
        split_brain_threshold 3s`, peer.Addr),
		testkit.DNSEndpoint("apps", "www", nil, testkit.Endpoint{DNSName: host, RecordType: "A", TTL: 5, Targets: []string{"127.41.0.1"}}),
		harness.WithProbe(host, dns.TypeA))

	want := []string{"127.40.0.1", "127.40.0.2", "127.41.0.1"}
	testkit.Eventually(t, 10*time.Second, "the stray peer's targets", func() (bool, string) {
		got := harness.Targets(answer(t, c.Addr, host, dns.TypeA), dns.TypeA)
		slices.Sort(got)
		return slices.Equal(got, want), fmt.Sprintf("%s = %v, want %v", host, got, want)
	})
	// Several refreshes more, past split_brain_threshold: a peer failing
	// every exchange would be gone by now.
	before, _ := peer.count()
	time.Sleep(4 * time.Second)
	after, _ := peer.count()
	got := harness.Targets(answer(t, c.Addr, host, dns.TypeA), dns.TypeA)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("after %d more peer queries: %s = %v, want %v (the peer went down)", after-before, host, got, want)
	}
	if after-before < 2 {
		t.Errorf("the peer was asked %d times in 4 s, want it refreshed", after-before)
	}
	// A stray datagram taken as the answer fails as network or malformed;
	// a timeout is an exchange that a loaded machine made slow (the peer
	// goes stale until the next refresh), not the stray's doing.
	text := harness.Scrape(t, c.metrics)
	if v := text.Sum("coredns_gslb_peer_failures_total", "peer", "us") - text.Sum("coredns_gslb_peer_failures_total", "peer", "us", "reason", "timeout"); v != 0 {
		t.Errorf("coredns_gslb_peer_failures_total{peer=\"us\",reason!=\"timeout\"} = %v, want 0", v)
	}
	testkit.Eventually(t, 5*time.Second, "the stray peer up", func() (bool, string) {
		v := harness.Scrape(t, c.metrics).Sum("coredns_gslb_peer_state", "peer", "us", "state", "up")
		return v == 1, fmt.Sprintf("coredns_gslb_peer_state{peer=\"us\",state=\"up\"} = %v, want 1\n%s", v, explain(t, c.Addr, host))
	})
	t.Logf("%d peer queries, each after a stray datagram; explain:\n%s", after, explain(t, c.Addr, host))
}
