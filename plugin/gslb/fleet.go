package gslb

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/coredns/coredns/plugin/ready"
	"github.com/fleetdns/fleetdns/internal/store"
	"github.com/fleetdns/fleetdns/plugin/gslb/fleet"

	"github.com/miekg/dns"
)

// fleetConfig is the `fleet` block: the fleet protocol between gslb peers
// (README.md, "The fleet protocol"). A nil *fleetConfig is a gslb that
// neither publishes nor follows views: every peer is asked per host.
type fleetConfig struct {
	keys        *fleet.Keys // nil: no TSIG
	keyFile     string
	notifyDelay time.Duration // changes are coalesced this long before the view is set and peers are notified
	notifyRate  int           // checks of one peer that its NOTIFYs start, per second
	limits      fleet.Limits
	alsoNotify  []string // host:port of stock secondaries (no peers) notified of every new serial
}

// maxAlsoNotify caps the also_notify addresses.
const maxAlsoNotify = 64

// Defaults of the fleet block.
const (
	defaultNotifyDelay = 100 * time.Millisecond
	defaultNotifyRate  = 5
)

func newFleetConfig() *fleetConfig {
	return &fleetConfig{notifyDelay: defaultNotifyDelay, notifyRate: defaultNotifyRate}
}

// Results of fleet_checks_total besides fleet.Reason's.
const (
	checkUnchanged = "unchanged"
	checkChanged   = "changed"
)

// peerView is a peer's view as the query path reads it: per host, the
// peer's targets in the shape of a per-host answer.
type peerView struct {
	view  *fleet.View
	hosts map[string]*hostTargets
}

// noTargets is what a peer that serves a view has for a host its view does
// not hold: it does not declare the host, it has no targets.
var noTargets = &hostTargets{}

// isFleetName reports whether qname (lower-case) is at or below
// _fleet.<zone>, the view's reserved name, answered by gslb alone.
func (g *GSLB) isFleetName(qname string) bool {
	fz := g.fleetZone
	return strings.HasSuffix(qname, fz) && (len(qname) == len(fz) || qname[len(qname)-len(fz)-1] == '.')
}

// serveFleet answers everything at and below _fleet.<zone>: NOTIFYs from
// peers and the view (SOA, AXFR, IXFR). Without the fleet block the name is
// still reserved: refused, so that no store record there is ever served.
func (g *GSLB) serveFleet(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	if r.Opcode == dns.OpcodeNotify {
		return g.serveNotify(w, r)
	}
	if g.pub == nil {
		return dns.RcodeRefused, nil
	}
	return g.pub.ServeDNS(ctx, w, r)
}

// serveNotify accepts a NOTIFY of a peer's view (RFC 1996): signed with a
// fleet key when keys are set, else from one of a known peer's addresses.
// The notifying peer is checked at once (a signed NOTIFY from an address
// that is no peer's, behind NAT, has every following peer checked); the
// checks a peer's NOTIFYs start are capped by notify_rate. Everything else
// is REFUSED, counted, and logged once per sender.
func (g *GSLB) serveNotify(w dns.ResponseWriter, r *dns.Msg) (int, error) {
	src := remoteAddr(w)
	if g.fl == nil {
		return g.refuseNotify(w, r, src, "this cluster does not follow fleet views (no fleet block)")
	}
	if _, ok := fleet.IsNotify(r, g.zone); !ok {
		return g.refuseNotify(w, r, src, "not a NOTIFY of "+g.fleetZone+" SOA")
	}
	keys := g.fl.keys
	if keys != nil && !keys.Verified(w, r) {
		return g.refuseNotify(w, r, src, "not signed with a fleet key")
	}
	p := g.peerAt(src)
	if p == nil && keys == nil {
		return g.refuseNotify(w, r, src, "not from a peer's address")
	}
	fleet.AnswerNotify(w, r, keys, dns.RcodeSuccess)
	notifiesReceived.WithLabelValues(g.zone, "accepted").Inc()
	if p != nil {
		p.notified()
		return dns.RcodeSuccess, nil
	}
	for _, p := range g.peers.Load().list {
		if !p.noView.Load() {
			p.notified()
		}
	}
	return dns.RcodeSuccess, nil
}

