package derive

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"

	"github.com/miekg/dns"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// A route's hosts, targets and health (docs/architecture.md, and this plugin's README):
//
//   - A parent counts when it is a Gateway that exists (and is of a class
//     `gateway_class` names, when it names any) and the route's
//     status.parents has an entry for that very parentRef with Accepted=True
//     at the route's current generation. A route with no counting parent
//     declares nothing.
//   - Its hosts are spec.hostnames intersected with the hostnames of the
//     listeners the route attaches to (by sectionName and port, of a
//     protocol of the route's kind, whose allowedRoutes admit it), those
//     inside the zones.
//   - A host's targets are the status.addresses of the counting Gateways
//     whose listeners took that host (not of every Gateway the route is on).
//   - Every host is ready when a backendRefs Service has a ready endpoint; a
//     Service in another namespace counts only when a counting parent says
//     ResolvedRefs=True (its ReferenceGrant let the reference resolve).

// routeView is what the derivation reads of a route, whichever its kind.
type routeView struct {
	kind       string
	meta       *metav1.ObjectMeta
	hostnames  []gatewayv1.Hostname
	parentRefs []gatewayv1.ParentReference
	parents    []gatewayv1.RouteParentStatus
	backends   []gatewayv1.BackendRef
	// protocols are the listener protocols a route of this kind attaches to.
	protocols []gatewayv1.ProtocolType
}

var (
	routeHTTPProtocols = []gatewayv1.ProtocolType{gatewayv1.HTTPProtocolType, gatewayv1.HTTPSProtocolType}
	routeTLSProtocols  = []gatewayv1.ProtocolType{gatewayv1.TLSProtocolType}
)

// deriveHTTPRoute derives what an HTTPRoute declares; nil: nothing.
func deriveHTTPRoute(r *gatewayv1.HTTPRoute, cfg *Options, w World) *Declared {
	v := routeView{
		kind: object.KindHTTPRoute, meta: &r.ObjectMeta, hostnames: r.Spec.Hostnames,
		parentRefs: r.Spec.ParentRefs, parents: r.Status.Parents, protocols: routeHTTPProtocols,
	}
	for _, rule := range r.Spec.Rules {
		for _, b := range rule.BackendRefs {
			v.backends = append(v.backends, b.BackendRef)
		}
	}
	return deriveRoute(&v, cfg, w)
}

// deriveGRPCRoute derives what a GRPCRoute declares; nil: nothing.
func deriveGRPCRoute(r *gatewayv1.GRPCRoute, cfg *Options, w World) *Declared {
	v := routeView{
		kind: object.KindGRPCRoute, meta: &r.ObjectMeta, hostnames: r.Spec.Hostnames,
		parentRefs: r.Spec.ParentRefs, parents: r.Status.Parents, protocols: routeHTTPProtocols,
	}
	for _, rule := range r.Spec.Rules {
		for _, b := range rule.BackendRefs {
			v.backends = append(v.backends, b.BackendRef)
		}
	}
	return deriveRoute(&v, cfg, w)
}

// deriveTLSRoute derives what a TLSRoute declares; nil: nothing.
func deriveTLSRoute(r *gatewayv1.TLSRoute, cfg *Options, w World) *Declared {
	v := routeView{
		kind: object.KindTLSRoute, meta: &r.ObjectMeta, hostnames: r.Spec.Hostnames,
		parentRefs: r.Spec.ParentRefs, parents: r.Status.Parents, protocols: routeTLSProtocols,
	}
	for _, rule := range r.Spec.Rules {
		v.backends = append(v.backends, rule.BackendRefs...)
	}
	return deriveRoute(&v, cfg, w)
}

