// Package builder is k8scrd's builder: it merges the objects the feeds hand
// it into immutable snapshots of the zone data (package tree), admits
// endpoints by tenancy, refuses RRsets that fit in no message, derives each
// zone's SOA serial from the data, coalesces bursts of events into one
// snapshot, and sends NOTIFY to secondaries when zones change
// (docs/architecture.md, "k8scrd's packages").
//
// The feeds call it through the few methods they need (Upsert, Remove,
// RemoveAt, Synced, Report, SetReporter); it reads no Corefile: setup.go
// builds its Config.
package builder

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coredns/coredns/plugin"
	"github.com/fleetdns/fleetdns/internal/store"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/tree"
	"github.com/miekg/dns"
)

// change is one object event from a source: obj nil means the object is gone.
type change struct {
	key      string
	obj      *object.Object
	received time.Time
	version  uint64 // of a removal: the deletion's resourceVersion (0 unknown)
}

// Builder turns object events into snapshots. Feeds call Upsert, Remove,
// RemoveAt and Synced from any goroutine; Run applies what arrived,
// coalesced over at most BatchDelay, and publishes one snapshot per batch.
// Only Run touches the indexes.
type Builder struct {
	cfg   Config
	snap  *atomic.Pointer[tree.Snapshot]
	clock atomic.Pointer[func() time.Time] // tests set it; time.Now otherwise
	co    *coalescer

	mu         sync.Mutex
	pending    map[string]change
	syncedSeen bool
	swaps      atomic.Int64 // snapshots published, for tests

	// changed, when set, is told the zones each published snapshot changed.
	changed func(zones []string)
	// published, when set, is called after every snapshot published: the
	// store's subscribers hear of it there.
	published func()

	// reporter, when set, tells an object's owners why some of its endpoints
	// are not served (Kubernetes Events); prefix is the block's
	// localtargets- prefix, whose literal records tenancy guards.
	reporter func(o *object.Object, reason, message string)
	prefix   string

	// owned by run
	objects    map[string]*object.Object
	byName     map[string]*object.Object   // name -> one object that declares it
	more       map[string][]*object.Object // name -> the others, when more than one does (rare)
	skipped    map[string]int              // tenancy-skipped endpoints per name
	conflict   map[string]int              // CNAMEs skipped beside other data per name
	oversize   map[string][]uint16         // name -> the types of its RRsets refused as too large
	refusedAt  map[string]map[string]int   // name -> tenancy reason -> endpoints refused
	owner      map[string]string           // name -> owner namespace (strict tenancy or grants)
	ownedBelow map[string]map[string]int32 // name -> namespace -> owned names strictly below
	// versions is, per zone, the highest version (resourceVersion or file
	// time) among the objects it served and the deletions observed: the
	// SOA serial's source. dataSOA holds the SOA serials the data gives
	// (directory), per zone and object key.
	versions map[string]uint64
	dataSOA  map[string]map[string]uint32
}

// Report tells an object's owners why some of its endpoints are not
// served; it does nothing until SetReporter gives it a way (Events).
func (b *Builder) Report(o *object.Object, reason, message string) {
	if b.reporter != nil {
		b.reporter(o, reason, message)
	}
}

// SetReporter sets how Report reaches an object's owners. Call it before
// the first object arrives.
func (b *Builder) SetReporter(f func(o *object.Object, reason, message string)) { b.reporter = f }

// SetPrefix sets the block's localtargets- prefix, whose literal records
// tenancy guards. Call it before Run.
func (b *Builder) SetPrefix(prefix string) { b.prefix = prefix }

// OnChange sets changed, told the zones each published snapshot changed,
// and published, called after every snapshot published (either may be
// nil). Call it before Run.
func (b *Builder) OnChange(changed func(zones []string), published func()) {
	b.changed, b.published = changed, published
}

// Swaps is the number of snapshots published so far.
func (b *Builder) Swaps() int64 { return b.swaps.Load() }

// BatchDelay is how long the builder gathers a burst of events into one snapshot.
const BatchDelay = 20 * time.Millisecond