// maxRefusedSenders caps the senders of refused NOTIFYs remembered for
// logging once each.
const maxRefusedSenders = 256

func (g *GSLB) refuseNotify(w dns.ResponseWriter, r *dns.Msg, src netip.Addr, why string) (int, error) {
	notifiesReceived.WithLabelValues(g.zone, "refused").Inc()
	var keys *fleet.Keys
	if g.fl != nil {
		keys = g.fl.keys
	}
	fleet.AnswerNotify(w, r, keys, dns.RcodeRefused)
	g.refusedMu.Lock()
	defer g.refusedMu.Unlock()
	if _, seen := g.refused[src]; seen {
		return dns.RcodeSuccess, nil
	}
	switch {
	case len(g.refused) < maxRefusedSenders:
		g.refused[src] = struct{}{}
		log.Warningf("NOTIFY of %s from %s refused: %s", g.fleetZone, src, why)
	case len(g.refused) == maxRefusedSenders:
		g.refused[netip.Addr{}] = struct{}{}
		log.Warningf("NOTIFYs of %s refused from more than %d senders: further senders are counted, not logged", g.fleetZone, maxRefusedSenders)
	}
	return dns.RcodeSuccess, nil
}

func remoteAddr(w dns.ResponseWriter) netip.Addr {
	var a netip.Addr
	switch x := w.RemoteAddr().(type) {
	case *net.UDPAddr:
		a, _ = netip.AddrFromSlice(x.IP)
	case *net.TCPAddr:
		a, _ = netip.AddrFromSlice(x.IP)
	}
	return a.Unmap()
}

// peerAt returns the peer one of whose addresses is a, nil when none is.
func (g *GSLB) peerAt(a netip.Addr) *peer {
	return g.peerAddrs.Load().byAddr[a]
}

// FleetTraffic implements store.Fleet for rate limiting: with a fleet key,
// a query signed with one of its keys (and verified by the server); without
// one, a query from a known peer's address. A source address alone is not
// trusted where a key exists: a spoofed UDP query would pass rrl.
func (g *GSLB) FleetTraffic(w dns.ResponseWriter, r *dns.Msg) bool {
	if g.fl == nil {
		return false
	}
	if g.fl.keys != nil {
		return r.IsTsig() != nil && g.fl.keys.Verified(w, r)
	}
	return g.peerAt(remoteAddr(w)) != nil
}

// peerAddrIndex maps the peers' addresses to the peers.
type peerAddrIndex struct {
	byAddr map[netip.Addr]*peer
}

func (g *GSLB) indexPeerAddrs(ps *peerSet) {
	idx := &peerAddrIndex{byAddr: map[netip.Addr]*peer{}}
	for _, p := range ps.list {
		for _, hp := range *p.addrs.Load() {
			if ap, err := netip.ParseAddrPort(hp); err == nil {
				idx.byAddr[ap.Addr().Unmap()] = p
			}
		}
	}
	g.peerAddrs.Store(idx)
}

// runPublish sets this cluster's view after every change of the store or
// of a health verdict, coalesced over notify_delay, and notifies the peers
// when its serial moved.
func (g *GSLB) runPublish(ctx context.Context, changed, verdicts <-chan struct{}) {
	// retry is set while the view waits for localtargets' first verdicts.
	var retry <-chan time.Time
	if !g.publish() {
		retry = time.After(verdictsRetry)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-verdicts:
		case <-retry:
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(g.fl.notifyDelay):
		}
		// The signals that arrived meanwhile are in this view.
		select {
		case <-changed:
		default:
		}
		select {
		case <-verdicts:
		default:
		}
		retry = nil
		if !g.publish() {
			retry = time.After(verdictsRetry)
		}
	}
}