// deriveRoute is the derivation the three route kinds share.
func deriveRoute(v *routeView, cfg *Options, w World) *Declared {
	ns := v.meta.Namespace
	var (
		counted       bool
		resolvedRefs  bool // a counting parent says ResolvedRefs=True
		hosts         []string
		addrs         []netip.Addr
		hostnames     []string
		gateways, bad []string
		// perHost are the targets of each host: those of the Gateways
		// whose listeners admitted it, not of every Gateway the route is on.
		perHost = map[string]*hostTargets{}
	)
	for i := range v.parentRefs {
		ref := &v.parentRefs[i]
		if !routeRefIsGateway(ref) {
			continue
		}
		accepted, resolved := routeParentConditions(v, ref)
		if !accepted {
			continue
		}
		gwNS := routeRefNamespace(ref, ns)
		gateways = append(gateways, gwNS+"/"+string(ref.Name))
		gw := w.Gateway(gwNS, string(ref.Name))
		if gw == nil {
			continue
		}
		if len(cfg.GatewayClasses) > 0 && !slices.Contains(cfg.GatewayClasses, string(gw.Spec.GatewayClassName)) {
			continue
		}
		counted = true
		resolvedRefs = resolvedRefs || resolved

		var admitted []string // the hosts this Gateway's listeners take
		attached := false
		for j := range gw.Spec.Listeners {
			l := &gw.Spec.Listeners[j]
			if !routeAttaches(v, ref, gw, l) {
				continue
			}
			attached = true
			admitted = append(admitted, routeListenerHosts(v.hostnames, l.Hostname)...)
		}
		if !attached {
			// Accepted, yet no listener of this Gateway takes the route:
			// its addresses serve none of the route's hosts.
			continue
		}
		hosts = append(hosts, admitted...)
		nAddrs, nHostnames := len(addrs), len(hostnames)
		for _, a := range gw.Status.Addresses {
			switch {
			case a.Type == nil || *a.Type == gatewayv1.IPAddressType:
				ip, err := netip.ParseAddr(strings.TrimSpace(a.Value))
				if err != nil || ip.Zone() != "" {
					bad = append(bad, "gateway "+gwNS+"/"+gw.Name+": status address "+strconv.Quote(a.Value)+" is not an IP address")
					continue
				}
				addrs = append(addrs, ip.Unmap())
			case *a.Type == gatewayv1.HostnameAddressType:
				h := strings.ToLower(dns.Fqdn(strings.TrimSpace(a.Value)))
				if _, ok := dns.IsDomainName(h); !ok || h == "." {
					bad = append(bad, "gateway "+gwNS+"/"+gw.Name+": status hostname "+strconv.Quote(a.Value)+" is not a domain name")
					continue
				}
				hostnames = append(hostnames, h)
			}
			// Other types (NamedAddress, implementation-specific) name no
			// address DNS can give: not served, not an error.
		}
		for _, h := range admitted {
			t := perHost[h]
			if t == nil {
				t = &hostTargets{}
				perHost[h] = t
			}
			t.addrs = append(t.addrs, addrs[nAddrs:]...)
			t.hostnames = append(t.hostnames, hostnames[nHostnames:]...)
		}
	}
	if !counted {
		return nil
	}

	d := &Declared{
		Kind: v.kind, Namespace: ns, Name: v.meta.Name, UID: string(v.meta.UID),
		Created: v.meta.CreationTimestamp.Time, Changed: routeChanged(v.meta), labels: v.meta.Labels,
		Addrs: routeSortedUnique(addrs, netip.Addr.Compare), Hostnames: routeSortedUnique(hostnames, strings.Compare),
		Gateways: routeSortedUnique(gateways, strings.Compare),
		props:    gslbProps(v.meta.Annotations),
		Bad:      bad,
	}
	if ttl, ok, why := annotatedTTL(v.meta.Annotations); ok {
		d.ttl, d.ttlSet = ttl, true
	} else if why != "" {
		d.Bad = append(d.Bad, why)
	}

	ready := false
	var services []string
	for _, b := range v.backends {
		if !routeBackendIsService(&b.BackendObjectReference) {
			continue
		}
		bNS := ns
		if b.Namespace != nil && *b.Namespace != "" {
			bNS = string(*b.Namespace)
		}
		services = append(services, bNS+"/"+string(b.Name))
		if ready || (bNS != ns && !resolvedRefs) {
			continue
		}
		// A backend of weight 0 takes no traffic: it makes no host healthy.
		if b.Weight != nil && *b.Weight == 0 {
			continue
		}
		ready = w.Ready(bNS, string(b.Name))
	}
	d.Services = routeSortedUnique(services, strings.Compare)

	var unserved []UnservedName // what k8s_gateway would serve and the block does not
	for _, h := range routeSortedUnique(hosts, strings.Compare) {
		// A host outside the zones is not served, unless `relative_hosts`
		// takes it below them (h is fully qualified here: a relative host
		// is read without its final dot).
		names, relative, _ := cfg.Names.hostNames(strings.TrimSuffix(h, "."), cfg.Zones)
		if relative && !cfg.Names.RelativeHosts {
			for _, n := range relativeNames(strings.TrimSuffix(h, "."), cfg.Zones) {
				unserved = append(unserved, UnservedName{n, reasonK8sGatewayRelative})
			}
		}
		for _, name := range names {
			dh := DeclaredHost{Name: name, Ready: ready}
			// A host admitted by fewer Gateways than the route is on has
			// targets of its own; the others share the route's.
			if t := perHost[h]; t != nil {
				t.addrs = routeSortedUnique(t.addrs, netip.Addr.Compare)
				t.hostnames = routeSortedUnique(t.hostnames, strings.Compare)
				if !slices.Equal(t.addrs, d.Addrs) || !slices.Equal(t.hostnames, d.Hostnames) {
					dh.own = t
				}
			}
			d.Hosts = append(d.Hosts, dh)
		}
	}
	noteUnserved(cfg, v.kind, ns, v.meta.Name, unserved)
	slices.SortFunc(d.Hosts, func(x, y DeclaredHost) int { return strings.Compare(x.Name, y.Name) })
	d.Hosts = slices.CompactFunc(d.Hosts, func(x, y DeclaredHost) bool { return x.Name == y.Name })
	return d
}

