package gslb

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetdns/fleetdns/plugin/gslb/fleet"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

// state is what this cluster believes about a peer.
type state int32

const (
	// stateUnknown: not asked yet. Failover never reads it as "no targets".
	stateUnknown state = iota
	// stateUp: the last query was answered.
	stateUp
	// stateStale: queries fail, the last answers are still believed until
	// split_brain_threshold has passed since the last good answer.
	stateStale
	// stateDown: failing past split_brain_threshold, or never answered: the
	// peer counts as having no targets.
	stateDown
	// statePartitioned: failing past split_brain_threshold, but a majority
	// of the other peers that answer the witness still see it up: its last
	// answers are kept, up to the witness ceiling (witness.go).
	statePartitioned
)

var stateNames = [...]string{"unknown", "up", "stale", "down", "partitioned"}

func (s state) String() string { return stateNames[s] }

// hostTargets is a peer's answer for one host, both families, as cached.
// It is immutable once stored.
type hostTargets struct {
	a, aaaa   []netip.Addr
	at        time.Time // when the peer answered
	refreshAt time.Time
}

// cycleParallel bounds the concurrent queries to one peer in a refresh cycle.
const cycleParallel = 8

// peer is one other cluster: a geo tag and its name servers' addresses.
type peer struct {
	g     *GSLB
	tag   string
	x     exchanger
	addrs atomic.Pointer[[]string] // host:port
	next  atomic.Uint32            // index of the address in use

	cache sync.Map // lower-cased host -> *hostTargets

	mu      sync.Mutex // serializes state changes
	st      atomic.Int32
	lastOK  atomic.Int64 // unix nanoseconds of the last good answer
	lastErr atomic.Pointer[string]
	// fails counts the failures in a row (under mu); the refresh loop does
	// not ask the peer again before retryAt (unix nanoseconds).
	fails   int
	retryAt atomic.Int64

	// firstRound is set when a refresh cycle that started after the first
	// walk of the declared hosts has finished, answered or not.
	firstRound atomic.Bool

	// verdict is the last witness round's about this peer while it is
	// silent (witness.go).
	verdict    atomic.Pointer[verdict]
	witnessing atomic.Bool // observe is asking the others about it

	kick   chan struct{}
	cancel context.CancelFunc

	// The fleet protocol (fleet.go). view is the peer's view while it
	// serves one (the query path reads it instead of cache); noView is set
	// while it serves none (asked per host). notify is a NOTIFY not yet
	// acted on; the rest belongs to the peer's loop.
	view         atomic.Pointer[peerView]
	noView       atomic.Bool
	notify       atomic.Bool
	wakeArmed    atomic.Bool // a wake-up for a NOTIFY held back by notify_rate is set
	lastNotified time.Time
	nextCheck    time.Time
	fmu          sync.Mutex
	followers    map[string]*fleet.Follower // by address

	// metricsMu orders the series writes of queries still in flight after
	// the peer left the set before forgetMetrics, so that none is
	// created again once deleted.
	metricsMu sync.RWMutex
	gone      bool
}

// record runs f, which writes the peer's series, unless the peer is gone.
func (p *peer) record(f func()) {
	p.metricsMu.RLock()
	defer p.metricsMu.RUnlock()
	if !p.gone {
		f()
	}
}

func newPeer(g *GSLB, tag string, addrs []string) *peer {
	p := &peer{g: g, tag: tag, x: newExchanger(g.timeout), kick: make(chan struct{}, 1)}
	if g.fl != nil {
		// Per-host queries are fleet traffic too: signed with the fleet's
		// key (a peer without the key answers them all the same).
		p.x = p.x.withTSIG(g.fl.keys.Secrets())
	}
	a := slices.Clone(addrs)
	p.addrs.Store(&a)
	for _, s := range stateNames {
		peerState.WithLabelValues(g.zone, tag, s).Set(0)
	}
	peerState.WithLabelValues(g.zone, tag, stateUnknown.String()).Set(1)
	return p
}