// verdictsRetry is how often the view is tried again while localtargets'
// first health checks run.
const verdictsRetry = 100 * time.Millisecond

// publish sets the view: every GSLB host this cluster declares, with its
// healthy targets, the TTL it answers with and its gslb/* policy. Its serial
// follows the record store's SOA serial of the zone (fleet.Publisher.SetData),
// the clock's only where no zone of the store holds the gslb zone.
//
// It publishes nothing (and reports false) until localtargets' first health
// checks ran (its readiness): a target not checked yet is not healthy, and a
// view without it would withdraw this cluster's targets from its peers
// while a (re)started replica checks, and count verdict changes that the
// other replicas did not see.
func (g *GSLB) publish() bool {
	if g.store == nil || !g.store.Synced() {
		return true // the store's first sync signals
	}
	if r, ok := g.local.(ready.Readiness); ok && !r.Ready() {
		return false
	}
	var hosts []fleet.Host
	g.store.Hosts(g.zone, func(h *store.Host) bool {
		if !g.isGSLBHost(h) {
			return true
		}
		a, aaaa := g.own(h)
		hosts = append(hosts, fleet.Host{Name: h.Name, A: a, AAAA: aaaa, TTL: g.ttlOf(g.policyOf(h), h), Policy: policyProps(h)})
		return true
	})
	var serial uint32
	var changed bool
	if soa := g.store.NegativeSOA(g.zone); soa != nil {
		// Derived from the data: replicas of this cluster serving the
		// same objects publish the same serial for the same view.
		serial, changed = g.pub.SetData(hosts, soa.Serial)
	} else {
		serial, changed = g.pub.Set(hosts)
	}
	if !changed {
		return true
	}
	fleetSerial.WithLabelValues(g.zone).Set(float64(serial))
	to := slices.Clone(g.fl.alsoNotify)
	for _, p := range g.peers.Load().list {
		if !p.noView.Load() {
			to = append(to, *p.addrs.Load()...)
		}
	}
	g.pub.Notify(g.ctx, to)
	return true
}

// policyProps are the host's gslb/* properties, as published in the view;
// k8gb's strategy label stands for gslb/strategy when that is not set.
func policyProps(h *store.Host) map[string]string {
	var m map[string]string
	for k, v := range h.Properties {
		if strings.HasPrefix(k, "gslb/") {
			if m == nil {
				m = map[string]string{}
			}
			m[k] = v
		}
	}
	if s, ok := h.Labels[labelK8gb]; ok && m[propStrategy] == "" {
		if m == nil {
			m = map[string]string{}
		}
		m[propStrategy] = s
	}
	return m
}

// notified marks that the peer sent a NOTIFY: its loop checks its view at
// once (within notify_rate).
func (p *peer) notified() {
	p.notify.Store(true)
	p.wake()
}

