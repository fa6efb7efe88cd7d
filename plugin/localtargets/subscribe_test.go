package localtargets

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/store"
	"github.com/fleetdns/fleetdns/internal/store/storetest"
	"github.com/fleetdns/fleetdns/internal/testkit"
)

// TestStoreChangeCheckedWithoutWalking: a target added to the store is
// checked within 100 ms of the change, and the store is never walked on a
// timer while nothing changes.
func TestStoreChangeCheckedWithoutWalking(t *testing.T) {
	s := storetest.New(&store.Host{Name: "app.example.org.", TTL: 30, AddressDeclared: true, A: addrs("10.0.0.1")})
	hc := newHealthCheck()
	hc.interval, hc.timeout = time.Hour, time.Second // one check per target: the first
	c := newChecker(hc, []string{"example.org."}, defaultPrefix, s)
	probed := make(chan netip.Addr, 16)
	c.probe = func(_ context.Context, p probeSpec) error {
		probed <- p.addr
		return nil
	}
	c.start()
	defer c.stop()
	if ip := <-probed; ip != netip.MustParseAddr("10.0.0.1") {
		t.Fatalf("first check of %s; want 10.0.0.1", ip)
	}

	// Longer than the one-second rescan timer that this replaced.
	idle := s.Walks()
	time.Sleep(1200 * time.Millisecond)
	if n := s.Walks() - idle; n != 0 {
		t.Errorf("%d walks of the store in 1.2s without a change; want none", n)
	}

	start := time.Now()
	s.Put(&store.Host{Name: "new.example.org.", TTL: 30, AddressDeclared: true, A: addrs("10.0.0.2")})
	select {
	case ip := <-probed:
		if ip != netip.MustParseAddr("10.0.0.2") {
			t.Fatalf("checked %s; want the new target 10.0.0.2", ip)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the new target was not checked within 5s of the change")
	}
	if d := time.Since(start); d > 100*time.Millisecond && !testkit.Race {
		t.Errorf("the new target was checked %s after the change; want within 100ms", d)
	}
}
