package gslb

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"

	"github.com/fleetdns/fleetdns/internal/store"

	"github.com/miekg/dns"
)

// Composed policies, as Route 53 traffic flow and NS1 filter chains compose
// them: failover tiers (gslb/primary eu+us,ap, drawn by gslb/weight within a
// tier), a geoip region's own fallback order (gslb/fallback) and a static
// answer when no tag has targets (gslb/all-down).
const (
	propFallback = "gslb/fallback"
	propAllDown  = "gslb/all-down"
)

// Caps of a composed policy: what a host's properties can make the query
// path walk.
const (
	maxTiers     = 16 // tiers in primary, tags in one tier, steps in one fallback order
	maxRegions   = 64 // regions in fallback
	maxAllDown   = 16 // addresses in all-down
	tierSep      = "+"
	fallbackSep  = ";"
	fallbackStep = ","
)

// allDown is the answer when no tag has targets: addresses, or one name
// answered as CNAME.
type allDown struct {
	a, aaaa []netip.Addr
	cname   string
}

func (ad *allDown) String() string {
	if ad.cname != "" {
		return "CNAME " + ad.cname
	}
	s := make([]string, 0, len(ad.a)+len(ad.aaaa))
	for _, a := range ad.a {
		s = append(s, a.String())
	}
	for _, a := range ad.aaaa {
		s = append(s, a.String())
	}
	return strings.Join(s, ",")
}

// parseTier reads one tier, "eu+us" or "ap".
func parseTier(s string) ([]string, error) {
	var tier []string
	for t := range strings.SplitSeq(s, tierSep) {
		t = strings.TrimSpace(t)
		if t == "" {
			return nil, fmt.Errorf("empty tag in tier %q", s)
		}
		if len(tier) == maxTiers {
			return nil, fmt.Errorf("tier %q has more than %d tags", s, maxTiers)
		}
		tier = append(tier, t)
	}
	return tier, nil
}

// parseTiers reads a primary order whose entries may be tiers: the
// entries of gslb/primary split on ",", or the Corefile's arguments.
func parseTiers(entries []string) (primary []string, tiers [][]string, err error) {
	if len(entries) > maxTiers {
		return nil, nil, fmt.Errorf("more than %d tiers", maxTiers)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		tier, err := parseTier(e)
		if err != nil {
			return nil, nil, err
		}
		for _, t := range tier {
			if seen[t] {
				return nil, nil, fmt.Errorf("tag %s in two tiers", t)
			}
			seen[t] = true
		}
		primary = append(primary, strings.Join(tier, tierSep))
		tiers = append(tiers, tier)
	}
	return primary, tiers, nil
}

// parseFallback reads "eu=us,ap;us=eu,ap".
func parseFallback(s string) (map[string][]string, error) {
	fb := map[string][]string{}
	for f := range strings.SplitSeq(s, fallbackSep) {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		region, order, ok := strings.Cut(f, "=")
		region = strings.TrimSpace(region)
		if !ok || region == "" {
			return nil, fmt.Errorf("bad fallback %q, want REGION=TAG,TAG", f)
		}
		var tags []string
		for t := range strings.SplitSeq(order, fallbackStep) {
			if t = strings.TrimSpace(t); t != "" {
				tags = append(tags, t)
			}
		}
		if err := addFallback(fb, region, tags); err != nil {
			return nil, err
		}
	}
	if len(fb) == 0 {
		return nil, fmt.Errorf("empty fallback %q", s)
	}
	return fb, nil
}

