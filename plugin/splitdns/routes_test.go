package splitdns

import (
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/coredns/coredns/plugin/test"
	"github.com/coredns/coredns/request"

	"github.com/miekg/dns"
	"golang.org/x/sync/singleflight"
)

func testTable(zones ...string) *table {
	t := newTable()
	for _, z := range zones {
		t.add(&route{zone: z, source: "route"})
	}
	return t
}

func TestLongestSuffixOnLabelBoundaries(t *testing.T) {
	tbl := testTable("acme.internal.", "svc.acme.internal.", "a.b.c.d.e.f.")
	tbl.add(&route{zone: ".", source: "default"})
	tests := []struct {
		qname string
		want  string
	}{
		{"db.svc.acme.internal.", "svc.acme.internal."},
		{"svc.acme.internal.", "svc.acme.internal."}, // the apex is in the zone
		{"x.y.svc.acme.internal.", "svc.acme.internal."},
		{"xsvc.acme.internal.", "acme.internal."}, // not a label boundary
		{"svc.acme.internal.example.net.", "."},   // zone as a prefix, not a suffix
		{"acme.internal.", "acme.internal."},
		{"internal.", "."},
		{"cme.internal.", "."},
		{".", "."},
		{"z.a.b.c.d.e.f.", "a.b.c.d.e.f."},
		{"b.c.d.e.f.", "."},
		{`weird\.svc.acme.internal.`, "acme.internal."}, // an escaped dot is not a label boundary
	}
	for _, tc := range tests {
		r := tbl.lookup(tc.qname)
		if r == nil || r.zone != tc.want {
			got := "<nil>"
			if r != nil {
				got = r.zone
			}
			t.Errorf("lookup(%q) = %s, want %s", tc.qname, got, tc.want)
		}
	}
}

func TestNoDefaultRouteFallsThrough(t *testing.T) {
	tbl := testTable("acme.internal.")
	if r := tbl.lookup("example.com."); r != nil {
		t.Errorf("lookup(example.com.) = %s, want no route", r.zone)
	}
	if r := newTable().lookup("example.com."); r != nil {
		t.Errorf("empty table routed example.com. to %s", r.zone)
	}
}

// tableOf returns a table of n routes zone-0.corp. ... plus a default.
func tableOf(n int) *table {
	tbl := newTable()
	for i := range n {
		tbl.add(&route{zone: fmt.Sprintf("zone-%d.corp.", i)})
	}
	tbl.add(&route{zone: "."})
	return tbl
}

func TestLookupInLargeTable(t *testing.T) {
	tbl := tableOf(1000)
	if r := tbl.lookup("db.svc.zone-999.corp."); r == nil || r.zone != "zone-999.corp." {
		t.Errorf("want zone-999.corp.")
	}
	if r := tbl.lookup("zone-1000.corp."); r == nil || r.zone != "." {
		t.Errorf("want the default route")
	}
}

func BenchmarkLookup(b *testing.B) {
	names := map[string]string{
		"routed":  "db.svc.zone-0.corp.",
		"default": "www.example.com.",
		"long":    strings.Repeat("l.", 20) + "zone-0.corp.",
	}
	for _, n := range []int{1, 1000, 100000} {
		tbl := tableOf(n)
		for what, name := range names {
			b.Run(fmt.Sprintf("routes=%d/%s", n, what), func(b *testing.B) {
				b.ReportAllocs()
				cpu0 := cpuTime()
				defer func() { b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op") }()
				for b.Loop() {
					if tbl.lookup(name) == nil {
						b.Fatal("no route")
					}
				}
			})
		}
	}
}

// BenchmarkQueryPathWithoutUpstream is everything ServeDNS does around the
// upstream exchange (route lookup, counters, loop check, in-flight set,
// marker on and off), for query names spread over 1000 zones, with 1 and
// with 1000 routes.
func BenchmarkQueryPathWithoutUpstream(b *testing.B) {
	names := make([]*dns.Msg, 1000)
	for i := range names {
		names[i] = new(dns.Msg)
		names[i].SetQuestion(fmt.Sprintf("host-%d.svc.zone-%d.corp.", i, i), dns.TypeA)
	}
	reply := new(dns.Msg)
	for _, n := range []int{1, 1000} {
		tbl := tableOf(n)
		var fs singleflight.Group
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			// On a shared machine wall time per op includes time the
			// process waited for a CPU; CPU time per op does not.
			cpu0 := cpuTime()
			defer func() { b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op") }()
			i := 0
			for b.Loop() {
				r := names[i%len(names)]
				i++
				state := request.Request{Req: r, W: &test.ResponseWriter{}}
				rt := tbl.lookup(state.Name())
				rm := rt.counters.get("dns://:53", rt.zone)
				rm.requests.Inc()
				if looped(r) {
					b.Fatal("looped")
				}
				fs.Do(newFlightKey(state), func() (any, error) {
					m := mark(r)
					m.unmark(r)
					m.unmarkReply(reply)
					return reply, nil
				})
				rm.response("dns://:53", rt.zone, dns.RcodeSuccess)
			}
		})
	}
}

// cpuTime is this process's user and system CPU time in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