// New returns a builder of the zones in cfg that publishes its snapshots
// to snap, which holds the empty zones at once (not synced).
func New(cfg Config, snap *atomic.Pointer[tree.Snapshot]) *Builder {
	b := &Builder{
		cfg: cfg, snap: snap, co: newCoalescer(BatchDelay, 0),
		pending: make(map[string]change),
		objects: make(map[string]*object.Object), byName: make(map[string]*object.Object), more: make(map[string][]*object.Object),
		skipped: make(map[string]int), conflict: make(map[string]int), oversize: map[string][]uint16{},
		refusedAt: map[string]map[string]int{}, owner: map[string]string{}, ownedBelow: map[string]map[string]int32{},
		prefix:   store.DefaultPrefix,
		versions: map[string]uint64{}, dataSOA: map[string]map[string]uint32{},
	}
	now := time.Now
	b.clock.Store(&now)
	s := &tree.Snapshot{Zones: make(map[string]*tree.Zone)}
	for i := range s.Shards {
		s.Shards[i] = map[string]*tree.Node{}
	}
	for _, z := range cfg.Zones {
		s.Zones[z] = b.zone(z, nil, 0, 0, nil)
	}
	snap.Store(s)
	return b
}

func (b *Builder) now() time.Time { return (*b.clock.Load())() }

// Upsert adds or replaces the object at o.Key.
func (b *Builder) Upsert(o *object.Object) { b.queue(change{key: o.Key, obj: o, received: b.now()}) }

// Remove removes the object at key (deleted at an unknown version).
func (b *Builder) Remove(key string) { b.RemoveAt(key, 0) }

// RemoveAt removes the object at key, deleted at version (its deletion's
// resourceVersion; 0 when unknown).
func (b *Builder) RemoveAt(key string, version uint64) {
	b.queue(change{key: key, received: b.now(), version: version})
}

// Synced marks the end of the feed's first full listing.
func (b *Builder) Synced() {
	b.mu.Lock()
	b.syncedSeen = true
	b.mu.Unlock()
	b.co.poke()
}

func (b *Builder) queue(c change) {
	b.mu.Lock()
	if old, ok := b.pending[c.key]; ok {
		c.received = old.received // the oldest event waiting decides the delay
	}
	b.pending[c.key] = c
	b.mu.Unlock()
	b.co.poke()
}

// Run applies batches until stop is closed: a burst waits a short, bounded
// delay so that one swap carries it.
func (b *Builder) Run(stop <-chan struct{}) {
	b.co.run(stop, func() time.Duration {
		b.Flush()
		return 0
	})
}

// Flush applies everything pending now and publishes the result. Run calls
// it; so do tests and benchmarks that run no Run.
func (b *Builder) Flush() {
	b.mu.Lock()
	batch := b.pending
	synced := b.syncedSeen
	b.pending = make(map[string]change, len(batch))
	b.mu.Unlock()
	cur := b.snap.Load()
	if len(batch) == 0 && synced == cur.Synced {
		return
	}
	next := b.apply(cur, batch)
	next.Synced = synced
	b.snap.Store(next)
	b.swaps.Add(1)
	if b.changed != nil && cur.Synced {
		var zones []string
		for z, zd := range next.Zones {
			if zd != cur.Zones[z] {
				zones = append(zones, z)
			}
		}
		if len(zones) > 0 {
			b.changed(zones)
		}
	}

	now := b.now()
	lastSync.Set(float64(now.Unix()))
	for _, c := range batch {
		if !cur.Synced {
			break // the first listing: its objects changed before we started
		}
		applyDelay.Observe(now.Sub(c.received).Seconds())
		if c.obj != nil && !c.obj.Changed.IsZero() {
			propagationDelay.Observe(max(0, now.Sub(c.obj.Changed).Seconds()))
		}
	}
	for z, zd := range next.Zones {
		recordsGauge.WithLabelValues(z).Set(float64(zd.Records))
	}
	// Last: a subscriber woken here (start-up's wait among them) finds the
	// metrics of the snapshot it reads already set.
	if b.published != nil {
		b.published()
	}
}

// edit is the copy-on-write state of one batch.
type edit struct {
	s       *tree.Snapshot
	copied  [tree.NShards]bool
	touched map[string]bool // zones changed
	records map[string]int  // record count deltas per zone
	cuts    map[string]int  // delegation count deltas per zone
}

func (e *edit) shard(name string) map[string]*tree.Node {
	i := tree.ShardOf(name)
	if !e.copied[i] {
		e.s.Shards[i] = maps.Clone(e.s.Shards[i])
		e.copied[i] = true
	}
	return e.s.Shards[i]
}

