// Package gslb answers A and AAAA queries of GSLB hosts with a set assembled
// at query time from this cluster's targets and its peers' localtargets
// answers, under the host's strategy.
package gslb

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coredns/coredns/plugin"
	clog "github.com/coredns/coredns/plugin/pkg/log"
	"github.com/coredns/coredns/request"
	"github.com/fleetdns/fleetdns/internal/dnsutil"
	"github.com/fleetdns/fleetdns/internal/store"
	"github.com/fleetdns/fleetdns/plugin/gslb/fleet"

	"github.com/miekg/dns"
	"golang.org/x/sync/singleflight"
)

const pluginName = "gslb"

// Defaults of max_targets and max_peers.
const (
	defaultMaxTargets = 64
	defaultMaxPeers   = 64
)

var log = clog.NewWithPlugin(pluginName)

// GSLB is the gslb plugin: one GSLB zone.
type GSLB struct {
	Next plugin.Handler

	zone       string // lower-case, fully qualified
	geotag     string
	prefix     string // localtargets- prefix peers answer
	prefixSet  bool   // given in the Corefile, else localtargets' own
	defaults   policy
	geo        *geoResolver
	timeout    time.Duration
	refresh    time.Duration
	floor      time.Duration // no answer is refreshed more often
	tick       time.Duration // how often the peer loops look for due answers
	splitBrain time.Duration
	explain    []netip.Prefix
	static     map[string][]string // tag -> host:port
	maxTargets int                 // targets in one answer
	maxPeers   int                 // peers taken from the parent
	disc       *discovery
	deleg      *delegationPublisher // publish_delegation (delegation.go)
	ns         *nsPattern
	wit        *witnessConfig // never nil; off with `witness off`

	// The fleet protocol (fleet.go): nil fl is a gslb without it.
	fl        *fleetConfig
	pub       *fleet.Publisher
	fleetZone string // _fleet.<zone>
	fleetIdx  atomic.Pointer[fleetIndex]
	indexMu   sync.Mutex // serializes reindex
	peerAddrs atomic.Pointer[peerAddrIndex]
	refusedMu sync.Mutex
	refused   map[netip.Addr]struct{} // senders of refused NOTIFYs, logged once

	store store.Store
	local store.Targets

	peers    atomic.Pointer[peerSet]
	peersMu  sync.Mutex               // serializes peer set changes
	declared atomic.Pointer[[]string] // GSLB hosts of the zone, sorted, from the last walk
	walked   atomic.Bool
	ready    atomic.Bool
	flight   singleflight.Group
	badPol   sync.Map // host -> property values last logged as invalid
	// cnameBeside holds the hosts whose all-down CNAME their other data
	// refuses, as of the last walk: logged once each (no more than the
	// store's hosts).
	besideMu    sync.Mutex
	cnameBeside map[string]struct{}

	// policies caches the parsed policy of hosts with GSLB properties,
	// keyed by the store's immutable *store.Host.
	policies    atomic.Pointer[sync.Map]
	policyCount atomic.Int64
	answerCount answerCounters
	stepCount   stepCounters

	// unions holds the prepared union of every tag's targets of the hosts
	// whose targets do not fit in one answer (unionOf), by name; rotation
	// moves the window of such answers.
	unions   sync.Map
	rotation atomic.Uint64

	ctx    context.Context
	cancel context.CancelFunc
	now    func() time.Time
}

// peerSet is the immutable set of peers, in tag order.
type peerSet struct {
	list  []*peer
	byTag map[string]*peer
}

