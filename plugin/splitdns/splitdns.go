// Package splitdns routes queries to per-zone upstreams from one server
// block: the longest zone that is a suffix of the name on a label boundary
// wins, everything else goes to the default upstreams.
package splitdns

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/metrics"
	clog "github.com/coredns/coredns/plugin/pkg/log"
	"github.com/coredns/coredns/plugin/pkg/proxy"
	"github.com/coredns/coredns/request"

	"github.com/miekg/dns"
	"golang.org/x/sync/singleflight"
)

var log = clog.NewWithPlugin("splitdns")

// SplitDNS is the plugin: a routing table of zones to upstreams.
type SplitDNS struct {
	Next plugin.Handler

	table   atomic.Pointer[table] // swapped whole when kube-dns files change
	pool    *pool
	flights singleflight.Group // identical queries in flight, see loop.go
	cfg     config

	// maxConcurrent is the block's max_concurrent: one limit on the queries
	// in flight through every route together; 0 is none.
	maxConcurrent int64
	concurrent    atomic.Int64

	stop chan struct{}
}

// Name implements plugin.Handler.
func (s *SplitDNS) Name() string { return "splitdns" }

// ServeDNS implements plugin.Handler.
func (s *SplitDNS) ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	state := request.Request{W: w, Req: r}
	t := s.table.Load()
	rt := t.route(state.Name())
	if rt == nil {
		return plugin.NextOrFailure(s.Name(), s.Next, ctx, w, r)
	}

	server := metrics.WithServer(ctx)
	rm := rt.counters.get(server, rt.zone)
	rm.requests.Inc()
	// max_concurrent, as forward: a query beyond the limit is REFUSED at
	// once; it counts against the block's limit and its route's.
	if s.maxConcurrent > 0 {
		n := s.concurrent.Add(1)
		defer s.concurrent.Add(-1)
		if n > s.maxConcurrent {
			return s.refuse(rm, server, rt, s.maxConcurrent)
		}
	}
	if rt.maxConcurrent > 0 {
		n := rt.concurrent.Add(1)
		defer rt.concurrent.Add(-1)
		if n > rt.maxConcurrent {
			return s.refuse(rm, server, rt, rt.maxConcurrent)
		}
	}
	if looped(r) {
		loopCount.WithLabelValues(server).Inc()
		rm.response(server, rt.zone, dns.RcodeServerFailure)
		return dns.RcodeServerFailure, errLoop
	}

	led, ret, err := s.fly(ctx, state, t, rt, rm, server)
	if !led {
		rm.coalesced.Inc()
	}
	if err != nil {
		rm.response(server, rt.zone, dns.RcodeServerFailure)
		if led && errors.Is(err, proxy.ErrInvalidRequest) {
			return dns.RcodeFormatError, err
		}
		return dns.RcodeServerFailure, err
	}
	w.WriteMsg(ret)
	rm.response(server, rt.zone, ret.Rcode)
	return 0, nil
}

// refuse answers a query beyond a max_concurrent limit: REFUSED, written by
// the server as forward's is.
func (s *SplitDNS) refuse(rm *routeMetrics, server string, rt *route, limit int64) (int, error) {
	rm.rejected.Inc()
	rm.response(server, rt.zone, dns.RcodeRefused)
	return dns.RcodeRefused, fmt.Errorf("%w %d", errLimitExceeded, limit)
}

// fly forwards the query, or waits for the answer of an identical query in
// flight (see loop.go); led says which. The answer is the caller's own to
// change.
func (s *SplitDNS) fly(ctx context.Context, state request.Request, t *table, rt *route, rm *routeMetrics, server string) (led bool, ret *dns.Msg, err error) {
	var panicked any
	v, err, shared := s.flights.Do(newFlightKey(state), func() (_ any, err error) {
		led = true
		defer func() {
			// The leader's panic is its own: waiters get an error, where
			// singleflight would hand each of them the panic.
			if p := recover(); p != nil {
				panicked, err = p, errNoUpstream
			}
		}()
		return s.lead(ctx, state, t, rt, rm, server)
	})
	if panicked != nil {
		panic(panicked)
	}
	if err != nil {
		return led, nil, err
	}
	ret = v.(*dns.Msg)
	switch {
	case !led:
		ret = answerFor(ret, state.Req)
	case shared:
		// Waiters copy ret as the leader hands it to its client, which
		// may change it: the leader takes a copy too.
		ret = ret.Copy()
	}
	return led, ret, nil
}