// fleetCheck follows the peer's view: one SOA query per refresh (and at
// once after the peer's NOTIFY), a transfer when the serial moved. It
// reports whether the peer is followed by its view, so that nothing is
// asked per host; only a peer that serves no view (k8gb's CoreDNS, a stock
// zone) is asked per host, and checked again once per refresh in case it
// starts serving one.
func (p *peer) fleetCheck(ctx context.Context) bool {
	g := p.g
	now := g.now()
	notified := p.notify.Load()
	if notified {
		// NOTIFYs start at most notify_rate checks a second; one that
		// comes sooner is remembered and served when the time comes.
		gap := time.Second / time.Duration(g.fl.notifyRate)
		if wait := p.lastNotified.Add(gap).Sub(now); wait > 0 {
			if !p.wakeArmed.Swap(true) { // one timer, however many NOTIFYs
				time.AfterFunc(wait, func() { p.wakeArmed.Store(false); p.wake() })
			}
			notified = false
		}
	}
	if !notified && (now.Before(p.nextCheck) || now.UnixNano() < p.retryAt.Load()) {
		return !p.noView.Load()
	}
	if notified {
		p.notify.Store(false)
		p.lastNotified = now
	}
	p.nextCheck = now.Add(g.refresh)

	f := p.follower()
	v, changed, err := f.Check(ctx)
	if ctx.Err() != nil {
		return true
	}
	if fleet.Reason(err) == fleet.ReasonTSIG && p.view.Load() == nil && p.servesNoView(ctx) {
		// An unsigned answer that holds no view (a stock server's empty
		// NOERROR) is a peer without a view, as its NXDOMAIN would be;
		// a peer that serves a view unsigned stays refused.
		err = fmt.Errorf("%w: %s answers %s SOA without one", fleet.ErrNoView, p.addr(), g.fleetZone)
	}
	result := checkUnchanged
	switch {
	case err == nil:
		if changed || p.view.Load() == nil || p.view.Load().view != v {
			result = checkChanged
			p.install(v)
		}
		if p.noView.Swap(false) {
			log.Infof("Peer %s of %s serves a fleet view: followed by SOA checks and transfers, no longer asked per host", p.tag, g.zone)
		}
		p.observe(nil)
	case errors.Is(err, fleet.ErrNoView):
		result = fleet.ReasonNoView
		if !p.noView.Swap(true) {
			log.Infof("Peer %s of %s serves no fleet view: asked per host", p.tag, g.zone)
			if p.view.Swap(nil) != nil {
				g.reindex()
			}
		}
	case fleet.Reason(err) == fleet.ReasonBackwards:
		// A replica behind the one that served the view held answered:
		// the peer is up, and its newer view is kept (the follower takes
		// a lower serial only after split_brain_threshold of them).
		result = fleet.ReasonBackwards
		p.observe(nil)
	default:
		result = fleet.Reason(err)
		if result == fleet.ReasonUnreachable {
			p.next.Add(1) // the next check asks the peer's next address
		}
		p.observe(err)
		// A failed check is asked again after the backoff that observe
		// set, as any failing peer is, not a whole refresh later.
		p.nextCheck = now
	}
	p.record(func() { fleetChecks.WithLabelValues(g.zone, p.tag, result).Inc() })
	return !p.noView.Load()
}

// servesNoView asks the peer, unsigned, for the view's SOA: true when the
// answer holds none (any rcode, no SOA of _fleet.<zone> in the answer).
func (p *peer) servesNoView(ctx context.Context) bool {
	m := new(dns.Msg)
	m.SetQuestion(p.g.fleetZone, dns.TypeSOA)
	r, err := newExchanger(p.g.timeout).exchange(ctx, m, p.addr())
	if err != nil {
		return false
	}
	for _, rr := range r.Answer {
		if soa, ok := rr.(*dns.SOA); ok && strings.EqualFold(soa.Hdr.Name, p.g.fleetZone) {
			return false
		}
	}
	return true
}

// follower returns the Follower of the peer's address in use. A peer has
// at most maxPeerAddrs addresses; a failed check moves on to the next.
func (p *peer) follower() *fleet.Follower {
	addr := p.addr()
	p.fmu.Lock()
	defer p.fmu.Unlock()
	if f, ok := p.followers[addr]; ok {
		return f
	}
	if p.followers == nil || len(p.followers) >= maxPeerAddrs {
		p.followers = map[string]*fleet.Follower{}
	}
	f := fleet.NewFollower(p.g.zone, addr, p.g.fl.keys, p.g.fl.limits)
	f.SetMaxBehind(p.g.splitBrain)
	p.followers[addr] = f
	return f
}