// New returns a GSLB with the defaults of every setting.
func New(zone string) *GSLB {
	g := &GSLB{
		zone:       zone,
		prefix:     store.DefaultPrefix,
		defaults:   policy{strategy: roundRobin, ttl: 30},
		timeout:    time.Second,
		refresh:    30 * time.Second,
		splitBrain: 60 * time.Second,
		explain:    []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")},
		static:     map[string][]string{},
		maxTargets: defaultMaxTargets,
		maxPeers:   defaultMaxPeers,
		wit:        &witnessConfig{},
		now:        time.Now,
	}
	g.peers.Store(&peerSet{byTag: map[string]*peer{}})
	g.fleetZone = fleet.Name(zone)
	g.fleetIdx.Store(emptyIndex)
	g.peerAddrs.Store(&peerAddrIndex{})
	g.refused = map[netip.Addr]struct{}{}
	g.policies.Store(&sync.Map{})
	g.answerCount = newAnswerCounters(zone)
	g.stepCount = newStepCounters(zone)
	return g
}

// Name implements plugin.Handler.
func (g *GSLB) Name() string { return pluginName }

// ServeDNS implements plugin.Handler.
func (g *GSLB) ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	state := request.Request{W: w, Req: r}
	qname := state.Name()
	if g.store == nil || !dnsutil.InZone(qname, g.zone) {
		return plugin.NextOrFailure(g.Name(), g.Next, ctx, w, r)
	}
	if g.isFleetName(qname) {
		return g.serveFleet(ctx, w, r)
	}
	if g.isPeersName(qname) {
		return g.servePeers(state)
	}
	qtype := state.QType()
	switch qtype {
	case dns.TypeA, dns.TypeAAAA, dns.TypeANY:
	case dns.TypeTXT:
		if strings.HasPrefix(qname, explainLabel) {
			return g.serveExplain(ctx, state)
		}
		return plugin.NextOrFailure(g.Name(), g.Next, ctx, w, r)
	default:
		return plugin.NextOrFailure(g.Name(), g.Next, ctx, w, r)
	}
	h, ok := g.host(qname)
	if !ok {
		return plugin.NextOrFailure(g.Name(), g.Next, ctx, w, r)
	}

	ecs, err := clientSubnet(r)
	if err != nil {
		m := new(dns.Msg)
		m.SetRcode(r, dns.RcodeFormatError)
		if o := r.IsEdns0(); o != nil {
			m.Extra = append(m.Extra, replyOPT(o, nil, 0))
		}
		w.WriteMsg(m)
		// Written here: a FORMERR return would make the server write again.
		return dns.RcodeSuccess, nil
	}

	var buf [8]tagView
	views := g.collect(h, buf[:0])
	pol := g.policyOf(h)
	var cl client
	if pol.strategy == geoip {
		cl = g.clientOf(ctx, state, ecs)
	}
	// Each family is decided on its own (per-family answers); ANY gets
	// both, each as an A or AAAA query would, never the static declaration.
	aaaa := qtype == dns.TypeAAAA
	d := g.decide(pol, views, &cl, aaaa)
	var d6 decision
	if qtype == dns.TypeANY {
		d6 = g.decide(pol, views, &cl, true)
		if pol.strategy == weighted && d.chosen >= 0 && views[d.chosen].has(true) {
			// One draw for both families where the drawn tag has both.
			d6.chosen, d6.why = d.chosen, d.why
		}
		if (d.why == whyTierDrawn || d.why == whyFallbackDrawn) && d6.why == d.why && d.tier == d6.tier && views[d.chosen].has(true) {
			// Likewise within a tier.
			d6.chosen = d.chosen
		}
	}

	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	scope := 0
	if d.clientDependent {
		scope = d.scope
	}
	if d.unknown && (qtype != dns.TypeANY || d6.unknown) {
		g.answered(d.strategy, resultServfail)
		m.Rcode = dns.RcodeServerFailure
		m.Authoritative = false
		w.WriteMsg(addOPT(m, r, ecs, scope))
		// Written here: a SERVFAIL return would make the server write again.
		return dns.RcodeSuccess, nil
	}
	if d.strategy == failover {
		dd := &d
		if d.unknown {
			dd = &d6
		}
		switch {
		case dd.step == stepLower && dd.chosen >= 0:
			failovers.WithLabelValues(g.zone, views[dd.chosen].tag).Inc()
		case dd.step == stepLower && len(dd.combined) > 0:
			if idx := combined(views, dd.combined, dd == &d6 || aaaa); len(idx) > 0 {
				failovers.WithLabelValues(g.zone, views[idx[0]].tag).Inc()
			}
		case dd.step == stepAll || dd.step == stepAllDown:
			failovers.WithLabelValues(g.zone, "all").Inc()
		}
	}
	ttl := g.ttlOf(pol, h)
	owner := state.QName()
	if d.allDown {
		g.settleAllDown(pol, h, &d, &d6)
	}
	if d.allDown {
		// No tag has targets of either family: both families alike.
		m.Answer = g.allDownAnswer(pol.allDown, owner, ttl, qtype)
	} else if qtype == dns.TypeANY {
		if !d.unknown {
			m.Answer = appendAddrs(m.Answer, owner, ttl, false, g.targets(h.Name, views, d, false))
		}
		nA := len(m.Answer)
		if !d6.unknown {
			m.Answer = appendAddrs(m.Answer, owner, ttl, true, g.targets(h.Name, views, d6, true))
		}
		// One RRset is enough for ANY (RFC 8482 §4.1): over UDP, the AAAA
		// set is left out, without TC, when both do not fit.
		if nA > 0 && len(m.Answer) > nA && state.Proto() == "udp" && addOPT(m.Copy(), r, ecs, scope).Len() > state.Size() {
			m.Answer = m.Answer[:nA]
		}
	} else {
		addrs := g.targets(h.Name, views, d, aaaa)
		m.Answer = appendAddrs(make([]dns.RR, 0, len(addrs)), owner, ttl, aaaa, addrs)
	}
	result := resultAnswer
	if len(m.Answer) == 0 {
		// NODATA: authoritative, the zone's SOA in authority (RFC 2308 §3).
		result = resultNodata
		if soa := g.store.NegativeSOA(g.zone); soa != nil {
			m.Ns = []dns.RR{soa}
		}
	}
	g.answered(d.strategy, result)
	g.answerStep(d.strategy, d.step)
	w.WriteMsg(addOPT(m, r, ecs, scope))
	return dns.RcodeSuccess, nil
}

