package k8scrd

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/coredns/coredns/plugin/test"
	"github.com/coredns/coredns/request"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/builder"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"
	"github.com/miekg/dns"
	"sigs.k8s.io/external-dns/endpoint"
)

// benchPlugin builds a synced k8scrd holding objects x perObject A records
// (host<i>-<j>.example.org) without any source: the builder applies them directly.
func benchPlugin(tb testing.TB, objects, perObject int) *K8sCRD {
	cfg := newConfig()
	cfg.Zones = []string{"example.org."}
	k := &K8sCRD{cfg: cfg, Zones: cfg.Zones}
	k.builder = builder.New(cfg.buildConfig(), &k.snap)
	for i := range objects {
		k.builder.Upsert(benchObject(cfg, i, perObject, "10.0.0.1"))
	}
	k.builder.Synced()
	k.builder.Flush()
	return k
}

func benchObject(cfg *config, i, perObject int, addr string) *object.Object {
	eps := make([]*endpoint.Endpoint, perObject)
	for j := range perObject {
		eps[j] = endpoint.NewEndpoint(fmt.Sprintf("host%d-%d.team%d.example.org", i, j, i%50), "A", addr)
	}
	o, _ := object.New(object.Meta{Key: fmt.Sprintf("ns%d/obj%d", i%50, i), Namespace: fmt.Sprintf("ns%d", i%50),
		Name: fmt.Sprintf("obj%d", i), Created: time.Unix(1700000000, 0)}, eps, cfg.Zones, cfg.ttl)
	return o
}

// packWriter packs every reply into a new buffer, as miekg/dns's server does
// before sending it.
type packWriter struct {
	test.ResponseWriter
	buf []byte
}

func (w *packWriter) WriteMsg(m *dns.Msg) error {
	var err error
	w.buf, err = m.Pack()
	return err
}

// benchSizes are the store sizes the serving benchmarks compare: names held,
// as objects of 100 A endpoints each.
var benchSizes = []int{1000, 10000, 100000}

// queries is one query per name of a store, in wire format, in a random
// order (fixed seed): a uniformly drawn name per query, as dnsperf sends from
// a real query file, rather than one name that stays in the CPU caches. They
// are held in two flat buffers without pointers, so that holding 100,000 of
// them adds nothing for the GC to scan and nothing to the store's misses.
type queries struct {
	wire []byte
	off  []int32 // query i is wire[off[i]:off[i+1]]
}

func benchQueries(objects int, qtype uint16, name func(i, j int) string) *queries {
	var names []string
	for i := range objects {
		for j := range 100 {
			names = append(names, name(i, j))
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	r.Shuffle(len(names), func(a, b int) { names[a], names[b] = names[b], names[a] })
	q := &queries{off: []int32{0}}
	m := new(dns.Msg)
	for _, n := range names {
		m.SetQuestion(n, qtype)
		b, err := m.Pack()
		if err != nil {
			panic(err)
		}
		q.wire = append(q.wire, b...)
		q.off = append(q.off, int32(len(q.wire)))
	}
	return q
}

func (q *queries) len() int        { return len(q.off) - 1 }
func (q *queries) at(i int) []byte { return q.wire[q.off[i]:q.off[i+1]] }

// benchKinds are the answers the serving benchmarks ask for.
var benchKinds = []struct {
	name  string
	qtype uint16
	qname func(i, j int) string
}{
	{"Answer", dns.TypeA, func(i, j int) string { return fmt.Sprintf("host%d-%d.team%d.example.org.", i, j, i%50) }},
	{"NODATA", dns.TypeAAAA, func(i, j int) string { return fmt.Sprintf("host%d-%d.team%d.example.org.", i, j, i%50) }},
	{"NXDOMAIN", dns.TypeA, func(i, j int) string { return fmt.Sprintf("none%d-%d.team%d.example.org.", i, j, i%50) }},
}

// BenchmarkServeDNS measures the whole query path at 1,000, 10,000 and
// 100,000 names, as the server runs it: unpack the query into a new message,
// ServeDNS, CoreDNS's ScrubWriter, pack the reply into a new buffer. Each
// iteration asks for the next of all the store's names in a random order.
// Run it with -cpu 1 to see what a server on one CPU sees (the GC's marking
// then runs on the serving CPU), and compare the sizes with benchstat -col /names.
func BenchmarkServeDNS(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("names=%d", size), func(b *testing.B) {
			k := benchPlugin(b, size/100, 100)
			ctx := context.Background()
			serve := func(b *testing.B, q *queries) {
				pw := &packWriter{}
				runtime.GC()
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					m := new(dns.Msg)
					if err := m.Unpack(q.at(i)); err != nil {
						b.Fatal(err)
					}
					if i++; i == q.len() {
						i = 0
					}
					k.ServeDNS(ctx, request.NewScrubWriter(m, pw), m)
				}
			}
			for _, kind := range benchKinds {
				b.Run(kind.name, func(b *testing.B) { serve(b, benchQueries(size/100, kind.qtype, kind.qname)) })
			}
			// A name that stays in the caches, and the other shapes of answer.
			for _, q := range []struct {
				name  string
				qname string
				qtype uint16
			}{
				{"HotAnswer", "host4-7.team4.example.org.", dns.TypeA},
				{"EmptyNonTerminal", "team4.example.org.", dns.TypeA},
				{"ApexSOA", "example.org.", dns.TypeSOA},
			} {
				b.Run(q.name, func(b *testing.B) {
					serve(b, benchQueries(1, q.qtype, func(int, int) string { return q.qname }))
				})
			}
		})
	}
}

// BenchmarkLookup measures the store lookup alone (no message, no packing),
// with the same sizes and queries as BenchmarkServeDNS.
func BenchmarkLookup(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("names=%d", size), func(b *testing.B) {
			k := benchPlugin(b, size/100, 100)
			s := k.snap.Load()
			z := s.Zones["example.org."]
			for _, kind := range benchKinds {
				b.Run(kind.name, func(b *testing.B) {
					// The names in query order in one string, read in sequence
					// as a server reads each name from the packet just received.
					q := benchQueries(size/100, kind.qtype, kind.qname)
					var all strings.Builder
					off := []int{0}
					for i := range q.len() {
						m := new(dns.Msg)
						if err := m.Unpack(q.at(i)); err != nil {
							b.Fatal(err)
						}
						all.WriteString(m.Question[0].Name)
						off = append(off, all.Len())
					}
					names := all.String()
					runtime.GC()
					b.ReportAllocs()
					i := 0
					for b.Loop() {
						name := names[off[i]:off[i+1]]
						if i++; i == len(off)-1 {
							i = 0
						}
						s.Lookup(z, name, kind.qtype)
					}
				})
			}
		})
	}
}

// BenchmarkStoreGC measures one full garbage collection with a store of
// 1,000, 10,000 and 100,000 names live: the marking work that every GC cycle
// of a serving process does for the store, and that the queries' allocations
// pay for. It grows with the number of heap objects the store is made of.
func BenchmarkStoreGC(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("names=%d", size), func(b *testing.B) {
			k := benchPlugin(b, size/100, 100)
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			for b.Loop() {
				runtime.GC()
			}
			b.ReportMetric(float64(ms.HeapObjects)/float64(size), "objects/name")
			runtime.KeepAlive(k)
		})
	}
}
