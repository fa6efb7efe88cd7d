package builder

import (
	"fmt"
	"slices"
	"strings"

	"github.com/fleetdns/fleetdns/internal/store"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/tree"
	"github.com/miekg/dns"
)

// Who may publish which names (tenancy). Every rule here is a function of
// the objects present and of the Corefile, never of the order events
// arrived in, so that every replica, whenever it started, decides the same.

// Reasons an endpoint is refused by tenancy; the values label
// coredns_k8scrd_refused_endpoints and the Events on the objects.
const (
	refusedOwner        = "owner"        // the name belongs to another namespace (tenancy strict)
	refusedGrant        = "grant"        // no grant of this namespace covers the name
	refusedReserved     = "reserved"     // a name that gslb answers itself
	refusedLocalTargets = "localtargets" // a literal localtargets- record not from the host's owner (k8gb-labelled)
	refusedCover        = "cover"        // a delegation or wildcard over a name another namespace owns
)

// reservedLabels are first labels gslb answers itself: store records there
// are refused, so that nothing a tenant publishes is served in their place.
var reservedLabels = []string{"_gslb-explain", "_gslb-peers"}

// fleetLabel is the fleet view's name (_fleet.<zone>), which gslb answers at
// and below: a name with this label anywhere is refused too.
const fleetLabel = "_fleet"

// reserved reports whether name is one gslb answers itself.
func reserved(name string) bool {
	first, rest, _ := strings.Cut(name, ".")
	if slices.Contains(reservedLabels, first) || first == fleetLabel {
		return true
	}
	return strings.HasPrefix(rest, fleetLabel+".") || strings.Contains(rest, "."+fleetLabel+".")
}

// grant lets namespace publish at or below suffix (`tenant NAMESPACE SUFFIX...`).
type grant struct {
	suffix    string // lower-case, fully qualified
	namespace string
}

// Grants are the `tenant` lines, sorted most specific (most labels) first.
// Empty: no grants, every namespace may publish (subject to tenancy strict).
type Grants []grant

// holder returns the namespace of the most specific grant covering name; ""
// when none does.
func (gs Grants) holder(name string) string {
	for _, g := range gs {
		if dns.IsSubDomain(g.suffix, name) {
			return g.namespace
		}
	}
	return ""
}

// otherBelow reports whether a grant strictly below name is held by a
// namespace other than ns: a delegation or wildcard of ns at name would
// cover names that grant gives away.
func (gs Grants) otherBelow(name, ns string) bool {
	for _, g := range gs {
		if g.namespace != ns && g.suffix != name && dns.IsSubDomain(name, g.suffix) {
			return true
		}
	}
	return false
}

// Add records a grant of suffix (lower-case, fully qualified) to namespace
// ns; it returns the namespace already holding suffix when another one does
// (two equally specific grants for one suffix).
func (gs *Grants) Add(ns, suffix string) (conflict string) {
	for _, g := range *gs {
		if g.suffix == suffix {
			if g.namespace != ns {
				return g.namespace
			}
			return ""
		}
	}
	*gs = append(*gs, grant{suffix: suffix, namespace: ns})
	slices.SortStableFunc(*gs, func(a, b grant) int { return dns.CountLabel(b.suffix) - dns.CountLabel(a.suffix) })
	return ""
}

// strictish reports whether names have owners: tenancy strict, or grants.
func (cfg *Config) strictish() bool { return cfg.Strict || len(cfg.Grants) > 0 }

// refusal is one object's endpoints refused at a name, and why.
type refusal struct {
	o       *object.Object
	reason  string
	message string
}