// apply builds the snapshot that follows cur after batch. It copies only the
// shards that hold a changed name (or an ancestor whose count changed).
func (b *Builder) apply(cur *tree.Snapshot, batch map[string]change) *tree.Snapshot {
	next := *cur // copies the shard array: nShards pointers
	next.Zones = maps.Clone(cur.Zones)
	e := &edit{s: &next, touched: map[string]bool{}, records: map[string]int{}, cuts: map[string]int{}}

	names := map[string]bool{}
	for key, c := range batch {
		version := c.version
		if c.obj != nil {
			version = c.obj.Version
		}
		if old := b.objects[key]; old != nil {
			for name := range old.Names {
				names[name] = true
				b.undeclare(name, old)
			}
			b.observe(e, old, version)
			delete(b.objects, key)
		}
		if o := c.obj; o != nil {
			b.objects[key] = o
			for name := range o.Names {
				names[name] = true
				b.declare(name, o)
			}
			b.observe(e, o, version)
		}
	}
	// A name's owner decides for its ancestors' delegations and wildcards
	// and for its literal localtargets- name: those are merged again, in
	// rounds (owners change on creation and deletion; the chain is short).
	for round := 0; len(names) > 0 && round < 8; round++ {
		again := map[string]bool{}
		for name := range names {
			for _, dep := range b.rebuild(e, name) {
				if len(b.declaredBy(dep)) > 0 {
					again[dep] = true
				}
			}
		}
		names = again
	}

	for z := range e.touched {
		old := next.Zones[z]
		apex := next.Get(z)
		next.Zones[z] = b.zone(z, apex, old.Records+e.records[z], old.Cuts+e.cuts[z], old)
	}
	return &next
}

// declare notes that o declares name.
func (b *Builder) declare(name string, o *object.Object) {
	if _, ok := b.byName[name]; !ok {
		b.byName[name] = o
		return
	}
	b.more[name] = append(b.more[name], o)
}

// undeclare forgets that o declares name.
func (b *Builder) undeclare(name string, o *object.Object) {
	more := b.more[name]
	if b.byName[name] == o {
		if len(more) == 0 {
			delete(b.byName, name)
			return
		}
		b.byName[name], more = more[0], more[1:]
	} else {
		more = slices.DeleteFunc(more, func(x *object.Object) bool { return x == o })
	}
	if len(more) == 0 {
		delete(b.more, name)
	} else {
		b.more[name] = more
	}
}

// declaredBy returns the objects that declare name, in no order.
func (b *Builder) declaredBy(name string) []*object.Object {
	first, ok := b.byName[name]
	if !ok {
		return nil
	}
	return append([]*object.Object{first}, b.more[name]...)
}

// rebuild recomputes the node at name from every object that declares it,
// and returns the names whose tenancy decisions depend on its owner when
// that changed.
func (b *Builder) rebuild(e *edit, name string) (again []string) {
	zone := plugin.Zones(b.cfg.Zones).Matches(name)
	old := e.s.Get(name)
	n, owner := b.merge(name, zone)
	switch {
	case b.cfg.strictish():
		again = b.setOwner(name, zone, owner)
	case !strings.HasPrefix(name, b.prefix):
		// Shared tenancy: whether a literal localtargets- record is served
		// depends on who publishes its host.
		again = []string{b.prefix + name}
	}

	var below int32
	if old != nil {
		below = old.Below
	}
	wasDeclared := old != nil && old.Declared()
	switch {
	case n != nil:
		n.Below = below
		e.shard(name)[name] = n
	case below > 0:
		e.shard(name)[name] = &tree.Node{Below: below}
	default:
		if old != nil {
			delete(e.shard(name), name)
		}
	}
	e.touched[zone] = true
	e.records[zone] += countRRs(n) - countRRs(old)
	if old != nil && old.Cut {
		e.cuts[zone]--
	}
	if n != nil && n.Cut {
		e.cuts[zone]++
	}
	if wasDeclared != (n != nil) && name != zone {
		delta := int32(1)
		if wasDeclared {
			delta = -1
		}
		b.ancestors(e, name, zone, delta)
	}
	return again
}

