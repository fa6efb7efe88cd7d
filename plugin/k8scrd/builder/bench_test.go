package builder

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/tree"
	"sigs.k8s.io/external-dns/endpoint"
)

// benchObject is object i of perObject A records (host<i>-<j>.team<i%50>.example.org).
func benchObject(i, perObject int, addr string) *object.Object {
	eps := make([]*endpoint.Endpoint, perObject)
	for j := range perObject {
		eps[j] = endpoint.NewEndpoint(fmt.Sprintf("host%d-%d.team%d.example.org", i, j, i%50), "A", addr)
	}
	o, _ := object.New(object.Meta{Key: fmt.Sprintf("ns%d/obj%d", i%50, i), Namespace: fmt.Sprintf("ns%d", i%50),
		Name: fmt.Sprintf("obj%d", i), Created: time.Unix(1700000000, 0)}, eps, []string{"example.org."}, 30)
	return o
}

// BenchmarkApplySmallChange measures one batch that changes one object of
// one record, in stores of 10,000 and 100,000 records: the cost follows the
// size of the change (and the shards it touches), not the size of the store.
func BenchmarkApplySmallChange(b *testing.B) {
	for _, size := range []struct{ objects, per int }{{100, 100}, {1000, 100}} {
		b.Run(fmt.Sprintf("records=%d", size.objects*size.per), func(b *testing.B) {
			var snap atomic.Pointer[tree.Snapshot]
			bl := New(Config{Zones: []string{"example.org."}, TTL: 30, NegTTL: 30}, &snap)
			for i := range size.objects {
				bl.Upsert(benchObject(i, size.per, "10.0.0.1"))
			}
			bl.Synced()
			bl.Flush()
			small := [2]*object.Object{benchObject(size.objects+1, 1, "10.0.0.1"), benchObject(size.objects+1, 1, "10.0.0.2")}
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				o := small[i%2]
				i++
				s := bl.apply(snap.Load(), map[string]change{o.Key: {key: o.Key, obj: o}})
				snap.Store(s)
			}
		})
	}
}
