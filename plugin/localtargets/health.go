package localtargets

import (
	"cmp"
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

	snap  atomic.Pointer[snapshot]
	ready atomic.Bool

	mu     sync.Mutex
	checks map[probeSpec]*check
	queue  checkQueue // wanted checks not yet due, by due time
	// dueBy holds the due checks by owner, and the owners' checks in
	// flight; ring are the owners with due checks, taken in turn from
	// cursor (see pick). busy is the checks in flight.
	dueBy  map[string]*ownerChecks
	ring   []string
	cursor int
	busy   int
	counts [3]int // wanted checks by state, as published in targetsByState
	// unchecked is the number of targets not checked at the last rescan, by
	// reason, as published in uncheckedTargets.
	unchecked map[string]int
	// refused are the refused targets by class at the last rescan, as
	// published in refusedTargets; refusedHosts the hosts logged for it.
	refused      map[string]int
	refusedHosts map[string]string

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
	inReady  bool      // in its owner's ready list: due, waiting for a worker
	owner    string    // the owner whose budget it counts against (store.Host.Owner)
	runOwner string    // the owner charged while it is in flight
	unwanted time.Time // since when no host wants it
	due      time.Time
	idx      int // in the queue; -1 when not queued (in flight, ready, or unwanted)
}

// ownerChecks are one owner's due checks, first due first, and the number
// of its checks in flight.
type ownerChecks struct {
	due      []*check
	inflight int
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
		checks: map[probeSpec]*check{}, unchecked: map[string]int{}, dueBy: map[string]*ownerChecks{},
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
	for class, n := range c.refused {
		refusedTargets.WithLabelValues(class).Sub(float64(n))
	}
	clear(c.refused)
	c.mu.Unlock()
}

