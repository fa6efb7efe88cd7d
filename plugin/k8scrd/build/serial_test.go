package k8scrd

import (
	"math"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coredns/caddy"
	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/tree"
	"github.com/miekg/dns"
	"sigs.k8s.io/external-dns/endpoint"
)

// serialBuilder is a builder over zones a.example. and b.example. fed by hand
// as the API source feeds it: objects with their resourceVersions.
func serialBuilder(t *testing.T) *builder {
	t.Helper()
	cfg := newConfig()
	cfg.zones = []string{"a.example.", "b.example."}
	return newBuilder(cfg, new(atomic.Pointer[tree.Snapshot]))
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

func zoneSerial(b *builder, zone string) uint32 {
	zd := b.snap.Load().Zones[zone]
	if zd.SOA[0].(*dns.SOA).Serial != zd.Serial {
		panic("SOA and zone serial differ")
	}
	return zd.Serial
}

func TestSerialIsHighestResourceVersionOfTheZone(t *testing.T) {
	b := serialBuilder(t)
	b.upsert(versioned(t, "ns/www", 120, "www.a.example", "192.0.2.1"))
	b.upsert(versioned(t, "ns/api", 250, "api.a.example", "192.0.2.2"))
	b.upsert(versioned(t, "ns/other", 300, "x.b.example", "192.0.2.3"))
	b.synced()
	b.flush()
	if s := zoneSerial(b, "a.example."); s != 250 {
		t.Errorf("a.example. serial %d, want 250: the highest resourceVersion of its objects", s)
	}
	if s := zoneSerial(b, "b.example."); s != 300 {
		t.Errorf("b.example. serial %d, want 300", s)
	}
	// An update moves it to the update's version; another zone's change does not.
	b.upsert(versioned(t, "ns/www", 400, "www.a.example", "192.0.2.9"))
	b.flush()
	if s := zoneSerial(b, "a.example."); s != 400 {
		t.Errorf("after an update at 400: %d", s)
	}
	if s := zoneSerial(b, "b.example."); s != 300 {
		t.Errorf("b.example. moved to %d on a change in a.example.", s)
	}
	// A deletion observed moves it to the deletion's version.
	b.removeAt("ns/api", 450)
	b.flush()
	if s := zoneSerial(b, "a.example."); s != 450 {
		t.Errorf("after a deletion at 450: %d", s)
	}
	// The same object again at the same version (a relist, a readiness
	// change of a derived object): the zone data and its serial stay.
	b.upsert(versioned(t, "ns/www", 400, "www.a.example", "192.0.2.9"))
	b.flush()
	if s := zoneSerial(b, "a.example."); s != 450 {
		t.Errorf("the same version again moved the serial to %d", s)
	}
}

func TestSerialIsTheSameForReplicasOfTheSameData(t *testing.T) {
	// One replica saw every write one by one; the other started later and
	// listed the result at once.
	one := serialBuilder(t)
	one.synced()
	for v := uint64(10); v <= 50; v += 10 {
		one.upsert(versioned(t, "ns/www", v, "www.a.example", "192.0.2.1"))
		one.flush()
	}
	one.upsert(versioned(t, "ns/api", 60, "api.a.example", "192.0.2.2"))
	one.flush()
	two := serialBuilder(t)
	two.upsert(versioned(t, "ns/api", 60, "api.a.example", "192.0.2.2"))
	two.upsert(versioned(t, "ns/www", 50, "www.a.example", "192.0.2.1"))
	two.synced()
	two.flush()
	if a, b := zoneSerial(one, "a.example."), zoneSerial(two, "a.example."); a != b || a != 60 {
		t.Errorf("replicas publish %d and %d, want both 60", a, b)
	}
}

func TestSerialWrapsInSerialArithmetic(t *testing.T) {
	b := serialBuilder(t)
	b.upsert(versioned(t, "ns/www", math.MaxUint32-10, "www.a.example", "192.0.2.1"))
	b.synced()
	b.flush()
	before := zoneSerial(b, "a.example.")
	b.upsert(versioned(t, "ns/www", math.MaxUint32+5, "www.a.example", "192.0.2.2"))
	b.flush()
	after := zoneSerial(b, "a.example.")
	if after != 4 || !serialLess(before, after) {
		t.Errorf("resourceVersion 2^32+5 after 2^32-11: serial %d after %d, want 4, greater in RFC 1982", after, before)
	}
	// A lower version (a deletion missed during a relist shows the object's
	// last version) never takes the serial back.
	b.removeAt("ns/www", math.MaxUint32-20)
	b.flush()
	if s := zoneSerial(b, "a.example."); s != 4 {
		t.Errorf("serial went back to %d", s)
	}
}

func TestSerialFromTheDirectory(t *testing.T) {
	k, dir := newTestPlugin(t, "example.org", zoneBody, nil)
	serial := func() uint32 { r, _ := ask(t, k, "example.org.", dns.TypeSOA); return r.Answer[0].(*dns.SOA).Serial }
	// The newest file time.
	at := time.Unix(1_800_000_000, 0)
	path := filepath.Join(dir, "a.yaml")
	writeAt := func(content string, mtime time.Time) {
		t.Helper()
		tmp := filepath.Join(dir, ".tmp")
		if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(tmp, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	writeAt(testkit.DNSEndpoint("ns", "a", nil, testkit.EP("a.example.org", "A", 0, "192.0.2.1")), at)
	testkit.Eventually(t, 5*time.Second, "serial is the file time", func() bool { return serial() == 1_800_000_000 })
	// A change within the same second still moves it.
	writeAt(testkit.DNSEndpoint("ns", "a", nil, testkit.EP("a.example.org", "A", 0, "192.0.2.2")), at)
	testkit.Eventually(t, 5*time.Second, "change applied", hasA(k, t, "a.example.org.", "192.0.2.2"))
	if s := serial(); s != 1_800_000_001 {
		t.Errorf("a change in the same second: serial %d, want 1800000001", s)
	}
	// An SOA at the apex in the data is the serial, as a zone file's.
	writeAt(testkit.DNSEndpoint("ns", "a", nil, testkit.EP("a.example.org", "A", 0, "192.0.2.2"),
		testkit.EP("example.org", "SOA", 0, "ns1.example.org. hostmaster.example.org. 2026120101 7200 1800 86400 10")), at.Add(time.Hour))
	testkit.Eventually(t, 5*time.Second, "serial from the data's SOA", func() bool { return serial() == 2026120101 })
	r, _ := ask(t, k, "example.org.", dns.TypeSOA)
	if soa := r.Answer[0].(*dns.SOA); soa.Ns != "ns1.example.org." || soa.Refresh != 7200 {
		t.Errorf("SOA %v: only the serial comes from the data", soa)
	}
	if r, _ := ask(t, k, "a.example.org.", dns.TypeA); len(r.Answer) != 1 {
		t.Errorf("the object's other endpoints: %v", r)
	}
}

func TestSOATimersAreSettable(t *testing.T) {
	k, _ := newTestPlugin(t, "example.org", "soa ns1.example.org hostmaster.example.org 14400 3600 1209600\nnegttl 300", nil)
	r, _ := ask(t, k, "example.org.", dns.TypeSOA)
	soa := r.Answer[0].(*dns.SOA)
	if soa.Refresh != 14400 || soa.Retry != 3600 || soa.Expire != 1209600 || soa.Minttl != 300 {
		t.Errorf("SOA %v, want refresh 14400 retry 3600 expire 1209600 minimum 300", soa)
	}
	for _, bad := range []string{
		"soa a. b. 1 2",                   // not all three
		"soa a. b. 3600 7200 1209600",     // retry above refresh
		"soa a. b. 14400 3600 7200",       // expire below refresh
		"soa a. b. 14400 3600 x",          // not a number
		"soa a. b. 0 3600 1209600",        // zero
		"soa a. b. 14400 3600 4294967295", // above 2^31-1 (RFC 2181 §8)
	} {
		c := caddy.NewTestController("dns", "k8scrd example.org {\n directory /tmp\n"+bad+"\n}")
		if _, err := parse(c); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}
