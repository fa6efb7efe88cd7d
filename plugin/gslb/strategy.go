package gslb

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"strings"
	"unsafe"
)

// Strategy names, as written in the Corefile and in gslb/strategy.
const (
	roundRobin = "roundRobin"
	failover   = "failover"
	geoip      = "geoip"
	weighted   = "weighted"
)

// Endpoint providerSpecific properties and the k8gb endpoint label.
const (
	propStrategy = "gslb/strategy"
	propPrimary  = "gslb/primary"
	propWeight   = "gslb/weight"
	propTTL      = "gslb/ttl"
	labelK8gb    = "strategy"
)

func strategyName(s string) (string, bool) {
	switch strings.ToLower(s) {
	case "roundrobin", "round_robin":
		return roundRobin, true
	case failover:
		return failover, true
	case geoip:
		return geoip, true
	case weighted:
		return weighted, true
	}
	return "", false
}

// policy is how the answer for a host is chosen.
type policy struct {
	strategy string
	primary  []string   // the primary order's entries: tags, or tiers of tags joined with "+"
	tiers    [][]string // primary split into tiers; nil when no entry is a tier
	tierW    [][]int32  // the weights of tiers' tags (prepare); nil without weights
	weights  map[string]int
	fallback map[string][]string   // geoip region -> its own order: tags, or tiers joined with "+"
	fbTiers  map[string][][]string // fallback split into tiers (prepare); nil when no step is a tier
	allDown  *allDown
	ttl      uint32
	ttlSet   bool
}

// propError is an invalid property: the whole property is ignored and the
// default applies.
type propError struct {
	prop string
	err  error
}

func (e *propError) Error() string { return e.prop + ": " + e.err.Error() }

// hostPolicy overrides the Corefile defaults with the host's own properties.
// Invalid values keep the default and are returned as errors for the
// background walk to log; the query path ignores them.
func hostPolicy(def *policy, props, labels map[string]string) (*policy, []error) {
	s, hasS := props[propStrategy]
	if !hasS {
		s, hasS = labels[labelK8gb]
	}
	pr, hasP := props[propPrimary]
	w, hasW := props[propWeight]
	t, hasT := props[propTTL]
	fb, hasF := props[propFallback]
	ad, hasA := props[propAllDown]
	if !hasS && !hasP && !hasW && !hasT && !hasF && !hasA {
		return def, nil
	}
	pol := *def
	var errs []error
	if hasS {
		if name, ok := strategyName(s); ok {
			pol.strategy = name
		} else {
			errs = append(errs, &propError{propStrategy, fmt.Errorf("unknown strategy %q", s)})
		}
	}
	if hasP {
		var entries []string
		for f := range strings.SplitSeq(pr, ",") {
			if f = strings.TrimSpace(f); f != "" {
				entries = append(entries, f)
			}
		}
		if err := pol.setPrimary(entries); err != nil {
			errs = append(errs, &propError{propPrimary, err})
		}
	}
	if hasW {
		ws, err := parseWeights(w)
		if err != nil {
			errs = append(errs, &propError{propWeight, err})
		} else {
			pol.weights = ws
		}
	}
	if hasF {
		m, err := parseFallback(fb)
		if err != nil {
			errs = append(errs, &propError{propFallback, err})
		} else {
			pol.fallback = m
		}
	}
	if hasA {
		a, err := parseAllDown([]string{ad})
		if err != nil {
			errs = append(errs, &propError{propAllDown, err})
		} else {
			pol.allDown = a
		}
	}
	if hasT {
		n, err := strconv.ParseUint(strings.TrimSpace(t), 10, 32)
		if err != nil {
			errs = append(errs, &propError{propTTL, fmt.Errorf("bad %s %q", propTTL, t)})
		} else {
			pol.ttl, pol.ttlSet = uint32(n), true
		}
	}
	pol.prepare()
	return &pol, errs
}