// routeRefIsGateway reports whether a parentRef names a Gateway (the group
// and kind default to the Gateway API's and Gateway).
func routeRefIsGateway(ref *gatewayv1.ParentReference) bool {
	return (ref.Group == nil || *ref.Group == "" || *ref.Group == gatewayv1.GroupName) &&
		(ref.Kind == nil || *ref.Kind == "Gateway")
}

// routeRefNamespace is a parentRef's namespace: the route's when unset.
func routeRefNamespace(ref *gatewayv1.ParentReference, routeNS string) string {
	if ref.Namespace == nil || *ref.Namespace == "" {
		return routeNS
	}
	return string(*ref.Namespace)
}

// routeSameParent reports whether a status entry's parentRef is ref, with
// defaults applied on both sides: controllers copy the parentRef as the
// route wrote it, some with the defaults filled in.
func routeSameParent(a, b *gatewayv1.ParentReference, routeNS string) bool {
	group := func(r *gatewayv1.ParentReference) string {
		if r.Group == nil || *r.Group == "" {
			return gatewayv1.GroupName
		}
		return string(*r.Group)
	}
	kind := func(r *gatewayv1.ParentReference) string {
		if r.Kind == nil || *r.Kind == "" {
			return "Gateway"
		}
		return string(*r.Kind)
	}
	section := func(r *gatewayv1.ParentReference) string {
		if r.SectionName == nil {
			return ""
		}
		return string(*r.SectionName)
	}
	port := func(r *gatewayv1.ParentReference) gatewayv1.PortNumber {
		if r.Port == nil {
			return 0
		}
		return *r.Port
	}
	return a.Name == b.Name && group(a) == group(b) && kind(a) == kind(b) &&
		routeRefNamespace(a, routeNS) == routeRefNamespace(b, routeNS) &&
		section(a) == section(b) && port(a) == port(b)
}

// routeParentConditions reads the status entries for parentRef ref:
// accepted is Accepted=True at the route's generation; resolved is
// ResolvedRefs=True at that generation in such an entry. Conditions of an
// older generation describe a spec that is gone and count for nothing.
func routeParentConditions(v *routeView, ref *gatewayv1.ParentReference) (accepted, resolved bool) {
	current := func(c *metav1.Condition) bool {
		return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == v.meta.Generation
	}
	for i := range v.parents {
		p := &v.parents[i]
		if !routeSameParent(&p.ParentRef, ref, v.meta.Namespace) {
			continue
		}
		if !current(apimeta.FindStatusCondition(p.Conditions, string(gatewayv1.RouteConditionAccepted))) {
			continue
		}
		accepted = true
		if current(apimeta.FindStatusCondition(p.Conditions, string(gatewayv1.RouteConditionResolvedRefs))) {
			resolved = true
		}
	}
	return accepted, resolved
}

// routeAttaches reports whether the route, through parentRef ref, attaches
// to listener l of Gateway gw: l is the one sectionName names and has the
// port the parentRef names (each when set), has a protocol of the route's
// kind, and its allowedRoutes admit the route's namespace and kind.
//
// allowedRoutes.namespaces.from Selector is taken as admitting: the
// Namespace's labels are not in the world a derivation reads, and the
// route's parent has accepted the route, which it does only when the
// selector matched.
func routeAttaches(v *routeView, ref *gatewayv1.ParentReference, gw *gatewayv1.Gateway, l *gatewayv1.Listener) bool {
	if ref.SectionName != nil && *ref.SectionName != "" && l.Name != *ref.SectionName {
		return false
	}
	if ref.Port != nil && *ref.Port != 0 && l.Port != *ref.Port {
		return false
	}
	if !slices.Contains(v.protocols, l.Protocol) {
		return false
	}
	from := gatewayv1.NamespacesFromSame
	var kinds []gatewayv1.RouteGroupKind
	if ar := l.AllowedRoutes; ar != nil {
		if ar.Namespaces != nil && ar.Namespaces.From != nil {
			from = *ar.Namespaces.From
		}
		kinds = ar.Kinds
	}
	switch from {
	case gatewayv1.NamespacesFromAll, gatewayv1.NamespacesFromSelector:
	case gatewayv1.NamespacesFromSame:
		if gw.Namespace != v.meta.Namespace {
			return false
		}
	default: // None, or a value this version does not know
		return false
	}
	if len(kinds) == 0 {
		return true
	}
	return slices.ContainsFunc(kinds, func(k gatewayv1.RouteGroupKind) bool {
		return (k.Group == nil || *k.Group == "" || *k.Group == gatewayv1.GroupName) && string(k.Kind) == v.kind
	})
}