// lead forwards the query for itself and for identical queries waiting on
// it: to rt, and while the answer's rcode is one of the route's `next`
// rcodes, to the next-longest matching route, finally the default route.
// One function, not a loop around a helper: every frame on this path is
// walked again when miekg/dns's small per-query goroutine stack grows.
func (s *SplitDNS) lead(ctx context.Context, state request.Request, t *table, rt *route, rm *routeMetrics, server string) (*dns.Msg, error) {
	r := state.Req
	state.Size() // before mark, so the client's own buffer size is remembered
	for {
		var m marked
		if r.IsTsig() == nil { // a marker after the TSIG record would break the signature (RFC 8945 §5.1)
			m = mark(r)
		}
		ret, err := s.forward(ctx, state, rt, rm)
		m.unmark(r)
		if err == nil && ret.Rcode == dns.RcodeFormatError && m.addedOPT {
			// An upstream without EDNS may refuse the OPT record that only the
			// marker needed: ask again as the client asked (RFC 6891 §7).
			m = marked{}
			ret, err = s.forward(ctx, state, rt, rm)
		}
		if err != nil {
			return nil, err
		}
		m.unmarkReply(ret)
		if !state.Match(ret) {
			formerr := new(dns.Msg)
			formerr.SetRcode(r, dns.RcodeFormatError)
			return formerr, nil
		}
		if len(rt.next) == 0 || !slices.Contains(rt.next, ret.Rcode) {
			return ret, nil
		}
		parent := t.parent(rt)
		if parent == nil {
			return ret, nil
		}
		rm.next.Inc()
		rt = parent
		rm = rt.counters.get(server, rt.zone)
	}
}

// forward sends the query to the route's upstreams in policy order, skipping
// those that health checks hold down. An answer whose rcode is one of the
// route's failover rcodes makes the next upstream be asked, as in forward,
// and the last such answer is the one returned when no upstream does
// better. When every upstream is held down, it tries one anyway, as forward
// does, in case health checking itself is broken; with
// failfast_all_unhealthy_upstreams it answers SERVFAIL at once instead.
func (s *SplitDNS) forward(ctx context.Context, state request.Request, rt *route, rm *routeMetrics) (*dns.Msg, error) {
	list := rt.policy.List(rt.upstreams)
	opts := proxy.Options{ForceTCP: rt.forceTCP, PreferUDP: rt.preferUDP}
	err := errNoUpstream
	var failedOver *dns.Msg
	tried, failovers := 0, 0
	for pass := 0; pass < 2 && tried == 0; pass++ {
		if pass == 1 {
			rm.allDown.Inc()
			if rt.failfast {
				return nil, errNoHealthy
			}
		}
		for _, u := range list {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if u.down() != (pass == 1) {
				continue
			}
			tried++
			var ret *dns.Msg
			ret, err = s.exchange(ctx, state, u, opts, rm)
			if err == nil {
				if !u.answered.Load() { // read first: no write to a shared cache line per query
					u.answered.Store(true)
				}
				if len(rt.failover) > 0 && slices.Contains(rt.failover, ret.Rcode) {
					failovers++
					if failovers < len(rt.upstreams) {
						rm.failover.Inc()
						failedOver = ret
						continue
					}
				}
				return ret, nil
			}
			if errors.Is(err, proxy.ErrInvalidRequest) {
				return nil, err
			}
			if u.maxFails != 0 { // as forward: max_fails 0 never holds an upstream down
				u.proxy.Healthcheck()
			}
			if pass == 1 {
				break
			}
		}
	}
	if failedOver != nil {
		return failedOver, nil
	}
	return nil, err
}

// exchange asks one upstream over the client's transport; a truncated UDP
// answer is asked again over TCP, and then cut to fit the client's buffer.
func (s *SplitDNS) exchange(ctx context.Context, state request.Request, u *upstream, opts proxy.Options, rm *routeMetrics) (*dns.Msg, error) {
	for range 3 {
		ret, _, proto, err := u.proxy.Connect(ctx, state, opts)
		if errors.Is(err, proxy.ErrCachedClosed) {
			continue // the upstream closed a cached connection before the query went out
		}
		if err != nil {
			return nil, err
		}
		if ret.Truncated && proto == "udp" && !opts.ForceTCP {
			rm.tcpRetry.Inc()
			opts.ForceTCP = true
			continue
		}
		if opts.ForceTCP && state.Proto() == "udp" {
			state.Scrub(ret)
		}
		return ret, nil
	}
	return nil, proxy.ErrCachedClosed
}

var (
	errLoop       = errors.New("query looped back to this server (splitdns marker seen)")
	errNoUpstream = errors.New("no upstream answered")
	errNoHealthy  = errors.New("every upstream of the route is held down (failfast_all_unhealthy_upstreams)")
	// errLimitExceeded is forward's ErrLimitExceeded.
	errLimitExceeded = errors.New("concurrent queries exceeded maximum")
)
