package kubefeed

import (
	"fmt"
	"testing"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/derive"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// countingIndexer counts the objects its listings hand out: what a caller
// visits.
type countingIndexer struct {
	cache.Indexer
	visited int
}

func (c *countingIndexer) List() []any {
	l := c.Indexer.List()
	c.visited += len(l)
	return l
}

func (c *countingIndexer) ByIndex(name, value string) ([]any, error) {
	l, err := c.Indexer.ByIndex(name, value)
	c.visited += len(l)
	return l, err
}

type countingInformer struct {
	cache.SharedIndexInformer
	idx *countingIndexer
}

func (i *countingInformer) GetIndexer() cache.Indexer { return i.idx }

// selectorCluster is a cluster whose Service informer (all namespaces,
// indexers as given) holds perNS Services in each of nss namespaces.
func selectorCluster(tb testing.TB, indexers cache.Indexers, nss, perNS int) (*cluster, *countingIndexer) {
	tb.Helper()
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &corev1.Service{}, 0, indexers)
	for n := range nss {
		for i := range perNS {
			s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("team-%d", n), Name: fmt.Sprintf("svc-%d", i),
				Labels: map[string]string{"app": fmt.Sprintf("app-%d", i)}}}
			if err := inf.GetIndexer().Add(s); err != nil {
				tb.Fatal(err)
			}
		}
	}
	ci := &countingIndexer{Indexer: inf.GetIndexer()}
	c := &cluster{cfg: &Config{Options: derive.Options{Zones: []string{"example.org.", "shop.test."}}}, kinds: map[string]*watched{
		object.KindService: {byNS: map[string]cache.SharedIndexInformer{metav1.NamespaceAll: &countingInformer{inf, ci}}},
	}}
	c.cfg.Resources = []string{object.KindGslb}
	return c, ci
}

// Issue 24, finding 11: a Gslb's label selector listed every Service of
// the cluster to keep its namespace's; with the namespace index it visits
// its namespace's only.
func TestGslbSelectorListsOneNamespace(t *testing.T) {
	c := &cluster{cfg: &Config{Options: derive.Options{Zones: []string{"example.org.", "shop.test."}}}}
	c.cfg.Resources = []string{object.KindGslb}
	c, idx := selectorCluster(t, c.gslbIndexers(object.KindService, nil), 500, 20)

	got := c.Objects(object.KindService, "team-7")
	if len(got) != 20 {
		t.Fatalf("objects: %d Services, want team-7's 20", len(got))
	}
	for _, o := range got {
		if ns := o.(*corev1.Service).Namespace; ns != "team-7" {
			t.Fatalf("objects: a Service of %s", ns)
		}
	}
	if idx.visited != 20 {
		t.Errorf("visited %d Services of 10000 for team-7's 20, want 20", idx.visited)
	}

	// Without the Gslb source nothing lists by namespace: no index kept.
	plain := &cluster{cfg: &Config{Options: derive.Options{Zones: []string{"example.org.", "shop.test."}}}}
	if _, ok := plain.gslbIndexers(object.KindService, nil)[cache.NamespaceIndex]; ok {
		t.Error("namespace index kept without the Gslb source")
	}
}

// BenchmarkGslbSelectorListing is one Gslb's selector listing among 500
// namespaces of 20 Services: "scan" is the listing without the namespace
// index (as before), "index" with it.
func BenchmarkGslbSelectorListing(b *testing.B) {
	base := &cluster{cfg: &Config{Options: derive.Options{Zones: []string{"example.org.", "shop.test."}}}}
	base.cfg.Resources = []string{object.KindGslb}
	for _, bc := range []struct {
		name     string
		indexers cache.Indexers
	}{
		{"scan", cache.Indexers{}},
		{"index", base.gslbIndexers(object.KindService, nil)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c, idx := selectorCluster(b, bc.indexers, 500, 20)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if len(c.Objects(object.KindService, "team-7")) != 20 {
					b.Fatal("wrong listing")
				}
			}
			b.ReportMetric(float64(idx.visited)/float64(b.N), "visited/op")
		})
	}
}