// routeListenerHosts intersects the route's hostnames with a listener's
// hostname, as the Gateway API does: a listener without a hostname takes
// the route's, a route without hostnames takes the listener's, and
// otherwise a hostname is kept when it is the listener's or when a
// wildcard on one side matches the other, as the more specific of the two.
// The result is lower-case and fully qualified.
func routeListenerHosts(route []gatewayv1.Hostname, listener *gatewayv1.Hostname) []string {
	l := ""
	if listener != nil {
		l = routeHostname(string(*listener))
	}
	var out []string
	switch {
	case l == "" && len(route) == 0:
		return nil
	case l == "":
		for _, h := range route {
			if h := routeHostname(string(h)); h != "" {
				out = append(out, dns.Fqdn(h))
			}
		}
	case len(route) == 0:
		out = append(out, dns.Fqdn(l))
	default:
		for _, h := range route {
			if h, ok := routeIntersectHostname(l, routeHostname(string(h))); ok {
				out = append(out, dns.Fqdn(h))
			}
		}
	}
	return out
}

// routeHostname is a hostname lower-case, without a trailing dot.
func routeHostname(h string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
}

// routeIntersectHostname is the hostname that both a and b match (lower-case,
// no trailing dot): "*.example.org" and "www.example.org" give
// "www.example.org"; "*.example.org" and "*.shop.example.org" give
// "*.shop.example.org". ok is false when they are disjoint.
func routeIntersectHostname(a, b string) (string, bool) {
	if a == "" || b == "" {
		return "", false
	}
	if a == b {
		return a, true
	}
	if routeWildcardMatches(a, b) {
		return b, true
	}
	if routeWildcardMatches(b, a) {
		return a, true
	}
	return "", false
}

// routeWildcardMatches reports whether wildcard w ("*.example.org") matches the
// different name n: n is below w's suffix by at least one label. n may be a
// wildcard itself ("*.shop.example.org"), which w then covers.
func routeWildcardMatches(w, n string) bool {
	suffix, ok := strings.CutPrefix(w, "*")
	return ok && strings.HasPrefix(suffix, ".") && len(n) > len(suffix) && strings.HasSuffix(n, suffix)
}

// routeBackendIsService reports whether a backendRef names a Service (core
// group, kind Service by default).
func routeBackendIsService(b *gatewayv1.BackendObjectReference) bool {
	return (b.Group == nil || *b.Group == "") && (b.Kind == nil || *b.Kind == "Service")
}

// routeChanged is a route's change time: its newest managedFields entry,
// else its creationTimestamp.
func routeChanged(m *metav1.ObjectMeta) time.Time {
	t := m.CreationTimestamp.Time
	for _, mf := range m.ManagedFields {
		if mf.Time != nil && mf.Time.After(t) {
			t = mf.Time.Time
		}
	}
	return t
}

// routeSortedUnique sorts s and drops repeats; nil stays nil.
func routeSortedUnique[T any](s []T, cmp func(a, b T) int) []T {
	slices.SortFunc(s, cmp)
	return slices.CompactFunc(s, func(a, b T) bool { return cmp(a, b) == 0 })
}

// RouteParents are the dependency keys of the Gateways a route names as
// parents: a Gateway created or changed later derives the route again.
func RouteParents(ns string, refs []gatewayv1.ParentReference) []string {
	var keys []string
	for _, r := range refs {
		if r.Group != nil && *r.Group != gatewayv1.GroupName || r.Kind != nil && *r.Kind != object.KindGateway {
			continue
		}
		pns := ns
		if r.Namespace != nil && *r.Namespace != "" {
			pns = string(*r.Namespace)
		}
		keys = append(keys, DepGateway+pns+"/"+string(r.Name))
	}
	return keys
}