// ancestors adds delta to the below count of every name strictly between name
// and the zone apex: these are the empty non-terminals a declared name implies.
func (b *Builder) ancestors(e *edit, name, zone string, delta int32) {
	for p := tree.Parent(name); p != "" && p != zone && len(p) > len(zone); p = tree.Parent(p) {
		sh := e.shard(p)
		old := sh[p]
		var n tree.Node
		if old != nil {
			n = *old
		} else {
			n = tree.Node{}
		}
		n.Below += delta
		if n.Below <= 0 && !n.Declared() {
			delete(sh, p)
			continue
		}
		sh[p] = &n
	}
}

func countRRs(n *tree.Node) int {
	if n == nil {
		return 0
	}
	c := 0
	for _, set := range n.RRsets {
		c += len(set.RRs)
	}
	return c
}

// merge builds the node at name: targets merged and de-duplicated across
// objects, a deterministic order, one TTL per RRset (the smallest, RFC 2181
// §5.2), tenancy applied, a CNAME beside other data skipped.
func (b *Builder) merge(name, zone string) (*tree.Node, string) {
	first, ok := b.byName[name]
	if !ok {
		b.count(name, 0, 0)
		b.refuse(name, nil)
		b.refuseOversized(name, nil, nil)
		return nil, ""
	}
	// Built here, not in a helper, so that the slice and owned below stay
	// on the stack: this runs for every name a change touches.
	objs := append([]*object.Object{first}, b.more[name]...)
	storeOrder(objs)
	kept, owner, refused := b.admit(name, objs)
	if len(kept) == 0 {
		// Nobody may publish here: the name does not exist (NXDOMAIN, or
		// an empty non-terminal above names that others may publish).
		b.count(name, b.refuse(name, refused), 0)
		b.refuseOversized(name, nil, nil)
		return nil, ""
	}
	// The RRset merge: one set per type (owned[i]: sets[i].Addrs is the
	// builder's own copy, not one endpoint's), and the store's view h.
	var sets []tree.Merged
	var owned []bool
	unready := false
	h := store.Host{Name: name, Owner: cmp.Or(owner, kept[0].Namespace)}
	for _, o := range kept {
		eps := o.At(name)
		h.Verbatim = h.Verbatim || o.Verbatim && o.Namespace == kept[0].Namespace // from the host's owner only (the oldest publisher)
		for i := range eps {
			ep := &eps[i]
			j := slices.IndexFunc(sets, func(s tree.Merged) bool { return s.Type == ep.Type })
			if j < 0 {
				// An endpoint's addresses are sorted and unique already: a
				// set of one endpoint uses them as they are.
				sets = append(sets, tree.Merged{Type: ep.Type, TTL: ep.TTL, Addrs: ep.Addrs})
				owned = append(owned, false)
				j = len(sets) - 1
			} else if len(ep.Addrs) > 0 {
				if !owned[j] {
					sets[j].Addrs = slices.Clone(sets[j].Addrs)
					owned[j] = true
				}
				sets[j].Addrs = append(sets[j].Addrs, ep.Addrs...)
			}
			sets[j].TTL = min(sets[j].TTL, ep.TTL)
			sets[j].RRs = append(sets[j].RRs, ep.RRs...)
			unready = hostView(&h, ep) || unready
		}
	}
	if !h.TTLSet {
		h.TTL = b.cfg.TTL
	}

	sets, owned, refused, ok = b.refuseCovering(name, zone, owner, kept, sets, owned, refused)
	if !ok {
		// A refused wildcard does not exist: it synthesizes nothing.
		b.count(name, b.refuse(name, refused), 0)
		b.refuseOversized(name, nil, nil)
		return nil, owner
	}
	skipped := b.refuse(name, refused)

	canonicalRRsets(sets, owned)
	sets, conflicts := cnameAlone(name, zone, sets)
	if conflicts > 0 && b.conflict[name] == 0 {
		log.Warningf("CNAME at %s skipped: other data or another CNAME at the same name", name)
	}
	b.count(name, skipped, conflicts)

	sets = slices.DeleteFunc(sets, func(s tree.Merged) bool { return len(s.RRs) == 0 && len(s.Addrs) == 0 })
	if had := len(sets); had > 0 {
		if sets = b.refuseOversized(name, sets, kept); len(sets) == 0 {
			// Nothing left to serve: the name does not exist, as where
			// BIND and Knot refuse the record.
			return nil, owner
		}
	} else {
		b.refuseOversized(name, nil, nil)
	}
	slices.SortFunc(sets, func(x, y tree.Merged) int { return cmp.Compare(x.Type, y.Type) })
	if unready {
		h.Withdrawn = withdrawn(name, kept, sets)
	}
	// gslb answers no all-down CNAME beside other data (RFC 1034 §3.6.2).
	h.OtherTypes = slices.ContainsFunc(sets, func(s tree.Merged) bool { return s.Type != dns.TypeA && s.Type != dns.TypeAAAA })
	n := tree.NewNode(h, sets)
	n.Cut = name != zone && n.Get(dns.TypeNS) != nil
	return n, owner
}

