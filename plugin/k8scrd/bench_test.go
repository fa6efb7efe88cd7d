package k8scrd

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
	"sigs.k8s.io/external-dns/endpoint"
)

// benchPlugin builds a synced k8scrd holding objects x perObject A records
// (host<i>-<j>.example.org) without any source: the builder applies them directly.
func benchPlugin(tb testing.TB, objects, perObject int) *K8sCRD {
	cfg := newConfig()
	cfg.zones = []string{"example.org."}
	k := &K8sCRD{cfg: cfg, Zones: cfg.zones}
	k.builder = newBuilder(cfg, &k.snap)
	batch := map[string]change{}
	for i := range objects {
		o := benchObject(cfg, i, perObject, "10.0.0.1")
		batch[o.key] = change{key: o.key, obj: o}
	}
	s := k.builder.apply(k.snap.Load(), batch)
	s.synced = true
	k.snap.Store(s)
	return k
}

func benchObject(cfg *config, i, perObject int, addr string) *object {
	eps := make([]*endpoint.Endpoint, perObject)
	for j := range perObject {
		eps[j] = endpoint.NewEndpoint(fmt.Sprintf("host%d-%d.team%d.example.org", i, j, i%50), "A", addr)
	}
	o, _ := newObject(objectMeta{key: fmt.Sprintf("ns%d/obj%d", i%50, i), namespace: fmt.Sprintf("ns%d", i%50),
		name: fmt.Sprintf("obj%d", i), created: time.Unix(1700000000, 0)}, eps, cfg.zones, cfg.ttl)
	return o
}

// packWriter packs every reply, as the server would before sending it.
type packWriter struct {
	test.ResponseWriter
	buf []byte
}

func (w *packWriter) WriteMsg(m *dns.Msg) error {
	var err error
	w.buf, err = m.PackBuffer(w.buf[:0])
	return err
}

func BenchmarkServeDNS(b *testing.B) {
	k := benchPlugin(b, 100, 100) // 10,000 names
	for _, q := range []struct {
		name  string
		qname string
		qtype uint16
	}{
		{"Answer", "host42-7.team42.example.org.", dns.TypeA},
		{"NoData", "host42-7.team42.example.org.", dns.TypeAAAA},
		{"EmptyNonTerminal", "team42.example.org.", dns.TypeA},
		{"NXDOMAIN", "nothere.team42.example.org.", dns.TypeA},
		{"ApexSOA", "example.org.", dns.TypeSOA},
	} {
		b.Run(q.name, func(b *testing.B) {
			m := new(dns.Msg)
			m.SetQuestion(q.qname, q.qtype)
			w := &packWriter{buf: make([]byte, 0, 512)}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				k.ServeDNS(ctx, w, m)
			}
		})
	}
}

// BenchmarkApplySmallChange measures one batch that changes one object of
// one record, in stores of 10,000 and 100,000 records: the cost follows the
// size of the change (and the shards it touches), not the size of the store.
func BenchmarkApplySmallChange(b *testing.B) {
	for _, size := range []struct{ objects, per int }{{100, 100}, {1000, 100}} {
		b.Run(fmt.Sprintf("records=%d", size.objects*size.per), func(b *testing.B) {
			k := benchPlugin(b, size.objects, size.per)
			cfg := k.cfg
			small := [2]*object{benchObject(cfg, size.objects+1, 1, "10.0.0.1"), benchObject(cfg, size.objects+1, 1, "10.0.0.2")}
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				o := small[i%2]
				i++
				s := k.builder.apply(k.snap.Load(), map[string]change{o.key: {key: o.key, obj: o}})
				k.snap.Store(s)
			}
		})
	}
}