// addFallback adds one region's order to fb; a step may be a tier of tags
// joined with "+", and no tag is in two steps.
func addFallback(fb map[string][]string, region string, tags []string) error {
	if _, dup := fb[region]; dup {
		return fmt.Errorf("fallback for %s given twice", region)
	}
	if len(fb) == maxRegions {
		return fmt.Errorf("fallback for more than %d regions", maxRegions)
	}
	if len(tags) == 0 {
		return fmt.Errorf("fallback for %s has no tags", region)
	}
	if len(tags) > maxTiers {
		return fmt.Errorf("fallback for %s has more than %d tags", region, maxTiers)
	}
	seen := map[string]bool{}
	for _, step := range tags {
		tier, err := parseTier(step)
		if err != nil {
			return fmt.Errorf("fallback for %s: %v", region, err)
		}
		for _, t := range tier {
			if seen[t] {
				return fmt.Errorf("fallback for %s names %s twice", region, t)
			}
			seen[t] = true
		}
	}
	fb[region] = tags
	return nil
}

// parseAllDown reads addresses ("198.18.0.10,2001:db8::10" or as separate
// arguments) or one name answered as CNAME. A name beside addresses, or two
// names, is refused: a CNAME stands alone (RFC 1034 §3.6.2).
func parseAllDown(fields []string) (*allDown, error) {
	ad := &allDown{}
	names := 0
	n := 0
	for _, f := range fields {
		for v := range strings.SplitSeq(f, ",") {
			v = strings.TrimSpace(v)
			if v == "" {
				continue
			}
			n++
			if a, err := netip.ParseAddr(v); err == nil {
				a = a.Unmap()
				if a.Is4() {
					ad.a = append(ad.a, a)
				} else {
					ad.aaaa = append(ad.aaaa, a)
				}
				continue
			}
			if _, ok := dns.IsDomainName(v); !ok || strings.ContainsAny(v, " /:") {
				return nil, fmt.Errorf("all-down %q is neither an address nor a name", v)
			}
			names++
			ad.cname = dns.CanonicalName(v)
		}
	}
	switch {
	case n == 0:
		return nil, fmt.Errorf("empty all-down")
	case names > 1:
		return nil, fmt.Errorf("all-down has %d names, a CNAME is one name", names)
	case names == 1 && n > 1:
		return nil, fmt.Errorf("all-down CNAME %s beside addresses: a CNAME stands alone", ad.cname)
	case n > maxAllDown:
		return nil, fmt.Errorf("all-down has more than %d addresses", maxAllDown)
	}
	return ad, nil
}

// Steps of an answer, the step label of answer_steps_total.
const (
	stepFirst    = iota // the first tier (failover), the drawn tag (weighted), the client's region (geoip)
	stepLower           // a lower tier than the first
	stepFallback        // a step of the client region's fallback order
	stepAll             // every target
	stepAllDown         // the all-down answer
	stepCount
)

var stepNames = [stepCount]string{"first", "lower_tier", "fallback", "all", "all_down"}

// prepare resolves the weights of the tiers' tags once, so that a draw
// does not look them up per answer.
func (pol *policy) prepare() {
	pol.fbTiers = nil
	for region, order := range pol.fallback {
		for _, step := range order {
			if strings.Contains(step, tierSep) {
				if pol.fbTiers == nil {
					pol.fbTiers = map[string][][]string{}
				}
				break
			}
		}
		if pol.fbTiers == nil {
			continue
		}
		tiers := make([][]string, len(order))
		for n, step := range order {
			tiers[n], _ = parseTier(step) // checked by addFallback
		}
		pol.fbTiers[region] = tiers
	}
	pol.tierW = nil
	if pol.tiers == nil || len(pol.weights) == 0 {
		return
	}
	pol.tierW = make([][]int32, len(pol.tiers))
	for n, tier := range pol.tiers {
		pol.tierW[n] = make([]int32, len(tier))
		for j, tag := range tier {
			pol.tierW[n][j] = int32(min(pol.weights[tag], 1<<30))
		}
	}
}