// storeOrder sorts the objects at a name in store order: the oldest
// object first, then namespace/name, then key.
func storeOrder(objs []*object.Object) {
	slices.SortFunc(objs, func(x, y *object.Object) int {
		if c := x.Created.Compare(y.Created); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(x.Namespace, y.Namespace), cmp.Compare(x.Name, y.Name), cmp.Compare(x.Key, y.Key))
	})
}

// hostView adds endpoint ep to the store's view h of its name: whether an
// address is declared, the lowest TTL an address endpoint sets, the first
// value of each property and label. It reports whether ep is an unready
// object's addresses.
func hostView(h *store.Host, ep *object.Endpoint) (unready bool) {
	address := ep.Type == dns.TypeA || ep.Type == dns.TypeAAAA
	h.AddressDeclared = h.AddressDeclared || address
	if address && ep.TTLSet && (!h.TTLSet || ep.TTL < h.TTL) {
		h.TTL, h.TTLSet = ep.TTL, true
	}
	if ep.Extra == nil {
		return false
	}
	for _, p := range ep.Extra.Props {
		if _, ok := h.Properties[p.Name]; !ok {
			if h.Properties == nil {
				h.Properties = map[string]string{}
			}
			h.Properties[p.Name] = p.Value
		}
	}
	for k, v := range ep.Extra.Labels {
		if _, ok := h.Labels[k]; !ok {
			if h.Labels == nil {
				h.Labels = map[string]string{}
			}
			h.Labels[k] = v
		}
	}
	return address && ep.Extra.Unready && len(ep.Addrs) > 0
}

// refuseCovering is tenancy's admission of what covers others' names: what
// a name's owner owns, nobody else may take from above, so a delegation or
// a wildcard is refused where it would cover a name that another namespace
// owns or is granted. A refused delegation leaves the name's other sets; a
// refused wildcard leaves nothing (ok false).
func (b *Builder) refuseCovering(name, zone, owner string, kept []*object.Object, sets []tree.Merged, owned []bool, refused []refusal) ([]tree.Merged, []bool, []refusal, bool) {
	if !b.cfg.strictish() || name == zone {
		return sets, owned, refused, true
	}
	cover := -1 // the sets refused: -2 all (a wildcard), else the NS set's index
	if rest, wild := strings.CutPrefix(name, "*."); wild && b.covers(rest, owner) {
		cover = -2
	} else if i := slices.IndexFunc(sets, func(s tree.Merged) bool { return s.Type == dns.TypeNS }); i >= 0 && b.covers(name, owner) {
		cover = i
	}
	if cover == -1 {
		return sets, owned, refused, true
	}
	for _, o := range kept {
		msg := fmt.Sprintf("the delegation at %s would cover names another namespace owns", name)
		if cover == -2 {
			msg = fmt.Sprintf("the wildcard %s would cover names another namespace owns", name)
		}
		refused = append(refused, refusal{o, refusedCover, msg})
	}
	if cover == -2 {
		return nil, nil, refused, false
	}
	return slices.Delete(sets, cover, cover+1), slices.Delete(owned, cover, cover+1), refused, true
}

// canonicalRRsets gives each set a deterministic order without duplicates
// and one TTL (copying a record only where an endpoint's TTL differs).
func canonicalRRsets(sets []tree.Merged, owned []bool) {
	for i := range sets {
		if owned[i] {
			slices.SortFunc(sets[i].Addrs, netip.Addr.Compare)
			sets[i].Addrs = slices.Clip(slices.Compact(sets[i].Addrs))
		}
		rrs := sets[i].RRs
		slices.SortStableFunc(rrs, compareRR)
		rrs = slices.CompactFunc(rrs, func(x, y dns.RR) bool { return compareRR(x, y) == 0 })
		for j, rr := range rrs {
			if rr.Header().Ttl != sets[i].TTL {
				rrs[j] = dns.Copy(rr)
				rrs[j].Header().Ttl = sets[i].TTL
			}
		}
		sets[i].RRs = slices.Clip(rrs)
	}
}