// setPrimary sets the primary order from its entries; any entry that is a
// tier ("eu+us") makes the order tiered. On error pol is unchanged.
func (pol *policy) setPrimary(entries []string) error {
	primary, tiers, err := parseTiers(entries)
	if err != nil {
		return err
	}
	pol.primary, pol.tiers = primary, nil
	for _, t := range tiers {
		if len(t) > 1 {
			pol.tiers = tiers
			break
		}
	}
	return nil
}

// parseWeights reads "eu=80,us=20,ap=0".
func parseWeights(s string) (map[string]int, error) {
	ws := map[string]int{}
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		tag, n, ok := strings.Cut(f, "=")
		if !ok {
			return nil, fmt.Errorf("bad weight %q, want TAG=N", f)
		}
		v, err := strconv.Atoi(strings.TrimSpace(n))
		if err != nil || v < 0 {
			return nil, fmt.Errorf("bad weight %q, want a number >= 0", f)
		}
		ws[strings.TrimSpace(tag)] = v
	}
	return ws, nil
}

// tagView is one cluster's contribution to an answer: this cluster's own
// targets or a peer's (cached) answer.
type tagView struct {
	tag     string
	self    bool
	peer    *peer
	state   state
	a, aaaa []netip.Addr
	age     float64 // seconds since the peer answered; 0 for self
	miss    bool    // no cached answer, the peer may be asked now
}

// has reports whether the view has targets of the family: answers are per
// family, so an IPv4-only client is not cut off by a tier that has only
// AAAA targets (nor an IPv6-only one by a tier with only A).
func (v *tagView) has(aaaa bool) bool { return len(pick(v, aaaa)) > 0 }

func findTag(views []tagView, tag string) int {
	for i := range views {
		if views[i].tag == tag {
			return i
		}
	}
	return -1
}

// Why an answer was chosen, for the explain record.
const (
	whyPrimary     = "first primary tag with targets"
	whyNoPrimary   = "no primary tag has targets: all targets"
	whyUnknown     = "a primary tag ahead of the ones with targets is not asked yet: SERVFAIL"
	whyAll         = "all targets"
	whyDrawn       = "drawn by weight"
	whyNoWeighted  = "no tag with weight > 0 has targets: all targets"
	whyClientTag   = "the client's tag has targets"
	whyClientEmpty = "the client's tag has no targets: all targets"
	whyClientNoTag = "no geo tag for the client: all targets"

	whyTierDrawn        = "drawn by weight within the first tier with targets"
	whyTierCombined     = "the first tier with targets, its tags' targets combined"
	whyFallback         = "the client's tag has no targets: first tag of its fallback order with targets"
	whyFallbackDrawn    = "the client's tag has no targets: first step of its fallback order with targets, drawn by weight"
	whyFallbackCombined = "the client's tag has no targets: first step of its fallback order with targets, its tags' targets combined"
	whyFallbackEmpty    = "the client's tag and its fallback order have no targets: all targets"
	whyAllDown          = "no tag has targets: the all-down answer"
	whyAllDownRefused   = "no tag has targets, the all-down CNAME is refused at the apex: all targets"
	whyAllDownBeside    = "no tag has targets, the all-down CNAME is refused beside the host's other data: all targets"
)

// decision is what a strategy chose.
type decision struct {
	strategy string
	chosen   int      // index of the tag whose targets answer; -1: all targets (or combined)
	combined []string // a tier whose tags' targets answer together (no weights); pol's, shared
	step     int      // stepFirst...stepAllDown, for explain and answer_steps_total
	tier     int      // 1-based tier (failover) or fallback step (geoip) that answered
	allDown  bool     // no tag has targets: the policy's all-down answer
	why      string
	unknown  bool // failover met a primary that is not asked yet
	// geo: the client's tag and the prefix length the answer holds for
	// (ECS scope); clientDependent is false for answers that are the same
	// for every client.
	geoTag          string
	scope           int
	clientDependent bool
}

