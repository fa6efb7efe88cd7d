package localtargets

import (
	"container/heap"
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetdns/fleetdns/internal/store"
)

// targetState is where a check stands. It starts unknown; its targets are
// served only once it is healthy.
type targetState int

const (
	stateUnknown targetState = iota
	stateHealthy
	stateUnhealthy
)

func (s targetState) String() string {
	switch s {
	case stateHealthy:
		return "healthy"
	case stateUnhealthy:
		return "unhealthy"
	}
	return "unknown"
}

// running holds the running checker for each configuration. On a reload
// CoreDNS starts the new instance before it stops the old one: the new
// checker starts from what the old one knew instead of from unknown, so a
// reload never makes this cluster advertise no targets until the first
// checks come back.
var (
	runningMu sync.Mutex
	running   = map[string]*checker{}
)

// linger is how long a check that no host wants any more keeps its verdict
// (unchecked) before it is forgotten: a host that moves between objects, or
// whose object is replaced, is briefly absent from the store, and must come
// back with its verdicts rather than from unknown.
func (hc *healthCheck) linger() time.Duration { return max(30*time.Second, 3*hc.interval) }

// checker runs the checks on a fixed pool of workers and publishes, on each
// store change, an immutable index of the checks that the query path reads.
type checker struct {
	hc     healthCheck
	zones  []string
	prefix string
	reader store.Store
	probe  func(ctx context.Context, p probeSpec) error
	// changed is called when a check's verdict changes (nil: nobody asks).
	changed func()

	snap  atomic.Pointer[snapshot]
	ready atomic.Bool

	mu     sync.Mutex
	checks map[probeSpec]*check
	queue  checkQueue // wanted checks not in flight, by due time
	counts [3]int     // wanted checks by state, as published in targetsByState
	// unchecked is the number of targets not checked at the last rescan, by
	// reason, as published in uncheckedTargets.
	unchecked map[string]int

	scanned bool // the store was scanned once: ready may latch

	wake chan struct{} // a check became due sooner than the scheduler waits
	jobs chan *check

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// check is one probeSpec's state. key is immutable; the rest is held under
// the checker's mu, but healthy, which the query path reads.
type check struct {
	key     probeSpec
	healthy atomic.Bool

	state   targetState
	checked bool
	passRun int
	failRun int

	wanted   bool      // some host's target is checked with it
	inflight bool      // a worker runs it
	unwanted time.Time // since when no host wants it
	due      time.Time
	idx      int // in the queue; -1 when not queued (in flight, or unwanted)
}

// snapshot is what the query path reads: every check known (wanted or
// lingering) and the parsed checks of hosts with health/* properties.
type snapshot struct {
	checks map[probeSpec]*check
	hosts  map[string]cachedHost
}

type cachedHost struct {
	props [3]string
	hc    hostCheck
}

func hostProps(h *store.Host) [3]string {
	return [3]string{h.Properties[propCheck], h.Properties[propExpect], h.Properties[propAddress]}
}

func newChecker(hc healthCheck, zones []string, prefix string, reader store.Store) *checker {
	c := &checker{
		hc: hc, zones: zones, prefix: prefix, reader: reader,
		checks: map[probeSpec]*check{}, unchecked: map[string]int{},
		wake: make(chan struct{}, 1), jobs: make(chan *check),
	}
	c.probe = c.check
	c.snap.Store(&snapshot{})
	return c
}

// key identifies the configuration: a reloaded Corefile with the same
// stanza takes over the state of the running checker.
func (c *checker) key() string {
	return fmt.Sprintf("%q %q %+v", c.zones, c.prefix, c.hc)
}

// healthy returns addrs (h's targets of one family) without those whose
// check is not healthy: addrs itself when all are. It allocates only when a
// target is left out.
func (c *checker) healthy(h *store.Host, addrs []netip.Addr) []netip.Addr {
	if len(addrs) == 0 {
		return addrs
	}
	snap := c.snap.Load()
	hck := c.hostCheck(snap, h)
	if hck.none {
		return addrs
	}
	up := func(ip netip.Addr) bool {
		if hck.invalid {
			return false
		}
		key := hck.spec
		if !key.addr.IsValid() {
			key.addr = ip.Unmap()
		}
		ch := snap.checks[key]
		return ch != nil && ch.healthy.Load()
	}
	for i, ip := range addrs {
		if up(ip) {
			continue
		}
		out := make([]netip.Addr, i, len(addrs)-1)
		copy(out, addrs[:i])
		for _, ip := range addrs[i+1:] {
			if up(ip) {
				out = append(out, ip)
			}
		}
		return out
	}
	return addrs
}

// hostCheck returns h's check, parsed at the last rescan where its
// properties are unchanged since.
func (c *checker) hostCheck(snap *snapshot, h *store.Host) hostCheck {
	if len(h.Properties) == 0 {
		return hostCheck{none: c.hc.none, spec: c.hc.def}
	}
	if cached, ok := snap.hosts[h.Name]; ok && cached.props == hostProps(h) {
		return cached.hc
	}
	return c.hc.forHost(h)
}

func (c *checker) start() {
	// The checker this one takes over from on a reload: its checks' state is
	// taken before the first rescan, so that the healthy targets stay healthy
	// from the first query the new instance serves.
	runningMu.Lock()
	if prev := running[c.key()]; prev != nil && prev != c {
		now := time.Now()
		prev.mu.Lock()
		c.mu.Lock()
		for key, p := range prev.checks {
			ch := &check{key: key, state: p.state, checked: p.checked, passRun: p.passRun, failRun: p.failRun, due: p.due, unwanted: now, idx: -1}
			ch.healthy.Store(ch.state == stateHealthy)
			c.checks[key] = ch // wanted again by the first rescan, or it lingers
		}
		c.publish(nil)
		c.mu.Unlock()
		prev.mu.Unlock()
		c.ready.Store(prev.ready.Load())
	}
	running[c.key()] = c
	runningMu.Unlock()

	c.ctx, c.cancel = context.WithCancel(context.Background())
	changed, cancel := c.reader.Subscribe()
	c.wg.Add(2 + c.hc.workers)
	go func() {
		defer c.wg.Done()
		defer cancel()
		// Targets follow the store: a change is scanned for targets that
		// appeared or went away when the store publishes it, not on a timer.
		for {
			c.rescan()
			select {
			case <-c.ctx.Done():
				return
			case <-changed:
			}
		}
	}()
	go c.schedule()
	for range c.hc.workers {
		go c.work()
	}
}

func (c *checker) stop() {
	if c.cancel == nil {
		return
	}
	c.cancel()
	c.wg.Wait()
	runningMu.Lock()
	if running[c.key()] == c {
		delete(running, c.key())
	}
	runningMu.Unlock()
	c.mu.Lock()
	for s, n := range c.counts {
		targetsByState.WithLabelValues(targetState(s).String()).Sub(float64(n))
	}
	c.counts = [3]int{}
	for reason, n := range c.unchecked {
		uncheckedTargets.WithLabelValues(reason).Sub(float64(n))
	}
	clear(c.unchecked)
	c.mu.Unlock()
}

// schedule hands due checks to the workers, blocking while all are busy:
// however many targets there are, at most `workers` checks are in flight.
func (c *checker) schedule() {
	defer c.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		c.mu.Lock()
		var next *check
		wait := time.Hour
		if len(c.queue) > 0 {
			if d := time.Until(c.queue[0].due); d <= 0 {
				next = heap.Pop(&c.queue).(*check)
				next.inflight = true
			} else {
				wait = d
			}
		}
		c.mu.Unlock()
		if next != nil {
			select {
			case c.jobs <- next:
				continue
			case <-c.ctx.Done():
				return
			}
		}
		timer.Reset(wait)
		select {
		case <-c.ctx.Done():
			return
		case <-c.wake:
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

func (c *checker) work() {
	defer c.wg.Done()
	for {
		select {
		case <-c.ctx.Done():
			return
		case ch := <-c.jobs:
			cctx, cancel := context.WithTimeout(c.ctx, c.hc.timeout)
			err := c.probe(cctx, ch.key)
			cancel()
			if c.ctx.Err() != nil {
				return
			}
			c.record(ch, err)
		}
	}
}

// add creates the check of key, wanted and due now; c.mu is held.
func (c *checker) add(key probeSpec) *check {
	ch := &check{key: key, wanted: true, due: time.Now(), idx: -1}
	c.checks[key] = ch
	c.counts[stateUnknown]++
	targetsByState.WithLabelValues(stateUnknown.String()).Inc()
	heap.Push(&c.queue, ch)
	return ch
}

// want marks ch wanted again after it lingered; c.mu is held.
func (c *checker) want(ch *check) {
	if ch.wanted {
		return
	}
	ch.wanted = true
	c.counts[ch.state]++
	targetsByState.WithLabelValues(ch.state.String()).Inc()
	if ch.idx < 0 && !ch.inflight {
		heap.Push(&c.queue, ch)
	}
}

// unwant stops checking ch; its verdict lingers. c.mu is held.
func (c *checker) unwant(ch *check, now time.Time) {
	if !ch.wanted {
		return
	}
	ch.wanted, ch.unwanted = false, now
	c.counts[ch.state]--
	targetsByState.WithLabelValues(ch.state.String()).Dec()
	if ch.idx >= 0 {
		heap.Remove(&c.queue, ch.idx)
	}
}

// Reasons a target is not checked, the label of uncheckedTargets.
const (
	reasonRefused = "refused"  // an address never checked unless allowed
	reasonHost    = "host_cap" // beyond max_per_host
	reasonZone    = "zone_cap" // beyond max_per_zone
	reasonInvalid = "invalid"  // health/* properties that do not parse
)

// rescan finds the checks that the store's hosts want, starts those that
// are new, and lets those no host wants linger, then forgets them.
func (c *checker) rescan() {
	if !c.reader.Synced() {
		return
	}
	wanted := map[probeSpec]struct{}{}
	hosts := map[string]cachedHost{}
	unchecked := map[string]int{}
	firstHost := map[string]string{}
	skip := func(reason, host string, n int) {
		if n <= 0 {
			return
		}
		if unchecked[reason] == 0 {
			firstHost[reason] = host
		}
		unchecked[reason] += n
	}
	for _, zone := range c.zones {
		var hs []*store.Host
		c.reader.Hosts(zone, func(h *store.Host) bool {
			// k8gb's assembled answers are served as written and hold
			// other clusters' targets: not checked. A literal localtargets-
			// name (k8gb's operator writes it) is served as written too, but
			// holds this cluster's own targets: they are checked, unserved,
			// so that the host moved from the operator's object to a source
			// of its own finds their verdicts rather than unknown.
			if store.Classify(h, c.prefix) == store.Verbatim {
				return true
			}
			if len(h.A)+len(h.AAAA) > 0 {
				hs = append(hs, h)
			}
			return true
		})
		// In name order: which hosts are beyond the zone's cap does not
		// change from one rescan to the next.
		slices.SortFunc(hs, func(a, b *store.Host) int { return strings.Compare(a.Name, b.Name) })
		inZone := map[probeSpec]struct{}{}
		for _, h := range hs {
			hck := c.hc.forHost(h)
			if len(h.Properties) > 0 {
				hosts[h.Name] = cachedHost{props: hostProps(h), hc: hck}
			}
			if hck.none {
				continue
			}
			if hck.invalid {
				skip(reasonInvalid, h.Name, len(h.A)+len(h.AAAA))
				continue
			}
			// Every target, also those source health withdraws (Host.Ready):
			// a verdict is the check's, and a source object that becomes
			// ready again finds its targets' verdicts current.
			for _, family := range [][]netip.Addr{h.A, h.AAAA} {
				skip(reasonHost, h.Name, len(family)-c.hc.maxPerHost)
				for _, ip := range family[:min(len(family), c.hc.maxPerHost)] {
					key := hck.spec
					if !key.addr.IsValid() {
						key.addr = ip.Unmap()
					}
					if !c.hc.checkable(key.addr) {
						skip(reasonRefused, h.Name, 1)
						continue
					}
					if _, ok := inZone[key]; !ok {
						if len(inZone) >= c.hc.maxPerZone {
							skip(reasonZone, h.Name, 1)
							continue
						}
						inZone[key] = struct{}{}
					}
					wanted[key] = struct{}{}
				}
			}
		}
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	for key := range wanted {
		if ch, ok := c.checks[key]; ok {
			c.want(ch)
		} else {
			c.add(key)
		}
	}
	var lingering []*check
	for key, ch := range c.checks {
		if _, ok := wanted[key]; ok {
			continue
		}
		c.unwant(ch, now)
		if now.Sub(ch.unwanted) > c.hc.linger() {
			delete(c.checks, key)
			continue
		}
		lingering = append(lingering, ch)
	}
	// Lingering verdicts are bounded too: a tenant who churns addresses
	// does not grow them past a zone's worth.
	if limit := c.hc.maxPerZone * len(c.zones); len(lingering) > limit {
		slices.SortFunc(lingering, func(a, b *check) int { return a.unwanted.Compare(b.unwanted) })
		for _, ch := range lingering[:len(lingering)-limit] {
			delete(c.checks, ch.key)
		}
	}
	c.publish(hosts)
	c.setUnchecked(unchecked, firstHost)
	c.scanned = true
	c.updateReady()
	c.wakeScheduler()
}

// setUnchecked publishes the counts of targets not checked and logs a
// reason whose count changed, by host name: the addresses are not logged.
// c.mu is held.
func (c *checker) setUnchecked(unchecked map[string]int, firstHost map[string]string) {
	for _, reason := range []string{reasonRefused, reasonHost, reasonZone, reasonInvalid} {
		n, old := unchecked[reason], c.unchecked[reason]
		if n == old {
			continue
		}
		uncheckedTargets.WithLabelValues(reason).Add(float64(n - old))
		if n > 0 {
			switch reason {
			case reasonRefused:
				log.Warningf("%d targets not checked and not served, of hosts such as %s: loopback, link-local, unspecified or metadata addresses (see allow)", n, firstHost[reason])
			case reasonHost:
				log.Warningf("%d targets not checked and not served, of hosts such as %s: beyond %d per host and family (see max_per_host)", n, firstHost[reason], c.hc.maxPerHost)
			case reasonZone:
				log.Warningf("%d targets not checked and not served, of hosts such as %s: beyond %d checks per zone (see max_per_zone)", n, firstHost[reason], c.hc.maxPerZone)
			case reasonInvalid:
				log.Warningf("%d targets not served, of hosts such as %s: their health/check, health/expect or health/address property does not parse", n, firstHost[reason])
			}
		}
	}
	c.unchecked = unchecked
}

// record moves ch through its states: unknown -> healthy on the first pass,
// unknown -> unhealthy on the first failure, healthy -> unhealthy after
// `fails` failures in a row, unhealthy -> healthy after `passes` passes.
// The check is due again an interval later.
func (c *checker) record(ch *check, err error) {
	result := "pass"
	if err != nil {
		result = "fail"
	}
	checkCount.WithLabelValues(result).Inc()

	c.mu.Lock()
	defer c.mu.Unlock()
	ch.inflight = false
	if c.checks[ch.key] != ch {
		return // forgotten while the check ran
	}
	ch.checked = true
	old := ch.state
	if err == nil {
		ch.passRun++
		ch.failRun = 0
		if old == stateUnknown || (old == stateUnhealthy && ch.passRun >= c.hc.passes) {
			ch.state = stateHealthy
		}
	} else {
		ch.failRun++
		ch.passRun = 0
		if old == stateUnknown || (old == stateHealthy && ch.failRun >= c.hc.fails) {
			ch.state = stateUnhealthy
		}
	}
	ch.healthy.Store(ch.state == stateHealthy)
	if ch.state != old {
		if ch.wanted {
			c.counts[old]--
			c.counts[ch.state]++
			targetsByState.WithLabelValues(old.String()).Dec()
			targetsByState.WithLabelValues(ch.state.String()).Inc()
		}
		if c.changed != nil && (old == stateHealthy || ch.state == stateHealthy) {
			c.changed() // never blocks
		}
		if ch.state == stateHealthy {
			log.Infof("Check %s is healthy", ch.key)
		} else {
			log.Warningf("Check %s is unhealthy: %v", ch.key, err)
		}
	}
	ch.due = time.Now().Add(c.hc.interval)
	if ch.wanted && ch.idx < 0 {
		heap.Push(&c.queue, ch)
		if ch.idx == 0 {
			c.wakeScheduler() // sooner than it waits for
		}
	}
	c.updateReady()
}

func (c *checker) wakeScheduler() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// publish swaps in a new index of the checks; c.mu is held. hosts are the
// parsed checks of hosts with properties (nil: keep the last).
func (c *checker) publish(hosts map[string]cachedHost) {
	if hosts == nil {
		hosts = c.snap.Load().hosts
	}
	c.snap.Store(&snapshot{checks: maps.Clone(c.checks), hosts: hosts})
}

// updateReady latches ready once a scan of the store ran and every check
// wanted has had its first check; c.mu is held.
func (c *checker) updateReady() {
	if c.ready.Load() || !c.scanned {
		return
	}
	for _, ch := range c.checks {
		if ch.wanted && !ch.checked {
			return
		}
	}
	c.ready.Store(true)
}

type checkQueue []*check

func (q checkQueue) Len() int           { return len(q) }
func (q checkQueue) Less(i, j int) bool { return q[i].due.Before(q[j].due) }
func (q checkQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].idx, q[j].idx = i, j
}
func (q *checkQueue) Push(x any) {
	ch := x.(*check)
	ch.idx = len(*q)
	*q = append(*q, ch)
}
func (q *checkQueue) Pop() any {
	old := *q
	ch := old[len(old)-1]
	old[len(old)-1] = nil
	ch.idx = -1
	*q = old[:len(old)-1]
	return ch
}