// cnameAlone enforces RFC 1034 §3.6.2, a CNAME has no other data beside it:
// the other data wins, and of two CNAMEs the first in store order. It
// returns the sets kept and the CNAME records skipped.
func cnameAlone(name, zone string, sets []tree.Merged) ([]tree.Merged, int) {
	i := slices.IndexFunc(sets, func(s tree.Merged) bool { return s.Type == dns.TypeCNAME })
	if i < 0 || len(sets[i].RRs) == 0 {
		return sets, 0
	}
	conflicts := 0
	if len(sets) > 1 || name == zone {
		conflicts = len(sets[i].RRs)
		sets = slices.Delete(sets, i, i+1)
	} else if len(sets[i].RRs) > 1 {
		// Two objects point one name at different targets: keep the first in order.
		conflicts = len(sets[i].RRs) - 1
		sets[i].RRs = sets[i].RRs[:1]
	}
	return sets, conflicts
}

// withdrawn returns what source health leaves of the address sets at name
// (as served: merged, and without a set refused as oversized): an address
// that a ready endpoint of the kept objects contributes stays, one that
// only unready endpoints contribute is withdrawn. It is nil when nothing is
// withdrawn. The zone's own answers keep every address; only localtargets-
// and gslb answers read the ready ones (store.Host.Ready).
func withdrawn(name string, kept []*object.Object, sets []tree.Merged) *store.Withdrawn {
	ready := map[netip.Addr]struct{}{}
	for _, o := range kept {
		for _, ep := range o.At(name) {
			if (ep.Type == dns.TypeA || ep.Type == dns.TypeAAAA) && (ep.Extra == nil || !ep.Extra.Unready) {
				for _, a := range ep.Addrs {
					ready[a] = struct{}{}
				}
			}
		}
	}
	var w store.Withdrawn
	gone := false
	for _, s := range sets {
		var out *[]netip.Addr
		switch s.Type {
		case dns.TypeA:
			out = &w.ReadyA
		case dns.TypeAAAA:
			out = &w.ReadyAAAA
		default:
			continue
		}
		for _, a := range s.Addrs {
			if _, ok := ready[a]; ok {
				*out = append(*out, a)
			} else {
				gone = true
			}
		}
	}
	if !gone {
		return nil
	}
	return &w
}

// maxMsgSize is the largest DNS message, over TCP (RFC 1035 §4.2.2) and in
// a transfer's messages alike.
const maxMsgSize = dns.MaxMsgSize

// refuseOversized returns sets without the RRsets that fit in no answer
// (see oversized). A set refused now that was not before is logged once,
// counted in invalid_endpoints_total{reason="size"} and reported to the
// objects that declare it; nil sets clears what name had.
func (b *Builder) refuseOversized(name string, sets []tree.Merged, kept []*object.Object) []tree.Merged {
	var refused []uint16
	sets = slices.DeleteFunc(sets, func(s tree.Merged) bool {
		size, too := b.oversized(name, s)
		if !too {
			return false
		}
		refused = append(refused, s.Type)
		if slices.Contains(b.oversize[name], s.Type) {
			return true
		}
		msg := fmt.Sprintf("the %s RRset at %s needs %d octets with its question and the SOA, more than the %d a DNS message holds: refused, as BIND and Knot refuse it",
			dns.TypeToString[s.Type], name, size, maxMsgSize)
		log.Warning(msg)
		object.InvalidEndpoints.WithLabelValues(object.ReasonSize).Inc()
		if b.reporter != nil {
			for _, o := range kept {
				if slices.ContainsFunc(o.At(name), func(e object.Endpoint) bool { return e.Type == s.Type }) {
					b.Report(o, "InvalidEndpoint", msg)
				}
			}
		}
		return true
	})
	if len(refused) == 0 {
		delete(b.oversize, name)
	} else {
		b.oversize[name] = refused
	}
	return sets
}