// appendAddrs appends one A (or AAAA) record per address.
func appendAddrs(rrs []dns.RR, name string, ttl uint32, aaaa bool, addrs []netip.Addr) []dns.RR {
	rrtype := dns.TypeA
	if aaaa {
		rrtype = dns.TypeAAAA
	}
	hdr := dns.RR_Header{Name: name, Rrtype: rrtype, Class: dns.ClassINET, Ttl: ttl}
	for _, a := range addrs {
		if aaaa {
			rrs = append(rrs, &dns.AAAA{Hdr: hdr, AAAA: a.AsSlice()})
		} else {
			rrs = append(rrs, &dns.A{Hdr: hdr, A: a.AsSlice()})
		}
	}
	return rrs
}

// addOPT adds the reply's OPT record when the query had one.
func addOPT(m, r *dns.Msg, ecs *dns.EDNS0_SUBNET, scope int) *dns.Msg {
	if o := r.IsEdns0(); o != nil {
		m.Extra = append(m.Extra, replyOPT(o, ecs, scope))
	}
	return m
}

// host returns the GSLB host at name (isGSLBHost), or the host that only
// peers declare there (their views): a fleet host is answered by every
// cluster, never NXDOMAIN because this cluster lacks the object.
func (g *GSLB) host(name string) (*store.Host, bool) {
	h, ok := g.store.Host(name)
	if !ok {
		return g.fleetHost(name)
	}
	if !g.isGSLBHost(h) {
		return nil, false
	}
	return h, true
}

// own returns this cluster's targets for h: those that source health does
// not withdraw (store.Host.Ready), and of them the healthy ones when
// localtargets is in the block (its Healthy applies both).
func (g *GSLB) own(h *store.Host) (a, aaaa []netip.Addr) {
	if g.local != nil {
		return g.local.Healthy(h)
	}
	return h.Ready()
}