// decideTiers is failover over tiers: the first tier in which a tag has
// targets of the family answers, by one tag drawn by weight when the tier
// has weights, else with the targets of its tags combined.
func decideTiers(pol *policy, views []tagView, aaaa bool, d *decision) {
	for n, tier := range pol.tiers {
		// Small arrays: views are at most max_peers+1 (idx fits a uint16),
		// a tier at most maxTiers tags.
		var idx [maxTiers]uint16
		var ws [maxTiers]int32
		k, total := 0, 0
		unknown := false
		for j, tag := range tier {
			i := findTag(views, tag)
			if i < 0 {
				continue // not a cluster we know: no targets
			}
			if views[i].has(aaaa) {
				idx[k] = uint16(i)
				if pol.tierW != nil {
					ws[k] = pol.tierW[n][j]
				} else if len(pol.weights) > 0 {
					ws[k] = int32(pol.weights[tag])
				}
				total += int(ws[k])
				k++
			} else if views[i].state == stateUnknown {
				unknown = true
			}
		}
		if k == 0 {
			if unknown {
				// Not asked yet: it may have targets, a lower tier must
				// not answer in its place.
				d.unknown, d.why = true, whyUnknown
				return
			}
			continue
		}
		d.tier, d.step = n+1, stepLower
		if n == 0 {
			d.step = stepFirst
		}
		if k == 1 {
			d.chosen, d.why = int(idx[0]), whyPrimary
			return
		}
		if total > 0 {
			r := rand.IntN(total)
			for j := range k {
				if r -= int(ws[j]); r < 0 {
					d.chosen, d.why = int(idx[j]), whyTierDrawn
					return
				}
			}
		}
		// No weights (or every tag of the tier with targets weighs 0): the
		// tier's targets together.
		d.combined = tier
		d.why = whyTierCombined
		return
	}
	d.step, d.why = stepAll, whyNoPrimary
}

// decideFallback walks the client region's own fallback order when its
// region has no targets of the family.
func decideFallback(pol *policy, views []tagView, aaaa bool, d *decision) bool {
	order, ok := pol.fallback[d.geoTag]
	if !ok {
		return false
	}
	if tiers, ok := pol.fbTiers[d.geoTag]; ok {
		return decideFallbackTiers(pol, tiers, views, aaaa, d)
	}
	for n, tag := range order {
		i := findTag(views, tag)
		if i < 0 {
			continue
		}
		if views[i].has(aaaa) {
			d.chosen, d.why, d.step, d.tier = i, whyFallback, stepFallback, n+1
			return true
		}
	}
	d.why = whyFallbackEmpty
	return true
}

// decideFallbackTiers walks a fallback order whose steps may be tiers: the
// first step in which a tag has targets answers, by one tag drawn by
// gslb/weight when its tags with targets have weight, else with their
// targets combined, as a failover tier does.
func decideFallbackTiers(pol *policy, tiers [][]string, views []tagView, aaaa bool, d *decision) bool {
	for n, tier := range tiers {
		var idx [maxTiers]uint16
		var ws [maxTiers]int32
		k, total := 0, 0
		for _, tag := range tier {
			i := findTag(views, tag)
			if i < 0 || !views[i].has(aaaa) {
				continue
			}
			idx[k] = uint16(i)
			ws[k] = int32(min(pol.weights[tag], 1<<30))
			total += int(ws[k])
			k++
		}
		if k == 0 {
			continue
		}
		d.step, d.tier = stepFallback, n+1
		switch {
		case k == 1:
			d.chosen, d.why = int(idx[0]), whyFallback
		case total > 0:
			r := rand.IntN(total)
			for j := range k {
				if r -= int(ws[j]); r < 0 {
					d.chosen, d.why = int(idx[j]), whyFallbackDrawn
					break
				}
			}
		default:
			d.combined, d.why = tier, whyFallbackCombined
		}
		return true
	}
	d.why = whyFallbackEmpty
	return true
}

// noneHasTargets reports whether no tag has targets of either family and none is
// still to be asked: the only case the all-down answer is for. A tag with
// targets of the other family only is up, and the asked family gets NODATA.
func noneHasTargets(views []tagView) bool {
	for i := range views {
		if len(views[i].a) > 0 || len(views[i].aaaa) > 0 || views[i].state == stateUnknown {
			return false
		}
	}
	return true
}

