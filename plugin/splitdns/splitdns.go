// Package splitdns routes queries to per-zone upstreams from one server
// block: the longest zone that is a suffix of the name on a label boundary
// wins, everything else goes to the default upstreams.
package splitdns

import (
	"context"
	"errors"
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

	maxfails uint32
	stop     chan struct{}
}

// Name implements plugin.Handler.
func (s *SplitDNS) Name() string { return "splitdns" }

// ServeDNS implements plugin.Handler.
func (s *SplitDNS) ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	state := request.Request{W: w, Req: r}
	rt := s.table.Load().lookup(state.Name())
	if rt == nil {
		return plugin.NextOrFailure(s.Name(), s.Next, ctx, w, r)
	}

	server := metrics.WithServer(ctx)
	rm := rt.counters.get(server, rt.zone)
	rm.requests.Inc()
	if looped(r) {
		loopCount.WithLabelValues(server).Inc()
		rm.response(server, rt.zone, dns.RcodeServerFailure)
		return dns.RcodeServerFailure, errLoop
	}

	led, ret, err := s.fly(ctx, state, rt, rm)
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

// fly forwards the query, or waits for the answer of an identical query in
// flight (see loop.go); led says which. The answer is the caller's own to
// change.
func (s *SplitDNS) fly(ctx context.Context, state request.Request, rt *route, rm *routeMetrics) (led bool, ret *dns.Msg, err error) {
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
		return s.lead(ctx, state, rt, rm)
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

// lead forwards the query for itself and for identical queries waiting on it.
func (s *SplitDNS) lead(ctx context.Context, state request.Request, rt *route, rm *routeMetrics) (*dns.Msg, error) {
	r := state.Req
	state.Size() // before mark, so the client's own buffer size is remembered
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
	return ret, nil
}

// forward sends the query to the route's upstreams in policy order, skipping
// those that health checks hold down; when all are down it tries the first
// one anyway, as forward does, in case health checking itself is broken.
func (s *SplitDNS) forward(ctx context.Context, state request.Request, rt *route, rm *routeMetrics) (*dns.Msg, error) {
	list := rt.policy.List(rt.upstreams)
	err := errNoUpstream
	tried := 0
	for pass := 0; pass < 2 && tried == 0; pass++ {
		for _, u := range list {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if u.proxy.Down(s.maxfails) != (pass == 1) {
				continue
			}
			tried++
			var ret *dns.Msg
			ret, err = s.exchange(ctx, state, u, rm)
			if err == nil {
				if !u.answered.Load() { // read first: no write to a shared cache line per query
					u.answered.Store(true)
				}
				return ret, nil
			}
			if errors.Is(err, proxy.ErrInvalidRequest) {
				return nil, err
			}
			u.proxy.Healthcheck()
			if pass == 1 {
				break
			}
		}
	}
	return nil, err
}

// exchange asks one upstream over the client's transport; a truncated UDP
// answer is asked again over TCP, and then cut to fit the client's buffer.
func (s *SplitDNS) exchange(ctx context.Context, state request.Request, u *upstream, rm *routeMetrics) (*dns.Msg, error) {
	opts := proxy.Options{}
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
)
