package gslb

import (
	"slices"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
)

// TestStoreChangeSeenWithoutWalking: gslb reads the store's GSLB hosts when
// the store publishes a change, within 100 ms, and never walks it on a
// timer while nothing changes.
func TestStoreChangeSeenWithoutWalking(t *testing.T) {
	g, us, st := onePeer(t, "refresh 30s", app)
	waitReady(t, g)

	idle := st.Walks()
	time.Sleep(300 * time.Millisecond)
	if n := st.Walks() - idle; n != 0 {
		t.Errorf("%d walks of the store in 300ms without a change; want none", n)
	}

	const added = "new." + zone
	asked := us.queries.Load()
	start := time.Now()
	st.Put(host(added, "10.0.1.9"))
	testkit.Eventually(t, 5*time.Second, "the new host among the declared ones", func() bool {
		d := g.declared.Load()
		return d != nil && slices.Contains(*d, added)
	})
	if d := time.Since(start); d > 100*time.Millisecond && !testkit.Race {
		t.Errorf("the new host was seen %s after the change; want within 100ms", d)
	}
	testkit.Eventually(t, 5*time.Second, "the peer asked about the new host", func() bool { return us.queries.Load() > asked })
	if n := st.Walks() - idle; n != 1 {
		t.Errorf("%d walks for one change; want 1", n)
	}
}
