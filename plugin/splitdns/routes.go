package splitdns

import (
	"fmt"
	"sort"
	"sync/atomic"

	"github.com/miekg/dns"
)

// route is one entry of the routing table: a zone and the upstreams that
// serve it.
type route struct {
	zone      string // lower-cased, fully qualified; "." for the default route
	source    string // where the route came from: route, default, resolv, stubDomains, upstreamNameservers
	upstreams []*upstream
	policy    Policy
	counters  routeCounters

	failover  []int    // answers with these rcodes: ask the route's next upstream
	next      []int    // answers with these rcodes: ask the next-longest route
	except    []string // names in the zone left to the next-longest route
	failfast  bool     // every upstream held down: SERVFAIL at once
	forceTCP  bool
	preferUDP bool

	maxConcurrent int64        // the route's own limit on queries in flight; 0: none
	concurrent    atomic.Int64 // its queries in flight
}

// excepts reports whether name is one the route leaves to the next-longest
// route. As forward's except: the zone itself is never excepted.
func (r *route) excepts(name string) bool {
	if len(r.except) == 0 || name == r.zone {
		return false
	}
	for _, e := range r.except {
		if dns.IsSubDomain(e, name) {
			return true
		}
	}
	return false
}

// table is the routing table. It is immutable once built: an update builds a
// new table and swaps it in, so the query path takes no lock.
type table struct {
	zones     map[string]*route // keyed by lower-cased zone, without the default route
	def       *route            // the catch-all; nil when there is none
	maxLabels int               // the most labels any zone in zones has
}

func newTable() *table { return &table{zones: map[string]*route{}} }

// add puts r in the table. A later add for the same zone replaces the earlier one.
func (t *table) add(r *route) {
	if r.zone == "." {
		t.def = r
		return
	}
	t.zones[r.zone] = r
	if n := dns.CountLabel(r.zone); n > t.maxLabels {
		t.maxLabels = n
	}
}

// lookup returns the route whose zone is the longest suffix of name on a label
// boundary, or the default route, or nil. name must be lower-cased and fully
// qualified (request.Request.Name() is). The cost is one map lookup per label
// of name (at most maxLabels of them), whatever the size of the table: a name
// is matched against its own suffixes, never against the list of zones.
func (t *table) lookup(name string) *route {
	if len(t.zones) == 0 {
		return t.def
	}
	off := 0
	// Skip the labels that no zone can be long enough to cover.
	if n := dns.CountLabel(name); n > t.maxLabels {
		for i := 0; i < n-t.maxLabels; i++ {
			off, _ = dns.NextLabel(name, off)
		}
	}
	for {
		if r, ok := t.zones[name[off:]]; ok {
			return r
		}
		var end bool
		off, end = dns.NextLabel(name, off)
		if end {
			return t.def
		}
	}
}

// route returns the route for name: the longest matching zone whose route
// does not except name.
func (t *table) route(name string) *route {
	r := t.lookup(name)
	for r != nil && len(r.except) > 0 && r.excepts(name) {
		r = t.parent(r)
	}
	return r
}

// parent returns the route that takes r's names when r hands them on: the
// next-longest matching zone, finally the default route (nil after it).
func (t *table) parent(r *route) *route {
	if r.zone == "." {
		return nil
	}
	off, end := dns.NextLabel(r.zone, 0)
	if end {
		return t.def
	}
	return t.lookup(r.zone[off:])
}

// routes returns every route of the table, the default (if any) last.
func (t *table) routes() []*route {
	rs := make([]*route, 0, len(t.zones)+1)
	for _, r := range t.zones {
		rs = append(rs, r)
	}
	if t.def != nil {
		rs = append(rs, t.def)
	}
	return rs
}

// build makes a routing table from the Corefile's routes and the kube-dns
// files. Precedence: an explicit route wins over a stubDomains entry for the
// same zone; the default route is `default` if given, else kube-dns's
// upstreamNameservers, else the servers of `resolv`. Upstreams that are this
// server itself are left out and returned as errors.
func (s *SplitDNS) build(kd kubeDNS) (*table, []error) {
	t := newTable()
	var errs []error
	add := func(zone, source string, addrs []string, o routeOptions) bool {
		ups := make([]*upstream, 0, len(addrs))
		for _, a := range addrs {
			if err := s.cfg.listener.self(a); err != nil {
				errs = append(errs, fmt.Errorf("%s %s: %w", source, zone, err))
				continue
			}
			ups = append(ups, s.pool.get(a, o))
		}
		if len(ups) == 0 {
			return false
		}
		policy := newPolicy(o.policy)
		if policy == nil { // options not from a Corefile (tests)
			policy = &random{}
		}
		t.add(&route{
			zone: zone, source: source, upstreams: ups, policy: policy,
			failover: o.failover, next: o.next, except: o.except, failfast: o.failfast,
			forceTCP: o.forceTCP, preferUDP: o.preferUDP, maxConcurrent: o.maxConcurrent,
		})
		return true
	}
	// stubDomains and the default route take the block's options.
	def := s.cfg.opts

	zones := make([]string, 0, len(kd.stubDomains))
	for z := range kd.stubDomains {
		zones = append(zones, z)
	}
	sort.Strings(zones)
	for _, z := range zones {
		add(z, "stubDomains", kd.stubDomains[z], def)
	}
	for _, r := range s.cfg.routes {
		add(r.zone, "route", r.addrs, r.opts)
	}
	_ = (len(s.cfg.def) > 0 && add(".", "default", s.cfg.def, def)) ||
		(len(kd.upstreamNameservers) > 0 && add(".", "upstreamNameservers", kd.upstreamNameservers, def)) ||
		(len(s.cfg.resolv) > 0 && add(".", "resolv", s.cfg.resolv, def))
	return t, errs
}

// swap makes t the table that queries use, and drops the upstreams that no
// route uses any more (after the longest time a query can still hold them).
func (s *SplitDNS) swap(t *table) {
	s.table.Store(t)
	s.pool.retain(t, stopGrace)
	count := map[string]float64{"route": 0, "stubDomains": 0, "default": 0, "resolv": 0, "upstreamNameservers": 0}
	for _, r := range t.routes() {
		count[r.source]++
	}
	for src, n := range count {
		routesGauge.WithLabelValues(src).Set(n)
	}
}