// install makes v the peer's view that the query path reads, and updates
// the fleet's hosts.
func (p *peer) install(v *fleet.View) {
	g := p.g
	now := g.now()
	pv := &peerView{view: v, hosts: make(map[string]*hostTargets, len(v.Hosts))}
	dropped := 0
	for i := range v.Hosts {
		h := &v.Hosts[i]
		a, aaaa := h.A, h.AAAA
		if len(a) > maxTargets {
			dropped += len(a) - maxTargets
			a = a[:maxTargets]
		}
		if len(aaaa) > maxTargets {
			dropped += len(aaaa) - maxTargets
			aaaa = aaaa[:maxTargets]
		}
		pv.hosts[h.Name] = &hostTargets{a: a, aaaa: aaaa, at: now}
	}
	p.view.Store(pv)
	p.cache.Clear() // per-host answers are not read while a view is followed
	p.record(func() {
		fleetPeerSerial.WithLabelValues(g.zone, p.tag).Set(float64(v.Serial))
		fleetPeerHosts.WithLabelValues(g.zone, p.tag).Set(float64(len(v.Hosts)))
		if dropped > 0 {
			peerTargetsDropped.WithLabelValues(g.zone, p.tag).Add(float64(dropped))
		}
	})
	g.reindex()
}

// fleetIndex is what the peers' views add to this cluster's hosts: the
// hosts only peers declare (answered here as everywhere), and the hosts
// whose declarations disagree on the policy.
type fleetIndex struct {
	hosts     map[string]*store.Host // declared by peers only: name, TTL, the chosen policy
	names     []string               // the keys of hosts, sorted
	conflicts map[string]string      // name -> the explain line of the disagreement
}

var emptyIndex = &fleetIndex{}

// fleetHost returns the host at name that only peers declare.
func (g *GSLB) fleetHost(name string) (*store.Host, bool) {
	h, ok := g.fleetIdx.Load().hosts[name]
	return h, ok
}

// reindex rebuilds the fleet's hosts from the local declarations and every
// followed peer's view, under the policy rule: a host declared here takes
// this cluster's policy; a host only peers declare takes the policy of the
// peer whose geo tag sorts first among those that declare it. A host whose
// declarations disagree on the policy is a conflict: counted in
// fleet_policy_conflicts, logged when it starts and ends, and explained.
func (g *GSLB) reindex() {
	if g.fl == nil || g.store == nil {
		return
	}
	g.indexMu.Lock()
	defer g.indexMu.Unlock()

	local := map[string]map[string]string{}
	if g.store.Synced() {
		g.store.Hosts(g.zone, func(h *store.Host) bool {
			if g.isGSLBHost(h) {
				local[h.Name] = policyProps(h)
			}
			return true
		})
	}
	type decl struct {
		tag    string
		policy map[string]string
		ttl    uint32
	}
	byName := map[string][]decl{}
	for _, p := range g.peers.Load().list { // in tag order
		pv := p.view.Load()
		if pv == nil {
			continue
		}
		for i := range pv.view.Hosts {
			h := &pv.view.Hosts[i]
			byName[h.Name] = append(byName[h.Name], decl{tag: p.tag, policy: h.Policy, ttl: h.TTL})
		}
	}
	idx := &fleetIndex{hosts: map[string]*store.Host{}, conflicts: map[string]string{}}
	for name, ds := range byName {
		lp, isLocal := local[name]
		if !isLocal && g.peerHostAllowed(name) {
			if _, held := g.store.Host(name); !held {
				d := ds[0]
				idx.hosts[name] = &store.Host{Name: name, AddressDeclared: true, TTL: d.ttl, TTLSet: true, Properties: d.policy}
				idx.names = append(idx.names, name)
			}
		}
		all := ds
		if isLocal {
			all = append([]decl{{tag: g.geotag, policy: lp}}, ds...)
		}
		same := true
		for _, d := range all[1:] {
			if !samePolicy(all[0].policy, d.policy) {
				same = false
				break
			}
		}
		if same {
			continue
		}
		parts := make([]string, 0, len(all))
		for _, d := range all {
			parts = append(parts, d.tag+" "+policyString(d.policy))
		}
		sort.Strings(parts)
		follows := "this cluster's own declaration"
		if !isLocal {
			follows = "the declaration of " + ds[0].tag + ", the first geo tag that declares it"
		}
		idx.conflicts[name] = fmt.Sprintf("policy conflict: %s; this cluster follows %s", strings.Join(parts, "; "), follows)
	}
	slices.Sort(idx.names)

	old := g.fleetIdx.Load()
	logged := 0
	for name, line := range idx.conflicts {
		if old.conflicts[name] != line {
			if logged < maxConflictLogs {
				log.Warningf("Host %s of %s: %s", name, g.zone, line)
			}
			logged++
		}
	}
	for name := range old.conflicts {
		if _, still := idx.conflicts[name]; !still {
			if logged < maxConflictLogs {
				log.Infof("Host %s of %s: the clusters that declare it agree on its policy again", name, g.zone)
			}
			logged++
		}
	}
	if logged > maxConflictLogs {
		log.Warningf("%d more hosts of %s started or ended a policy conflict (coredns_gslb_fleet_policy_conflicts)", logged-maxConflictLogs, g.zone)
	}
	policyConflicts.WithLabelValues(g.zone).Set(float64(len(idx.conflicts)))
	fleetOnlyHosts.WithLabelValues(g.zone).Set(float64(len(idx.hosts)))
	g.fleetIdx.Store(idx)
	if len(idx.names) != len(old.names) {
		// New hosts for the peers asked per host to prefetch.
		for _, p := range g.peers.Load().list {
			if p.noView.Load() {
				p.wake()
			}
		}
	}
}