// schedule hands due checks to the workers, at most `workers` in flight
// however many targets there are. Due checks wait in their owner's list,
// and owners are served in turn (see pick): a tenant with many slow checks
// (a tarpit that holds each for the whole timeout) delays its own checks,
// not other owners'.
func (c *checker) schedule() {
	defer c.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		c.mu.Lock()
		now := time.Now()
		for len(c.queue) > 0 && !c.queue[0].due.After(now) {
			c.enqueue(heap.Pop(&c.queue).(*check))
		}
		var next *check
		if c.busy < c.hc.workers {
			next = c.pick()
		}
		wait := time.Hour
		if len(c.queue) > 0 {
			wait = c.queue[0].due.Sub(now)
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

// enqueue puts a due check in its owner's list; c.mu is held.
func (c *checker) enqueue(ch *check) {
	oc := c.dueBy[ch.owner]
	if oc == nil {
		oc = &ownerChecks{}
		c.dueBy[ch.owner] = oc
	}
	if len(oc.due) == 0 {
		c.ring = append(c.ring, ch.owner)
	}
	oc.due = append(oc.due, ch)
	ch.inReady = true
}

// ownerShare is how many checks one owner may have in flight: three
// quarters of the workers (at least one is left to the others whenever
// there are two), so that another owner's check, a new host's first among
// them, starts at once rather than after a slow one ends. It holds with a
// single owner too: the next may appear at any rescan.
func (c *checker) ownerShare() int {
	if c.hc.workers < 2 {
		return c.hc.workers
	}
	return c.hc.workers - max(1, c.hc.workers/4)
}

// pick returns the next due check, taking owners in turn from the cursor
// and skipping those at their share, and marks it in flight; nil when none
// may run now. c.mu is held.
func (c *checker) pick() *check {
	share := c.ownerShare()
	for tried := 0; tried < len(c.ring); {
		i := c.cursor % len(c.ring)
		owner := c.ring[i]
		oc := c.dueBy[owner]
		// Checks unwanted or forgotten since they became due are dropped.
		for len(oc.due) > 0 && (!oc.due[0].wanted || c.checks[oc.due[0].key] != oc.due[0]) {
			oc.due[0].inReady = false
			oc.due[0] = nil
			oc.due = oc.due[1:]
		}
		if len(oc.due) == 0 {
			c.ring = slices.Delete(c.ring, i, i+1)
			if oc.inflight == 0 {
				delete(c.dueBy, owner)
			}
			continue // the same index is the next owner
		}
		if oc.inflight >= share {
			c.cursor = i + 1
			tried++
			continue
		}
		ch := oc.due[0]
		oc.due[0] = nil
		oc.due = oc.due[1:]
		ch.inReady, ch.inflight, ch.runOwner = false, true, owner
		oc.inflight++
		c.busy++
		c.cursor = i + 1
		if len(oc.due) == 0 {
			// An owner is in the ring while it has due checks.
			c.ring = slices.Delete(c.ring, i, i+1)
			c.cursor = i
		}
		return ch
	}
	return nil
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
	if ch.idx < 0 && !ch.inflight && !ch.inReady {
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
	reasonRefused = "refused"  // an address or check refused (refused_targets has the class)
	reasonHost    = "host_cap" // beyond max_per_host
	reasonZone    = "zone_cap" // beyond max_per_zone
	reasonInvalid = "invalid"  // health/* properties that do not parse
)

// scan is what the store's hosts want checked: the outcome of wanted,
// computed from the store alone, which reconcile applies to the checker.
type scan struct {
	// wanted are the checks to run, each with the owner (store.Host.Owner)
	// whose budget it counts against: the first to want it.
	wanted map[probeSpec]string
	// over are the checks that a host wants but a cap leaves unchecked:
	// unless wanted too, their verdicts are forgotten, never served stale.
	over  map[probeSpec]struct{}
	hosts map[string]cachedHost // parsed checks of hosts with properties
	// unchecked counts the targets not checked, by reason; firstHost names
	// a host of each reason, for the log.
	unchecked map[string]int
	firstHost map[string]string
	// refused counts the refused targets by class, and refusedHosts names
	// the class of each host with a refused target (the first found).
	refused      map[string]int
	refusedHosts map[string]string
}

// rescan finds the checks that the store's hosts want, starts those that
// are new, and lets those no host wants linger, then forgets them.
func (c *checker) rescan() {
	if !c.reader.Synced() {
		return
	}
	c.reconcile(c.wanted(c.snap.Load().checks))
}

// wanted walks the store and returns the checks its hosts want, within the
// caps. It reads the configuration, the store and known (the published,
// immutable index of checks, to tell which capped checks have a verdict to
// forget) only, and takes no lock of the checker.
func (c *checker) wanted(known map[probeSpec]*check) *scan {
	sc := &scan{
		wanted: map[probeSpec]string{}, over: map[probeSpec]struct{}{}, hosts: map[string]cachedHost{},
		unchecked: map[string]int{}, firstHost: map[string]string{},
		refused: map[string]int{}, refusedHosts: map[string]string{},
	}
	skip := func(reason, host string, n int) {
		if n <= 0 {
			return
		}
		if sc.unchecked[reason] == 0 {
			sc.firstHost[reason] = host
		}
		sc.unchecked[reason] += n
	}
	refuse := func(class, host string, n int) {
		skip(reasonRefused, host, n)
		sc.refused[class] += n
		if _, ok := sc.refusedHosts[host]; !ok {
			sc.refusedHosts[host] = class
		}
	}
	over := func(key probeSpec) {
		if _, ok := known[key]; ok {
			sc.over[key] = struct{}{}
		}
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
		// Each owner's hosts in name order, owners in order.
		slices.SortFunc(hs, func(a, b *store.Host) int {
			return cmp.Or(strings.Compare(a.Owner, b.Owner), strings.Compare(a.Name, b.Name))
		})
		var owners []*ownerTargets
		for i, h := range hs {
			if i == 0 || h.Owner != hs[i-1].Owner {
				owners = append(owners, &ownerTargets{owner: h.Owner})
			}
			o := owners[len(owners)-1]
			hck := c.hc.forHost(h)
			if len(h.Properties) > 0 {
				sc.hosts[h.Name] = cachedHost{props: hostProps(h), hc: hck}
			}
			switch {
			case hck.none:
				continue
			case hck.invalid:
				skip(reasonInvalid, h.Name, len(h.A)+len(h.AAAA))
				continue
			case hck.refused != "":
				refuse(hck.refused, h.Name, len(h.A)+len(h.AAAA))
				continue
			}
			// Every target, also those source health withdraws (Host.Ready):
			// a verdict is the check's, and a source object that becomes
			// ready again finds its targets' verdicts current.
			for _, family := range [][]netip.Addr{h.A, h.AAAA} {
				for j, ip := range family {
					key := hck.spec
					if !key.addr.IsValid() {
						key.addr = ip.Unmap()
					}
					if j >= c.hc.maxPerHost {
						skip(reasonHost, h.Name, 1)
						over(key)
						continue
					}
					if class := c.hc.refusal(key.addr, key.tenant); class != "" {
						refuse(class, h.Name, 1)
						continue
					}
				}
			}
			o.hosts = append(o.hosts, checkedHost{h, hck})
		}
		// The zone's budget of checks is filled round robin across owners,
		// one target of each in turn: one owner's many hosts, or names that
		// sort first, cannot take the whole cap. Which targets are beyond
		// it does not change from one rescan to the next.
		inZone := map[probeSpec]struct{}{}
		for live := owners; len(live) > 0; {
			n := 0
			for _, o := range live {
				key, host, ok := o.next(&c.hc)
				if !ok {
					continue
				}
				live[n] = o
				n++
				if _, ok := inZone[key]; !ok {
					if len(inZone) >= c.hc.maxPerZone {
						skip(reasonZone, host, 1)
						over(key)
						continue
					}
					inZone[key] = struct{}{}
				}
				if _, ok := sc.wanted[key]; !ok {
					sc.wanted[key] = o.owner
				}
			}
			live = live[:n]
		}
	}
	return sc
}

// checkedHost is a host whose targets are checked, with its check.
type checkedHost struct {
	h   *store.Host
	hck hostCheck
}

// ownerTargets walks one owner's checked targets in order: hosts in name
// order, A then AAAA, at most max_per_host of each, refused ones left out.
type ownerTargets struct {
	owner  string
	hosts  []checkedHost
	hi     int // the host
	family int // 0 A, 1 AAAA
	ti     int // the target in the family
}

// next returns the owner's next checked target: its check and host name.
func (o *ownerTargets) next(hc *healthCheck) (probeSpec, string, bool) {
	for o.hi < len(o.hosts) {
		ch := o.hosts[o.hi]
		family := ch.h.A
		if o.family == 1 {
			family = ch.h.AAAA
		}
		if o.ti >= min(len(family), hc.maxPerHost) {
			o.family, o.ti = o.family+1, 0
			if o.family == 2 {
				o.hi, o.family = o.hi+1, 0
			}
			continue
		}
		key := ch.hck.spec
		if !key.addr.IsValid() {
			key.addr = family[o.ti].Unmap()
		}
		o.ti++
		if hc.refusal(key.addr, key.tenant) != "" {
			continue
		}
		return key, ch.h.Name, true
	}
	return probeSpec{}, "", false
}

// reconcile applies a scan under the lock: the checks it wants and are new
// start, those no host wants any more linger, then are forgotten.
func (c *checker) reconcile(sc *scan) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	for key, owner := range sc.wanted {
		ch, ok := c.checks[key]
		if ok {
			c.want(ch)
		} else {
			ch = c.add(key)
		}
		ch.owner = owner
	}
	// A check beyond a cap is not checked: its verdict is forgotten at
	// once rather than served as it was when the check stopped.
	for key := range sc.over {
		if _, ok := sc.wanted[key]; ok {
			continue
		}
		if ch, ok := c.checks[key]; ok {
			c.unwant(ch, now)
			delete(c.checks, key)
		}
	}
	var lingering []*check
	for key, ch := range c.checks {
		if _, ok := sc.wanted[key]; ok {
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
	c.publish(sc.hosts)
	c.setUnchecked(sc.unchecked, sc.firstHost)
	c.setRefused(sc.refused, sc.refusedHosts)
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
				log.Warningf("%d targets not checked and not served, of hosts such as %s: refused addresses or checks (see allow, deny, tenant_address, tenant_body)", n, firstHost[reason])
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

// maxRefusedLogs bounds the hosts logged by name in one rescan: the rest
// are counted in one line.
const maxRefusedLogs = 10

// setRefused publishes the refused targets by class and logs each host
// whose check became refused, once (by host name and class, not address).
// c.mu is held.
func (c *checker) setRefused(refused map[string]int, hosts map[string]string) {
	for _, class := range refusalClasses {
		if d := refused[class] - c.refused[class]; d != 0 {
			refusedTargets.WithLabelValues(class).Add(float64(d))
		}
	}
	c.refused = refused
	var fresh []string
	for h, class := range hosts {
		if c.refusedHosts[h] != class {
			fresh = append(fresh, h)
		}
	}
	slices.Sort(fresh)
	for _, h := range fresh[:min(len(fresh), maxRefusedLogs)] {
		log.Warningf("Health check of %s refused (%s): its targets are not checked and not served (see allow, deny, tenant_address, tenant_body)", h, hosts[h])
	}
	if len(fresh) > maxRefusedLogs {
		log.Warningf("Health checks of %d more hosts refused", len(fresh)-maxRefusedLogs)
	}
	c.refusedHosts = hosts
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
	c.busy--
	if oc := c.dueBy[ch.runOwner]; oc != nil {
		oc.inflight--
		if oc.inflight == 0 && len(oc.due) == 0 {
			delete(c.dueBy, ch.runOwner)
		}
	}
	c.wakeScheduler() // a worker and maybe an owner's share are free
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
		if ch.state == stateHealthy {
			log.Infof("Check %s is healthy", ch.key)
		} else {
			log.Warningf("Check %s is unhealthy: %v", ch.key, err)
		}
	}
	ch.due = time.Now().Add(c.hc.interval)
	if ch.wanted && ch.idx < 0 {
		heap.Push(&c.queue, ch)
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
