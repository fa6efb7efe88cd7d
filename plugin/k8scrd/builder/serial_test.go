package builder

import (
	"math"
	"sync/atomic"
	"testing"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/tree"
	"github.com/miekg/dns"
	"sigs.k8s.io/external-dns/endpoint"
)

// serialBuilder is a builder over zones a.example. and b.example. fed by hand
// as the API source feeds it: objects with their resourceVersions.
func serialBuilder(t *testing.T) *Builder {
	t.Helper()
	return New(Config{Zones: []string{"a.example.", "b.example."}, TTL: 30, NegTTL: 30}, new(atomic.Pointer[tree.Snapshot]))
}

func versioned(t *testing.T, key string, version uint64, name, addr string) *object.Object {
	t.Helper()
	o, bad := object.New(object.Meta{Key: key, Namespace: "ns", Name: key, Version: version},
		[]*endpoint.Endpoint{endpoint.NewEndpoint(name, "A", addr)}, []string{"a.example.", "b.example."}, 30)
	if len(bad) > 0 {
		t.Fatal(bad)
	}
	return o
}

func zoneSerial(b *Builder, zone string) uint32 {
	zd := b.snap.Load().Zones[zone]
	if zd.SOA[0].(*dns.SOA).Serial != zd.Serial {
		panic("SOA and zone serial differ")
	}
	return zd.Serial
}

func TestSerialIsHighestResourceVersionOfTheZone(t *testing.T) {
	b := serialBuilder(t)
	b.Upsert(versioned(t, "ns/www", 120, "www.a.example", "192.0.2.1"))
	b.Upsert(versioned(t, "ns/api", 250, "api.a.example", "192.0.2.2"))
	b.Upsert(versioned(t, "ns/other", 300, "x.b.example", "192.0.2.3"))
	b.Synced()
	b.Flush()
	if s := zoneSerial(b, "a.example."); s != 250 {
		t.Errorf("a.example. serial %d, want 250: the highest resourceVersion of its objects", s)
	}
	if s := zoneSerial(b, "b.example."); s != 300 {
		t.Errorf("b.example. serial %d, want 300", s)
	}
	// An update moves it to the update's version; another zone's change does not.
	b.Upsert(versioned(t, "ns/www", 400, "www.a.example", "192.0.2.9"))
	b.Flush()
	if s := zoneSerial(b, "a.example."); s != 400 {
		t.Errorf("after an update at 400: %d", s)
	}
	if s := zoneSerial(b, "b.example."); s != 300 {
		t.Errorf("b.example. moved to %d on a change in a.example.", s)
	}
	// A deletion observed moves it to the deletion's version.
	b.RemoveAt("ns/api", 450)
	b.Flush()
	if s := zoneSerial(b, "a.example."); s != 450 {
		t.Errorf("after a deletion at 450: %d", s)
	}
	// The same object again at the same version (a relist, a readiness
	// change of a derived object): the zone data and its serial stay.
	b.Upsert(versioned(t, "ns/www", 400, "www.a.example", "192.0.2.9"))
	b.Flush()
	if s := zoneSerial(b, "a.example."); s != 450 {
		t.Errorf("the same version again moved the serial to %d", s)
	}
}

func TestSerialIsTheSameForReplicasOfTheSameData(t *testing.T) {
	// One replica saw every write one by one; the other started later and
	// listed the result at once.
	one := serialBuilder(t)
	one.Synced()
	for v := uint64(10); v <= 50; v += 10 {
		one.Upsert(versioned(t, "ns/www", v, "www.a.example", "192.0.2.1"))
		one.Flush()
	}
	one.Upsert(versioned(t, "ns/api", 60, "api.a.example", "192.0.2.2"))
	one.Flush()
	two := serialBuilder(t)
	two.Upsert(versioned(t, "ns/api", 60, "api.a.example", "192.0.2.2"))
	two.Upsert(versioned(t, "ns/www", 50, "www.a.example", "192.0.2.1"))
	two.Synced()
	two.Flush()
	if a, b := zoneSerial(one, "a.example."), zoneSerial(two, "a.example."); a != b || a != 60 {
		t.Errorf("replicas publish %d and %d, want both 60", a, b)
	}
}

func TestSerialWrapsInSerialArithmetic(t *testing.T) {
	b := serialBuilder(t)
	b.Upsert(versioned(t, "ns/www", math.MaxUint32-10, "www.a.example", "192.0.2.1"))
	b.Synced()
	b.Flush()
	before := zoneSerial(b, "a.example.")
	b.Upsert(versioned(t, "ns/www", math.MaxUint32+5, "www.a.example", "192.0.2.2"))
	b.Flush()
	after := zoneSerial(b, "a.example.")
	if after != 4 || !serialLess(before, after) {
		t.Errorf("resourceVersion 2^32+5 after 2^32-11: serial %d after %d, want 4, greater in RFC 1982", after, before)
	}
	// A lower version (a deletion missed during a relist shows the object's
	// last version) never takes the serial back.
	b.RemoveAt("ns/www", math.MaxUint32-20)
	b.Flush()
	if s := zoneSerial(b, "a.example."); s != 4 {
		t.Errorf("serial went back to %d", s)
	}
}