// allDownFor returns the all-down answer h gets, nil when it has none or
// when the policy's CNAME is refused at that name: at the zone's apex,
// which holds the SOA and NS, and beside other data (the store holds other
// types at the host: RFC 1034 §3.6.2), a CNAME cannot be. The walk logs
// and counts the latter once per host (cnameBesideData).
func (g *GSLB) allDownFor(pol *policy, h *store.Host) *allDown {
	ad := pol.allDown
	if ad == nil {
		return nil
	}
	if ad.cname != "" && h.Name == g.zone {
		if _, logged := g.badPol.LoadOrStore("\x00apex", ""); !logged {
			log.Warningf("All-down CNAME %s refused at the apex %s: every declared target is answered", ad.cname, h.Name)
			policyErrors.WithLabelValues(g.zone, "all-down").Inc()
		}
		return nil
	}
	if ad.cname != "" && h.OtherTypes {
		return nil
	}
	return ad
}

// maxBesideLogs caps the lines one walk logs about all-down CNAMEs beside
// other data (a Corefile all_down CNAME applies to every host).
const maxBesideLogs = 10

// cnameBesideData reports whether h's policy has an all-down CNAME that
// h's other data refuses (allDownFor), and the line the walk logs once.
func (g *GSLB) cnameBesideData(pol *policy, h *store.Host) (string, bool) {
	if pol.allDown == nil || pol.allDown.cname == "" || !h.OtherTypes || h.Name == g.zone {
		return "", false
	}
	return fmt.Sprintf("All-down CNAME %s not answered at %s: the host has other data (a CNAME stands alone, RFC 1034 §3.6.2); every declared target answers instead", pol.allDown.cname, h.Name), true
}

// answerStep counts an answer by strategy and step.
func (g *GSLB) answerStep(strategy string, step int) {
	if a, ok := g.stepCount[strategy]; ok {
		a[step].Inc()
	}
}

// stepText is the explain text of a decision's step.
func stepText(pol *policy, d *decision) string {
	switch d.step {
	case stepFirst, stepLower:
		if d.tier > 0 && d.tier <= len(pol.primary) {
			return fmt.Sprintf("tier %d (%s)", d.tier, pol.primary[d.tier-1])
		}
	case stepFallback:
		return fmt.Sprintf("fallback step %d of %s=%s", d.tier, d.geoTag, strings.Join(pol.fallback[d.geoTag], fallbackStep))
	case stepAllDown:
		return "all-down"
	}
	return ""
}

// settleAllDown takes back an all-down decision the name cannot have (a
// CNAME at the apex or beside other data): every declared target answers
// instead, as without all-down.
func (g *GSLB) settleAllDown(pol *policy, h *store.Host, ds ...*decision) {
	if g.allDownFor(pol, h) != nil {
		return
	}
	why := whyAllDownRefused
	if h.Name != g.zone {
		why = whyAllDownBeside
	}
	for _, d := range ds {
		if d.allDown {
			d.allDown, d.step, d.why = false, stepAll, why
		}
	}
}

// allDownAnswer is the all-down answer to a query of qtype: the CNAME
// whatever the type, else the addresses of the asked family (both for ANY).
func (g *GSLB) allDownAnswer(ad *allDown, owner string, ttl uint32, qtype uint16) []dns.RR {
	if ad.cname != "" {
		return []dns.RR{&dns.CNAME{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: ttl}, Target: ad.cname}}
	}
	var rrs []dns.RR
	if qtype != dns.TypeAAAA {
		rrs = appendAddrs(rrs, owner, ttl, false, ad.a)
	}
	if qtype != dns.TypeA {
		rrs = appendAddrs(rrs, owner, ttl, true, ad.aaaa)
	}
	return rrs
}