// collect returns every tag's targets for h: this cluster's first, then the
// peers' cached answers. Peers without a cached answer that may be asked
// (up or not asked yet) are asked in parallel, and the query waits at most
// timeout for them.
func (g *GSLB) collect(h *store.Host, views []tagView) []tagView {
	now := g.now()
	a, aaaa := g.own(h)
	views = append(views, tagView{tag: g.geotag, self: true, state: stateUp, a: a, aaaa: aaaa})
	misses := 0
	for _, p := range g.peers.Load().list {
		e, st, miss := p.lookup(h.Name, now)
		v := tagView{tag: p.tag, peer: p, state: st}
		if e != nil {
			v.a, v.aaaa = e.a, e.aaaa
			if !e.at.IsZero() {
				v.age = now.Sub(e.at).Seconds()
			}
		}
		if miss {
			v.miss = true
			misses++
		}
		views = append(views, v)
	}
	if misses == 0 {
		return views
	}

	chans := make([]<-chan singleflight.Result, len(views))
	for i := range views {
		v := &views[i]
		if !v.miss {
			continue
		}
		p := v.peer
		p.record(func() { cacheMisses.WithLabelValues(g.zone, p.tag).Inc() })
		chans[i] = g.flight.DoChan(p.tag+"\x00"+h.Name, func() (any, error) { return p.fetchIfDue(h.Name) })
	}
	timer := time.NewTimer(g.timeout)
	defer timer.Stop()
	expired := false
	for i, ch := range chans {
		if ch == nil {
			continue
		}
		v := &views[i]
		if !expired {
			select {
			case res := <-ch:
				if res.Err == nil {
					e := res.Val.(*hostTargets)
					v.a, v.aaaa = e.a, e.aaaa
				}
			case <-timer.C:
				expired = true
			}
		}
		v.state = v.peer.state(g.now())
		if v.state == stateDown {
			v.a, v.aaaa = nil, nil
		}
	}
	return views
}

// policyOf returns the host's policy: its properties over the defaults.
func (g *GSLB) policyOf(h *store.Host) *policy {
	if len(h.Properties) == 0 && len(h.Labels) == 0 {
		return &g.defaults
	}
	cache := g.policies.Load()
	if v, ok := cache.Load(h); ok {
		return v.(*policy)
	}
	pol, _ := hostPolicy(&g.defaults, h.Properties, h.Labels)
	if _, loaded := cache.LoadOrStore(h, pol); !loaded {
		g.policyCount.Add(1)
	}
	return pol
}

// ttlOf: gslb/ttl, else the endpoint's recordTTL, else `ttl`.
func (g *GSLB) ttlOf(pol *policy, h *store.Host) uint32 {
	if pol.ttlSet && pol != &g.defaults {
		return pol.ttl
	}
	if h.TTLSet {
		return h.TTL
	}
	return g.defaults.ttl
}

func (g *GSLB) clientOf(ctx context.Context, state request.Request, ecs *dns.EDNS0_SUBNET) client {
	var src netip.Addr
	switch a := state.W.RemoteAddr().(type) {
	case *net.UDPAddr:
		src, _ = netip.AddrFromSlice(a.IP)
	case *net.TCPAddr:
		src, _ = netip.AddrFromSlice(a.IP)
	default:
		src, _ = netip.ParseAddr(state.IP())
	}
	addr, bits := ecsClient(ecs, src)
	return client{ctx: ctx, addr: addr, bits: bits}
}

// Ready implements ready.Readiness: the peers are discovered (when
// peers_from_ns is used) and every peer had its first round of queries.
func (g *GSLB) Ready() bool {
	// Once ready, a peer that joins later does not take this server out of
	// service: until it answers, it is unknown, which failover respects.
	if g.ready.Load() {
		return true
	}
	if g.disc != nil && !g.disc.attempted.Load() {
		return false
	}
	if !g.walked.Load() {
		return false
	}
	for _, p := range g.peers.Load().list {
		if !p.firstRound.Load() {
			return false
		}
	}
	g.ready.Store(true)
	return true
}