func (p *peer) addr() string {
	a := *p.addrs.Load()
	return a[int(p.next.Load())%len(a)]
}

// state returns the peer's state as of now: a stale peer whose last good
// answer is older than split_brain_threshold reads as partitioned or down
// (silentState) even before the background loops notice.
func (p *peer) state(now time.Time) state {
	s := state(p.st.Load())
	if s == stateStale || s == statePartitioned {
		return p.silentState(now)
	}
	return s
}

// lookup returns the cached answer for host. miss is true when there is none
// and the peer may be asked on the query path (it is up or not yet asked).
func (p *peer) lookup(host string, now time.Time) (e *hostTargets, st state, miss bool) {
	st = p.state(now)
	if st == stateDown {
		return nil, st, false
	}
	if pv := p.view.Load(); pv != nil {
		if e := pv.hosts[host]; e != nil {
			return e, st, false
		}
		return noTargets, st, false
	}
	if v, ok := p.cache.Load(host); ok {
		return v.(*hostTargets), st, false
	}
	return nil, st, st != stateStale && st != statePartitioned
}

// fetch asks the peer for host's A and AAAA targets (in parallel), caches
// the answer, and records the outcome in the peer's state. Callers go
// through the singleflight group, so one (peer, host) has one query in
// flight.
func (p *peer) fetch(host string) (*hostTargets, error) {
	g := p.g
	ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
	defer cancel()

	qname := g.prefix + host
	var (
		wg      sync.WaitGroup
		aaaa    peerAnswer
		errAAAA error
	)
	wg.Go(func() { aaaa, errAAAA = p.query(ctx, qname, dns.TypeAAAA) })
	a, err := p.query(ctx, qname, dns.TypeA)
	wg.Wait()
	if err == nil {
		err = errAAAA
	}
	if err != nil {
		p.observe(err)
		return nil, err
	}

	now := g.now()
	ttl := g.refresh
	for _, x := range []peerAnswer{a, aaaa} {
		if x.ttlSet {
			ttl = min(ttl, time.Duration(x.ttl)*time.Second)
		}
		if x.dropped > 0 {
			p.record(func() { peerTargetsDropped.WithLabelValues(g.zone, p.tag).Add(float64(x.dropped)) })
		}
	}
	ttl = max(ttl, g.floor)
	e := &hostTargets{a: a.addrs, aaaa: aaaa.addrs, at: now, refreshAt: now.Add(ttl)}
	p.cache.Store(host, e)
	p.observe(nil)
	return e, nil
}

// query sends one plain localtargets query, the way k8gb peers ask each
// other.
func (p *peer) query(ctx context.Context, qname string, qtype uint16) (peerAnswer, error) {
	m := new(dns.Msg)
	m.SetQuestion(qname, qtype)
	if p.g.fl != nil {
		p.g.fl.keys.Sign(m)
	}
	addr := p.addr()
	start := time.Now()

	r, err := p.x.exchange(ctx, m, addr)
	var pa peerAnswer
	if err == nil {
		pa, err = parsePeerAnswer(m, r)
	}
	result := "ok"
	if err != nil {
		result = reasonOf(err)
		// The next query tries the peer's next name server.
		p.next.Add(1)
	}
	p.record(func() {
		if err != nil {
			peerFailures.WithLabelValues(p.g.zone, p.tag, result).Inc()
		}
		peerQueryDuration.WithLabelValues(p.g.zone, p.tag, result).Observe(time.Since(start).Seconds())
	})
	return pa, err
}

// probeHost is the host a probe asks about: a name inside the zone that no
// one declares, so a peer answers it NXDOMAIN (up, no targets). The zone's
// own name with the prefix (localtargets-gslb.example.com.) would lie in the
// parent zone, which a peer serving only the GSLB zone refuses (a CoreDNS
// block for the zone) or leaves unanswered (k8gb's k8s_crd).
const probeHost = "fleetdns-probe."