// decide applies the host's strategy to the tags' targets of one family
// (AAAA when aaaa): each family comes from the first tier, in the
// strategy's order, that has it.
func (g *GSLB) decide(pol *policy, views []tagView, cl *client, aaaa bool) decision {
	d := decision{strategy: pol.strategy, chosen: -1}
	g.decideStrategy(pol, views, cl, aaaa, &d)
	if d.chosen < 0 && d.combined == nil && !d.unknown {
		if d.step == stepFirst {
			d.step = stepAll
		}
		if pol.allDown != nil && noneHasTargets(views) {
			d.allDown, d.step, d.why = true, stepAllDown, whyAllDown
		}
	}
	return d
}

func (g *GSLB) decideStrategy(pol *policy, views []tagView, cl *client, aaaa bool, d *decision) {
	switch pol.strategy {
	case failover:
		if pol.tiers != nil {
			decideTiers(pol, views, aaaa, d)
			return
		}
		order := pol.primary
		if len(order) == 0 {
			// No primary: this cluster first, then the peers in tag order.
			for i := range views {
				if views[i].has(aaaa) {
					d.chosen, d.why = i, whyPrimary
					if i > 0 {
						d.step = stepLower
					}
					return
				}
				if views[i].state == stateUnknown {
					d.unknown, d.why = true, whyUnknown
					return
				}
			}
			d.why = whyNoPrimary
			return
		}
		for n, tag := range order {
			i := findTag(views, tag)
			if i < 0 {
				continue // not a cluster we know: no targets
			}
			if views[i].has(aaaa) {
				d.chosen, d.why = i, whyPrimary
				if n > 0 {
					d.step = stepLower
				}
				return
			}
			if views[i].state == stateUnknown {
				d.unknown, d.why = true, whyUnknown
				return
			}
		}
		d.why = whyNoPrimary
	case weighted:
		total := 0
		for i := range views {
			if views[i].has(aaaa) {
				total += weightOf(pol, views[i].tag)
			}
		}
		if total == 0 {
			d.why = whyNoWeighted
			return
		}
		n := rand.IntN(total)
		for i := range views {
			if !views[i].has(aaaa) {
				continue
			}
			if n -= weightOf(pol, views[i].tag); n < 0 {
				d.chosen, d.why = i, whyDrawn
				return
			}
		}
	case geoip:
		d.clientDependent = true
		tag, scope, ok := g.geo.lookup(cl)
		d.geoTag, d.scope = tag, scope
		if !ok {
			d.why = whyClientNoTag
			return
		}
		if i := findTag(views, tag); i >= 0 && views[i].has(aaaa) {
			d.chosen, d.why = i, whyClientTag
			return
		}
		if pol.fallback != nil && decideFallback(pol, views, aaaa, d) {
			return
		}
		d.why = whyClientEmpty
	default: // roundRobin
		d.why = whyAll
	}
}

// weightOf is the tag's weight; with no weights configured every tag
// weighs the same, and a tag missing from a weight list weighs 0.
func weightOf(pol *policy, tag string) int {
	if len(pol.weights) == 0 {
		return 1
	}
	return pol.weights[tag]
}

// targets returns the addresses of the asked family under d: the chosen
// tag's, or every tag's de-duplicated, at most max_targets of them.
//
// A query does O(max_targets) work whatever the host carries: a small set is
// merged here (at most max_targets² comparisons), a larger union is the one
// prepared after the last change of a tag's targets (unionOf), and the
// answer is a window of it that rotates per answer.
func (g *GSLB) targets(name string, views []tagView, d decision, aaaa bool) []netip.Addr {
	if d.chosen >= 0 {
		return g.window(pick(&views[d.chosen], aaaa))
	}
	if d.combined != nil {
		return g.window(combine(views, d.combined, aaaa))
	}
	total := 0
	for i := range views {
		total += len(pick(&views[i], aaaa))
	}
	if total <= g.maxTargets {
		// Each tag's list is de-duplicated already (the store's host and
		// the healthy set by the store's contract, a peer's answer when
		// parsed): an address is looked for among the earlier tags' only.
		var out []netip.Addr
		for i := range views {
			earlier := len(out)
			for _, a := range pick(&views[i], aaaa) {
				if !containsAddr(out[:earlier], a) {
					out = append(out, a)
				}
			}
		}
		return out
	}
	return g.window(g.unionOf(name, views, aaaa))
}

