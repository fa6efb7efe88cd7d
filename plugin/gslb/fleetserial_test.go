package gslb

import (
	"strings"
	"testing"
	"time"

	"github.com/coredns/caddy"
	"github.com/fleetdns/fleetdns/internal/store/storetest"
	"github.com/fleetdns/fleetdns/internal/testkit"
)

// TestReplicasPublishTheViewAtTheStoresSerial: two replicas of one cluster
// (two gslb instances, each with its own store of the same data, started
// apart) publish the same serial for the same view: the store's SOA serial
// of the zone, not the clock of either. A change of the data moves both to
// the new data serial; a health verdict seen by both moves both one step.
func TestReplicasPublishTheViewAtTheStoresSerial(t *testing.T) {
	type replica struct {
		g  *GSLB
		st *storetest.Store
		vt *verdictTargets
	}
	start := func() replica {
		c := caddy.NewTestController("dns", "gslb "+zone+" {\n geotag eu\n fleet {\n notify_delay 10ms\n }\n}")
		g, err := parse(c)
		if err != nil {
			t.Fatal(err)
		}
		g.Next = &next{}
		st := newFakeStore(host("www."+zone, "198.18.0.1"))
		vt := &verdictTargets{}
		g.store, g.local = st, vt
		g.start()
		t.Cleanup(g.stop)
		return replica{g, st, vt}
	}
	serialOf := func(r replica) uint32 {
		if v := r.g.pub.View(); v != nil {
			return v.Serial
		}
		return 0
	}
	a := start()
	time.Sleep(200 * time.Millisecond) // three clock serials apart, and more
	b := start()
	const want = 42 << 8 // zoneSOA's serial
	for _, r := range []replica{a, b} {
		testkit.Eventually(t, 2*time.Second, "the view published", func() bool { return serialOf(r) != 0 })
	}
	if sa, sb := serialOf(a), serialOf(b); sa != want || sb != want {
		t.Fatalf("the same data: serials %d and %d, want both %d (the store's serial 42 << 8)", sa, sb, want)
	}

	// The data changes (a new object: the store's serial moves).
	for _, r := range []replica{a, b} {
		r.st.SetSOA(strings.Replace(zoneSOA, " 42 ", " 43 ", 1))
		r.st.Put(host("api."+zone, "198.18.0.2"))
	}
	for _, r := range []replica{a, b} {
		testkit.Eventually(t, 2*time.Second, "the new data's serial", func() bool { return serialOf(r) == 43<<8 })
	}

	// A health verdict, which the store's serial does not count.
	for _, r := range []replica{a, b} {
		r.vt.down.Store(true)
		r.vt.verdicts.Publish()
	}
	for _, r := range []replica{a, b} {
		testkit.Eventually(t, 2*time.Second, "one step past the data's serial", func() bool { return serialOf(r) == 43<<8+1 })
	}
}