// probe asks the peer about a name inside the zone when there is no
// declared host due to ask about: any well-formed answer, NXDOMAIN
// included, shows that the peer answers.
func (p *peer) probe() error {
	ctx, cancel := context.WithTimeout(context.Background(), p.g.timeout)
	defer cancel()
	_, err := p.query(ctx, p.g.prefix+probeHost+p.g.zone, dns.TypeA)
	return err
}

// observe moves the peer between states after an answer (err == nil) or a
// failure. A change is logged once.
func (p *peer) observe(err error) {
	if err != nil && p.unwitnessed() && p.witnessing.CompareAndSwap(false, true) {
		// The peer would go down without a word from the others (its
		// first failure came past split_brain_threshold, as a fleet SOA
		// check that times out can): ask them now, before it does. This
		// runs on the peer's loop; a client whose query missed the
		// cache waits no longer than timeout all the same (collect).
		p.g.witness(p.g.loopCtx(), []*peer{p})
		p.witnessing.Store(false)
	}
	now := p.g.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	old := state(p.st.Load())
	next := stateUp
	if err == nil {
		p.lastOK.Store(now.UnixNano())
		p.fails = 0
		p.retryAt.Store(0)
	} else {
		p.fails++
		p.retryAt.Store(now.Add(p.backoff()).UnixNano())
		s := err.Error()
		p.lastErr.Store(&s)
		// Stale, then partitioned or down; a peer that never answered
		// is down at once.
		next = p.silentState(now)
	}
	if next != old {
		p.moveTo(old, next, err)
	}
}

// moveTo records a change of state (under mu): the state, its series and
// one log line.
func (p *peer) moveTo(old, next state, err error) {
	p.st.Store(int32(next))
	p.record(func() {
		peerState.WithLabelValues(p.g.zone, p.tag, old.String()).Set(0)
		peerState.WithLabelValues(p.g.zone, p.tag, next.String()).Set(1)
	})
	if err == nil {
		if e := p.lastErr.Load(); e != nil {
			err = errors.New(*e)
		}
	}
	switch next {
	case stateUp:
		log.Infof("Peer %s (%s) of %s is up", p.tag, p.addr(), p.g.zone)
	case stateStale:
		log.Warningf("Peer %s (%s) of %s is stale, its last answers are believed for %s: %v", p.tag, p.addr(), p.g.zone, p.g.splitBrain, err)
	case statePartitioned:
		v := p.verdict.Load()
		log.Warningf("Peer %s (%s) of %s is partitioned from this cluster: %s of %d peers that answered still see it up, its last answers are kept until they are %s old: %v",
			p.tag, p.addr(), p.g.zone, strings.Join(v.vouched, ","), len(v.vouched)+len(v.against), p.g.wit.ceiling, err)
	case stateDown:
		why := "it counts as having no targets"
		if old == statePartitioned {
			why = "no majority of the other peers sees it up any more, or the witness ceiling " + p.g.wit.ceiling.String() + " has passed: " + why
		}
		log.Warningf("Peer %s (%s) of %s is down, %s: %v", p.tag, p.addr(), p.g.zone, why, err)
	}
}

// maxBackoff caps the wait before a failing peer is asked again.
const maxBackoff = 30 * time.Second