func pick(v *tagView, aaaa bool) []netip.Addr {
	if aaaa {
		return v.aaaa
	}
	return v.a
}

// window returns list when it fits in max_targets, else max_targets of its
// addresses from an offset that moves on by max_targets with every answer,
// so that every target is handed out in turn.
func (g *GSLB) window(list []netip.Addr) []netip.Addr {
	n := g.maxTargets
	if len(list) <= n {
		return list
	}
	start := int((g.rotation.Add(1) * uint64(n)) % uint64(len(list)))
	out := make([]netip.Addr, n)
	k := copy(out, list[start:])
	copy(out[k:], list)
	return out
}

// union is every tag's targets of one family of a host, de-duplicated, in
// the order of the tags, with the slices it was made from. Those slices are
// immutable (the store's host, localtargets' healthy set, a peer's cached
// answer): the same slices make the same union.
type union struct {
	from  []addrSlice
	addrs []netip.Addr
}

type addrSlice struct {
	p *netip.Addr
	n int
}

func sliceOf(a []netip.Addr) addrSlice { return addrSlice{unsafe.SliceData(a), len(a)} }

// unionOf returns the union of the views' targets of one family, made anew
// only when one of the slices it comes from changed: when the store, the
// healthy set or a peer's answer changed, not per query.
func (g *GSLB) unionOf(name string, views []tagView, aaaa bool) []netip.Addr {
	key := name
	if aaaa {
		key = "\x00" + name
	}
	if v, ok := g.unions.Load(key); ok {
		u := v.(*union)
		if len(u.from) == len(views) {
			same := true
			for i := range views {
				if u.from[i] != sliceOf(pick(&views[i], aaaa)) {
					same = false
					break
				}
			}
			if same {
				return u.addrs
			}
		}
	}
	u := &union{from: make([]addrSlice, len(views))}
	seen := map[netip.Addr]struct{}{}
	for i := range views {
		list := pick(&views[i], aaaa)
		u.from[i] = sliceOf(list)
		for _, a := range list {
			if _, dup := seen[a]; !dup {
				seen[a] = struct{}{}
				u.addrs = append(u.addrs, a)
			}
		}
	}
	g.unions.Store(key, u)
	return u.addrs
}

// combined returns the indices of the views of tags that have targets of
// the family, in the order of tags.
func combined(views []tagView, tags []string, aaaa bool) []int {
	var idx []int
	for _, tag := range tags {
		if i := findTag(views, tag); i >= 0 && views[i].has(aaaa) {
			idx = append(idx, i)
		}
	}
	return idx
}

// combine is the targets of the views of tags (one tier's),
// de-duplicated.
func combine(views []tagView, tags []string, aaaa bool) []netip.Addr {
	n := 0
	for _, tag := range tags {
		if i := findTag(views, tag); i >= 0 {
			n += len(pick(&views[i], aaaa))
		}
	}
	out := make([]netip.Addr, 0, n)
	var seen map[netip.Addr]struct{}
	for _, tag := range tags {
		i := findTag(views, tag)
		if i < 0 {
			continue
		}
		for _, a := range pick(&views[i], aaaa) {
			if len(out) < 16 {
				if containsAddr(out, a) {
					continue
				}
			} else {
				if seen == nil {
					seen = make(map[netip.Addr]struct{}, 2*len(out))
					for _, b := range out {
						seen[b] = struct{}{}
					}
				}
				if _, dup := seen[a]; dup {
					continue
				}
				seen[a] = struct{}{}
			}
			out = append(out, a)
		}
	}
	return out
}