// admit returns the objects (in store order) whose endpoints at name are
// served, the name's owner ("" in shared tenancy or when nobody may publish
// it) and what was refused.
//
//   - gslb answers _gslb-explain.* and _gslb-peers.* itself: refused from everyone.
//   - With grants, only the namespace of the most specific grant covering
//     the name publishes there.
//   - tenancy strict: the oldest object's namespace owns the name (store
//     order: creationTimestamp, then namespace/name).
//   - A literal localtargets-<host> record is served only from a
//     k8gb-labelled object of the namespace that owns <host> (in shared
//     tenancy: that publishes <host>): peers take it as this cluster's answer.
func (b *Builder) admit(name string, objs []*object.Object) (kept []*object.Object, owner string, refused []refusal) {
	gs := b.cfg.Grants
	holder := ""
	if len(gs) > 0 {
		holder = gs.holder(name)
	}
	host, literal := store.TargetHost(name, b.prefix)
	for _, o := range objs {
		switch {
		case reserved(name):
			refused = append(refused, refusal{o, refusedReserved, fmt.Sprintf("%s is answered by gslb itself; records there are not served", name)})
			continue
		case len(gs) > 0 && o.Namespace != holder:
			msg := fmt.Sprintf("no tenant grant of namespace %q covers %s", o.Namespace, name)
			if holder != "" {
				msg += fmt.Sprintf(" (granted to %q)", holder)
			}
			refused = append(refused, refusal{o, refusedGrant, msg})
			continue
		case b.cfg.Strict && owner != "" && o.Namespace != owner:
			refused = append(refused, refusal{o, refusedOwner, fmt.Sprintf("%s belongs to namespace %q, whose object published it first", name, owner)})
			continue
		case literal && !o.Verbatim:
			refused = append(refused, refusal{o, refusedLocalTargets, fmt.Sprintf("%s is this cluster's answer to its peers, assembled from %s; a literal record is served only from a k8gb-labelled object", name, host)})
			continue
		case literal && !b.publishes(host, o.Namespace):
			refused = append(refused, refusal{o, refusedLocalTargets, fmt.Sprintf("%s: namespace %q does not own %s", name, o.Namespace, host)})
			continue
		}
		if b.cfg.strictish() && owner == "" {
			owner = o.Namespace
		}
		kept = append(kept, o)
	}
	return kept, owner, refused
}

// publishes reports whether namespace ns may speak for host: it owns host
// (strict tenancy or grants), or publishes it (shared).
func (b *Builder) publishes(host, ns string) bool {
	if b.cfg.strictish() {
		return b.owner[host] == ns
	}
	for _, o := range b.declaredBy(host) {
		if o.Namespace == ns {
			return true
		}
	}
	return false
}

// covers reports whether a delegation at name, or a wildcard *.name, of
// namespace ns would cover a name that another namespace owns or is granted.
func (b *Builder) covers(name, ns string) bool {
	if b.cfg.Grants.otherBelow(name, ns) {
		return true
	}
	for other, n := range b.ownedBelow[name] {
		if other != ns && n > 0 {
			return true
		}
	}
	return false
}

// setOwner records name's new owner and returns the names whose decisions
// depend on it and must be merged again: the ancestors (their delegations)
// and their wildcards, and the literal localtargets- name of name. Owners
// change when names are created or deleted, not on every update.
func (b *Builder) setOwner(name, zone, owner string) (again []string) {
	old := b.owner[name]
	if old == owner {
		return nil
	}
	if owner == "" {
		delete(b.owner, name)
	} else {
		b.owner[name] = owner
	}
	for p := tree.Parent(name); p != "" && len(p) >= len(zone); p = tree.Parent(p) {
		below := b.ownedBelow[p]
		if below == nil {
			below = map[string]int32{}
			b.ownedBelow[p] = below
		}
		if old != "" {
			if below[old]--; below[old] <= 0 {
				delete(below, old)
			}
		}
		if owner != "" {
			below[owner]++
		}
		if len(below) == 0 {
			delete(b.ownedBelow, p)
		}
		again = append(again, p, "*."+p)
		if p == zone {
			break
		}
	}
	if lt := b.prefix + name; !strings.HasPrefix(name, b.prefix) {
		again = append(again, lt)
	}
	return again
}

// refuse counts what merge refused at name (the gauges equal what is refused
// now), logs a reason the first time it applies to the name, and reports
// each refusal on its object.
func (b *Builder) refuse(name string, refused []refusal) (endpoints int) {
	now := map[string]int{}
	for _, r := range refused {
		n := len(r.o.At(name))
		now[r.reason] += n
		endpoints += n
		if b.reporter != nil {
			b.Report(r.o, "NameRefused", r.message)
		}
	}
	before := b.refusedAt[name]
	for reason, n := range now {
		if before[reason] == 0 {
			log.Warningf("Tenancy: endpoints at %s refused (%s): %s", name, reason, messageOf(refused, reason))
		}
		refusedEndpoints.WithLabelValues(reason).Add(float64(n - before[reason]))
	}
	for reason, n := range before {
		if now[reason] == 0 {
			refusedEndpoints.WithLabelValues(reason).Sub(float64(n))
		}
	}
	if len(now) == 0 {
		delete(b.refusedAt, name)
	} else {
		b.refusedAt[name] = now
	}
	return endpoints
}

func messageOf(refused []refusal, reason string) string {
	for _, r := range refused {
		if r.reason == reason {
			return r.o.Namespace + "/" + r.o.Name + ": " + r.message
		}
	}
	return ""
}