// oversized reports whether the RRset s at name, in an answer with its
// question and the zone's SOA in the authority section (the largest answer
// a query or the first message of a transfer gives it), is larger than a
// DNS message can be, and that answer's size. Such an RRset can be served
// neither over TCP (a truncated answer without it) nor by transfer (a
// message that fails to pack). An upper bound is computed first, names
// uncompressed except the owner; only a set near the limit is packed.
func (b *Builder) oversized(name string, s tree.Merged) (int, bool) {
	var soa dns.RR
	if zd := b.snap.Load().Zones[plugin.Zones(b.cfg.Zones).Matches(name)]; zd != nil && len(zd.SOA) > 0 {
		soa = zd.SOA[0]
	}
	nameLen := len(name) + 1 // wire form of a fully qualified name
	if name == "." {
		nameLen = 1
	}
	fixed := 12 + nameLen + 4 // header and question
	if soa != nil {
		fixed += dns.Len(soa)
	}
	size := fixed
	switch s.Type {
	case dns.TypeA:
		size += len(s.Addrs) * (2 + 10 + net4Len)
	case dns.TypeAAAA:
		size += len(s.Addrs) * (2 + 10 + net6Len)
	}
	for _, rr := range s.RRs {
		size += dns.Len(rr) - nameLen + 2 // the owner as a compression pointer
	}
	if size <= maxMsgSize || len(s.Addrs) > 0 {
		return size, size > maxMsgSize
	}
	// Near the limit: names in RDATA may compress further. A single RR's
	// RDATA over 65,535 octets fits in no message however it is packed.
	for _, rr := range s.RRs {
		if dns.Len(rr)-nameLen-10 > maxMsgSize {
			return size, true
		}
	}
	m := new(dns.Msg)
	m.SetQuestion(name, s.Type)
	m.Answer = s.RRs
	if soa != nil {
		m.Ns = []dns.RR{soa}
	}
	m.Compress = true
	size = m.Len()
	return size, size > maxMsgSize
}

const (
	net4Len = 4  // A RDATA
	net6Len = 16 // AAAA RDATA
)

// compareRR orders an RRset deterministically by RDATA text (address
// RRsets are ordered as addresses, before they are records).
func compareRR(x, y dns.RR) int { return cmp.Compare(object.Rdata(x), object.Rdata(y)) }

// count keeps the tenancy and CNAME conflict gauges equal to what the store skips now.
func (b *Builder) count(name string, skipped, conflicts int) {
	if d := skipped - b.skipped[name]; d != 0 {
		tenancySkipped.Add(float64(d))
	}
	if d := conflicts - b.conflict[name]; d != 0 {
		cnameConflicts.Add(float64(d))
	}
	if skipped == 0 {
		delete(b.skipped, name)
	} else {
		b.skipped[name] = skipped
	}
	if conflicts == 0 {
		delete(b.conflict, name)
	} else {
		b.conflict[name] = conflicts
	}
}

// zone builds the zone data: SOA with the serial derived from the data
// (serial), and the apex NS RRset. old is the zone's data before, nil at start.
func (b *Builder) zone(origin string, apex *tree.Node, records, cuts int, old *tree.Zone) *tree.Zone {
	serial := b.serial(origin, old)
	c := &b.cfg
	mname := c.MName
	if mname == "" {
		mname = "ns1." + origin
	}
	rname := c.RName
	if rname == "" {
		rname = "hostmaster." + origin
	}
	soa := &dns.SOA{
		Hdr: dns.RR_Header{Name: origin, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: c.TTL},
		Ns:  mname, Mbox: rname, Serial: serial,
		Refresh: c.Refresh, Retry: c.Retry, Expire: c.Expire, Minttl: c.NegTTL,
	}
	neg := dns.Copy(soa)
	neg.Header().Ttl = min(c.TTL, c.NegTTL)
	zd := &tree.Zone{Origin: origin, Serial: serial, SOA: []dns.RR{soa}, NegSOA: []dns.RR{neg}, Records: records, Cuts: cuts}
	if apex != nil && len(apex.Get(dns.TypeNS)) > 0 {
		zd.NS = apex.Get(dns.TypeNS)
	} else {
		zd.NS = []dns.RR{&dns.NS{Hdr: dns.RR_Header{Name: origin, Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: c.TTL}, Ns: mname}}
	}
	return zd
}