// backoff is how long the refresh loop waits before it asks a peer that
// failed p.fails times in a row: the loop's tick, doubled with every
// failure, up to 30 s, and never past refresh, so that a peer that comes
// back is seen within the refresh interval it would be anyway.
func (p *peer) backoff() time.Duration {
	g := p.g
	limit := min(maxBackoff, max(g.refresh, g.tick))
	d := g.tick
	for i := 1; i < p.fails && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// run refreshes the peer's answers in the background until ctx is done.
func (p *peer) run(ctx context.Context) { every(ctx, p.g.tick, p.kick, p.cycle) }

func (p *peer) wake() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// cycle refreshes every declared host whose answer is due. The first due
// host is asked alone: when the peer does not answer it, the cycle ends, so
// a dead peer costs one timeout per cycle, not one per host.
func (p *peer) cycle(ctx context.Context) {
	g := p.g
	walked := g.walked.Load()
	defer func() {
		if walked {
			p.firstRound.Store(true)
		}
	}()

	if g.fl != nil && p.fleetCheck(ctx) {
		return // followed by its view: nothing is asked per host
	}
	now := g.now()
	if now.UnixNano() < p.retryAt.Load() {
		return // backing off a failing peer
	}
	var due []string
	isDue := func(h string) {
		if v, ok := p.cache.Load(h); !ok || !now.Before(v.(*hostTargets).refreshAt) {
			due = append(due, h)
		}
	}
	if hosts := g.declared.Load(); hosts != nil {
		for _, h := range *hosts {
			isDue(h)
		}
	}
	for _, h := range g.fleetNames() {
		isDue(h)
	}
	if len(due) == 0 {
		// Nothing to refresh: probe a peer that is not up, and one that is
		// up but was not heard from for a refresh interval (no host is
		// declared), so that its state keeps telling the truth.
		if state(p.st.Load()) != stateUp || now.Sub(time.Unix(0, p.lastOK.Load())) >= g.refresh {
			p.observe(p.probe())
		}
		return
	}
	if _, err := p.fetchShared(due[0]); err != nil {
		return
	}

	var (
		wg     sync.WaitGroup
		failed atomic.Bool
		sem    = make(chan struct{}, cycleParallel)
	)
	for _, h := range due[1:] {
		if failed.Load() || ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if _, err := p.fetchShared(h); err != nil {
				failed.Store(true)
			}
		})
	}
	wg.Wait()
}

// fetchIfDue is fetch, unless an answer for host that is not due yet is
// cached: the other path's flight for the same key may have ended between
// the caller's look at the cache and its own flight, and its answer is as
// good as a second query to the peer.
func (p *peer) fetchIfDue(host string) (*hostTargets, error) {
	if v, ok := p.cache.Load(host); ok {
		if e := v.(*hostTargets); p.g.now().Before(e.refreshAt) {
			return e, nil
		}
	}
	return p.fetch(host)
}

// fetchShared is fetchIfDue through the singleflight group shared with the
// query path.
func (p *peer) fetchShared(host string) (*hostTargets, error) {
	v, err, _ := p.g.flight.Do(p.tag+"\x00"+host, func() (any, error) { return p.fetchIfDue(host) })
	if err != nil {
		return nil, err
	}
	return v.(*hostTargets), nil
}

// forget drops cached answers for hosts that are no longer declared.
func (p *peer) forget(declared map[string]struct{}) {
	p.cache.Range(func(k, _ any) bool {
		if _, ok := declared[k.(string)]; !ok {
			p.cache.Delete(k)
		}
		return true
	})
}

// stop ends the peer's refresh loop. Its metrics stay: on a reload the new
// instance's peer of the same tag owns them.
func (p *peer) stop() {
	if p.cancel != nil {
		p.cancel()
	}
}

// forgetMetrics drops every series of a peer that left the set, so that
// peers that come and go (a parent that names others every refresh) do not
// pile up series.
func (p *peer) forgetMetrics() {
	p.metricsMu.Lock()
	defer p.metricsMu.Unlock()
	p.gone = true
	l := prometheus.Labels{"zone": p.g.zone, "peer": p.tag}
	peerState.DeletePartialMatch(l)
	peerQueryDuration.DeletePartialMatch(l)
	peerFailures.DeletePartialMatch(l)
	peerTargetsDropped.DeletePartialMatch(l)
	cacheMisses.DeletePartialMatch(l)
	fleetChecks.DeletePartialMatch(l)
	fleetPeerSerial.DeletePartialMatch(l)
	fleetPeerHosts.DeletePartialMatch(l)
	failovers.DeletePartialMatch(prometheus.Labels{"zone": p.g.zone, "tag": p.tag})
}