// peerHostAllowed reports whether a host that only peers declare may be
// answered here: a name below the zone's apex that is no name server's and
// no localtargets- name, as isGSLBHost asks of this cluster's own hosts.
func (g *GSLB) peerHostAllowed(name string) bool {
	if !strings.HasSuffix(name, "."+g.zone) || strings.HasPrefix(name, g.prefix) {
		return false
	}
	return g.ns == nil || !g.ns.match(name)
}

// maxConflictLogs caps the conflict lines one rebuild logs.
const maxConflictLogs = 10

// samePolicy compares two hosts' gslb/* properties, with the strategy's
// name in any of its spellings.
func samePolicy(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok {
			return false
		}
		if k == propStrategy {
			v1, ok1 := strategyName(v)
			v2, ok2 := strategyName(w)
			if ok1 && ok2 && v1 == v2 {
				continue
			}
		}
		if v != w {
			return false
		}
	}
	return true
}

func policyString(p map[string]string) string {
	if len(p) == 0 {
		return "(defaults)"
	}
	var s []string
	for _, k := range slices.Sorted(maps.Keys(p)) {
		s = append(s, k+"="+p[k])
	}
	return strings.Join(s, ",")
}

// fleetNames are the hosts only peers declare, for the peers asked per
// host to prefetch.
func (g *GSLB) fleetNames() []string { return g.fleetIdx.Load().names }

// fleetExplain returns the explain lines the fleet adds for host.
func (g *GSLB) fleetExplain(h *store.Host) []string {
	if g.fl == nil {
		return nil
	}
	idx := g.fleetIdx.Load()
	var lines []string
	if _, only := idx.hosts[h.Name]; only {
		lines = append(lines, "declared by peers only: answered from their views")
	}
	if c, ok := idx.conflicts[h.Name]; ok {
		lines = append(lines, c)
	}
	return lines
}

// Compile-time check: gslb tells rate limiting what fleet traffic is.
var _ store.Fleet = (*GSLB)(nil)

// Compile-time check: the view's server is a CoreDNS handler.
var _ interface {
	ServeDNS(context.Context, dns.ResponseWriter, *dns.Msg) (int, error)
} = (*fleet.Publisher)(nil)
