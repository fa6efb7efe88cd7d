package localtargets

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/store"
	"github.com/fleetdns/fleetdns/internal/store/storetest"
	"github.com/fleetdns/fleetdns/internal/testkit"
)

// tenantHosts returns n hosts of owner, named to sort before any other,
// each with per targets in 198.18.X.Y.
func tenantHosts(owner string, n, per int) []*store.Host {
	var hs []*store.Host
	for i := range n {
		var ts []string
		for j := range per {
			ts = append(ts, netip.AddrFrom4([4]byte{198, 18, byte(i), byte(j + 1)}).String())
		}
		hs = append(hs, storetest.OwnedHost(owner, fmt.Sprintf("a%03d.example.org.", i), ts...))
	}
	return hs
}

// TestZoneCapSharedByOwners (issue 24, finding 4): 64 hosts x 16 targets
// of one namespace, under names that sort first, no longer take the whole
// max_per_zone: the other namespace's host is checked and served.
func TestZoneCapSharedByOwners(t *testing.T) {
	hosts := append(tenantHosts("tenant", 64, 16), storetest.OwnedHost("victim", "victim.example.org.", "198.19.0.1"))
	s := storetest.New(hosts...)
	hc := tcpHealthCheck(80)
	hc.maxPerZone = 1024
	hc.interval, hc.timeout = time.Hour, time.Second
	c := newChecker(hc, []string{"example.org."}, defaultPrefix, s)
	c.probe = func(context.Context, probeSpec) error { return nil }
	c.start()
	defer c.stop()
	testkit.Eventually(t, 10*time.Second, "ready", c.ready.Load)
	v, _ := s.Host("victim.example.org.")
	if up := c.healthy(v, v.A); len(up) != 1 {
		t.Fatalf("victim's target served %v, want 198.19.0.1", up)
	}
	c.mu.Lock()
	n := len(c.checks)
	c.mu.Unlock()
	if n != 1024 {
		t.Errorf("%d checks, want the cap of 1024", n)
	}
}

// TestCappedVerdictIsForgotten (issue 24, finding 4): a healthy target
// pushed beyond the zone's cap (another owner's hosts arrive) is no longer
// checked, and its old verdict is not served: it counts as unknown.
func TestCappedVerdictIsForgotten(t *testing.T) {
	victim := storetest.OwnedHost("victim", "victim.example.org.", "198.19.0.1", "198.19.0.2", "198.19.0.3")
	s := storetest.New(victim)
	hc := tcpHealthCheck(80)
	hc.maxPerZone = 4
	hc.interval, hc.timeout = 50*time.Millisecond, 50*time.Millisecond
	c := newChecker(hc, []string{"example.org."}, defaultPrefix, s)
	var mu sync.Mutex
	probed := map[netip.Addr]int{}
	c.probe = func(_ context.Context, p probeSpec) error {
		mu.Lock()
		probed[p.addr]++
		mu.Unlock()
		return nil
	}
	c.start()
	defer c.stop()
	testkit.Eventually(t, 5*time.Second, "all three served", func() bool { return len(c.healthy(victim, victim.A)) == 3 })

	// Owners in turn: tenant, victim, tenant, victim: the victim's third
	// target is beyond the cap of 4.
	s.Put(tenantHosts("tenant", 1, 4)...)
	testkit.Eventually(t, time.Second, "the capped target withdrawn", func() error {
		if up := c.healthy(victim, victim.A); fmt.Sprint(up) != "[198.19.0.1 198.19.0.2]" {
			return fmt.Errorf("served %v, want the two checked targets", up)
		}
		return nil
	})
	mu.Lock()
	before := probed[netip.MustParseAddr("198.19.0.3")]
	mu.Unlock()
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if n := probed[netip.MustParseAddr("198.19.0.3")] - before; n > 1 {
		t.Errorf("the capped target was checked %d times after the cap", n)
	}
}

// TestTarpitDoesNotStarveOthers (issue 24, finding 5): one owner's 200
// checks each hold a worker for the whole timeout (a tarpit); another
// owner's new host gets its first check at once, not after the tarpit's
// round (200 x 1 s / 8 workers = 25 s).
func TestTarpitDoesNotStarveOthers(t *testing.T) {
	tarpit := tenantHosts("tenant", 20, 10)
	s := storetest.New(tarpit...)
	hc := tcpHealthCheck(80)
	hc.interval, hc.timeout = 5*time.Second, time.Second
	c := newChecker(hc, []string{"example.org."}, defaultPrefix, s)
	victimAddr := netip.MustParseAddr("198.19.0.1")
	var tarpitted atomic.Int64
	victimChecked := make(chan time.Time, 1)
	c.probe = func(ctx context.Context, p probeSpec) error {
		if p.addr == victimAddr {
			select {
			case victimChecked <- time.Now():
			default:
			}
			return nil
		}
		tarpitted.Add(1)
		<-ctx.Done()
		return ctx.Err()
	}
	c.start()
	defer c.stop()
	testkit.Eventually(t, 5*time.Second, "the tarpit holds every worker", func() bool { return tarpitted.Load() >= int64(hc.workers) })

	added := time.Now()
	s.Put(storetest.OwnedHost("victim", "victim.example.org.", victimAddr.String()))
	select {
	case at := <-victimChecked:
		if d := at.Sub(added); d > time.Second {
			t.Errorf("the victim's first check after %v, want within 1s", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the victim's first check did not start within 5s")
	}
}
