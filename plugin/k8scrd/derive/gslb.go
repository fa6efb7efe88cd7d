package derive

import (
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/external-dns/endpoint"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// The Gslb source (docs/architecture.md, and this plugin's README): k8gb's Gslb objects, read
// directly, without k8gb's operator. A Gslb names an object (spec.resourceRef,
// or the Ingress of its own name for spec.ingress); the Gslb declares that
// object's hosts with its targets, under the Gslb's strategy, healthy by
// k8gb's rule (spec.serviceHealthPolicy). The referenced object is derived
// by the code of its own kind; its kind is watched for the Gslb source
// even when `resources` does not list it, and then it is not served as a
// source of its own.

// GslbWorld is the world of a Gslb's derivation: the referenced objects besides.
type GslbWorld interface {
	World
	// Object is kind's object namespace/name (*networkingv1.Ingress,
	// *corev1.Service, *gatewayv1.HTTPRoute, ...), nil when there is none.
	Object(kind, namespace, name string) any
	// Objects are kind's objects in namespace.
	Objects(kind, namespace string) []any
}

// GslbDerivation is what a Gslb's derivation gives besides the declaration.
type GslbDerivation struct {
	// Uses are dependency keys: the referenced object and the route's Gateways.
	Uses []string
	// Note says why the Gslb declares nothing, or what of it is not served
	// (a missing Ingress, a VirtualService): logged once.
	Note string
	// Refused is set when spec.resourceRef names another namespace: the
	// Gslb declares nothing, and the note is also counted and reported on
	// the Gslb (an Event).
	Refused bool
}

// DeriveGslb derives what Gslb g (of kind kindGslb or kindGslbLegacy)
// declares; nil: nothing (see the derivation's note).
func DeriveGslb(g *object.GslbObject, kind string, cfg *Options, w GslbWorld) (*Declared, GslbDerivation) {
	var out GslbDerivation
	if kind == object.KindGslbLegacy && strings.EqualFold(g.Labels[object.LabelMigrated], "true") {
		out.Note = "labelled " + object.LabelMigrated + "=true: its " + object.GslbGroup + " twin is served instead"
		return nil, out
	}
	// The Gslb names its object: the Ingress and Gateway class filters
	// choose the objects served as sources of their own, not these.
	rcfg := *cfg
	rcfg.IngressClasses, rcfg.GatewayClasses = nil, nil
	rcfg.Names.Unserved = func(string, string, string, []UnservedName) {} // k8s_gateway's names: the object's own source says them

	refKind, refObject := object.KindIngress, any(nil)
	if g.Spec.ResourceRef.Empty() {
		// spec.ingress: k8gb's operator creates an Ingress of the Gslb's
		// name from it; without the operator the user does.
		out.Uses = []string{DepRef + object.KindIngress + ":" + g.Namespace + "/" + g.Name}
		if refObject = w.Object(object.KindIngress, g.Namespace, g.Name); refObject == nil {
			return gslbIngressAbsent(g, kind, cfg, &out), out
		}
	} else {
		refKind = g.Spec.ResourceRef.Kind
		if refObject = gslbReferenced(g, w, &out); refObject == nil {
			return nil, out
		}
	}

	hostname := g.Annotations[object.AnnotationK8gbHostname]
	base, hostSvcs := gslbDeriveReferenced(refKind, refObject, hostname, &rcfg, cfg.Zones, w, &out)
	if base == nil {
		if out.Note == "" && refKind == object.KindService && hostname == "" {
			out.Note = "a Gslb over a Service takes its host from annotation " + object.AnnotationK8gbHostname
		}
		return nil, out
	}

	d := gslbDeclared(g, kind, base)
	d.Hosts = base.Hosts
	d.Addrs, d.Hostnames = base.Addrs, base.Hostnames
	d.Services, d.Gateways = base.Services, base.Gateways
	if refKind != object.KindIngress || hostSvcs == nil {
		// A Service's or a route's every host has all its Services.
		hostSvcs = map[string][]string{"": base.Services}
	}
	gslbHealth(g, d, hostSvcs, w)
	for _, b := range base.Bad {
		d.Bad = append(d.Bad, refKind+" "+base.Namespace+"/"+base.Name+": "+b)
	}
	gslbExposed(g.Annotations, d)
	return d, out
}

// gslbIngressAbsent is what a Gslb with spec.ingress declares while the
// Ingress it describes does not exist: its hosts, without targets.
func gslbIngressAbsent(g *object.GslbObject, kind string, cfg *Options, out *GslbDerivation) *Declared {
	if len(g.Spec.Ingress.Rules) == 0 {
		out.Note = "neither spec.resourceRef nor spec.ingress names a host"
		return nil
	}
	out.Note = "the Ingress " + g.Namespace + "/" + g.Name + " that spec.ingress describes does not exist; k8gb's operator created it, without the operator create it yourself (docs/replace-k8gb.md); its hosts are declared without targets here"
	d := gslbDeclared(g, kind, nil)
	for _, r := range g.Spec.Ingress.Rules {
		if name, ok := lbHostInZones(r.Host, cfg.Zones); ok {
			d.Hosts = append(d.Hosts, DeclaredHost{Name: name})
		}
	}
	if len(d.Hosts) == 0 {
		return nil
	}
	d.Hosts = lbSortHosts(d.Hosts)
	return d
}

// gslbReferenced returns the object spec.resourceRef names (by name, or the
// one object its label selector matches), in the Gslb's namespace only, as
// k8gb takes it; nil, with out.note saying why, when there is none. A
// spec.resourceRef.namespace other than the Gslb's is refused: another
// team's object would lend the Gslb its host names and readiness.
func gslbReferenced(g *object.GslbObject, w GslbWorld, out *GslbDerivation) any {
	ref := &g.Spec.ResourceRef
	group, ok := object.GslbRefKinds[ref.Kind]
	if !ok {
		if ref.Kind == object.KindVirtualService {
			out.Note = "spec.resourceRef names an Istio VirtualService, which k8scrd does not serve; reference the Service of its gateway or an Ingress instead"
		} else {
			out.Note = "spec.resourceRef kind " + strconv.Quote(ref.Kind) + " is not one k8scrd serves (Ingress, Service, HTTPRoute, GRPCRoute, TLSRoute, TCPRoute, UDPRoute)"
		}
		return nil
	}
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); ref.APIVersion != "" && (err != nil || gv.Group != group) {
		out.Note = "spec.resourceRef apiVersion " + strconv.Quote(ref.APIVersion) + " is not of group " + strconv.Quote(group) + " for kind " + ref.Kind
		return nil
	}
	if ref.Namespace != "" && ref.Namespace != g.Namespace {
		out.Note = "spec.resourceRef namespace " + strconv.Quote(ref.Namespace) + " is not the Gslb's; k8gb resolves spec.resourceRef in the Gslb's own namespace only: the Gslb declares nothing"
		out.Refused = true
		return nil
	}
	switch {
	case ref.Name != "":
		out.Uses = []string{DepRef + ref.Kind + ":" + g.Namespace + "/" + ref.Name}
		obj := w.Object(ref.Kind, g.Namespace, ref.Name)
		if obj == nil {
			out.Note = "spec.resourceRef " + ref.Kind + " " + g.Namespace + "/" + ref.Name + " does not exist"
			return nil
		}
		return obj
	case len(ref.MatchLabels) > 0 || len(ref.MatchExpressions) > 0:
		// k8gb lists in the Gslb's namespace and takes exactly one match.
		sel, err := metav1.LabelSelectorAsSelector(&metav1.LabelSelector{MatchLabels: ref.MatchLabels, MatchExpressions: ref.MatchExpressions})
		if err != nil {
			out.Note = "spec.resourceRef label selector: " + err.Error()
			return nil
		}
		out.Uses = []string{DepRefNS + ref.Kind + ":" + g.Namespace}
		var matched []any
		for _, o := range w.Objects(ref.Kind, g.Namespace) {
			if m, err := meta.Accessor(o); err == nil && sel.Matches(labels.Set(m.GetLabels())) {
				matched = append(matched, o)
			}
		}
		if len(matched) != 1 {
			out.Note = "spec.resourceRef selector " + strconv.Quote(sel.String()) + " matches " + strconv.Itoa(len(matched)) + " " + ref.Kind + " objects; k8gb takes exactly one"
			return nil
		}
		return matched[0]
	default:
		out.Note = "spec.resourceRef names neither an object nor a label selector"
		return nil
	}
}

// gslbDeriveReferenced derives the object a Gslb names through the kinds'
// table (a Service with the Gslb's host; a TCPRoute or UDPRoute, which carry
// no host names, with the Gslb's), and returns with it each host's Services
// ("" for every host) for serviceHealthPolicy All.
func gslbDeriveReferenced(refKind string, refObject any, hostname string, rcfg *Options, zones []string, w GslbWorld, out *GslbDerivation) (base *Declared, hostSvcs map[string][]string) {
	var parents []gatewayv1.ParentReference
	switch o := refObject.(type) {
	case *networkingv1.Ingress:
		base, _ = Derive(object.KindIngress, o, rcfg, w)
		hostSvcs = ingressHostServices(o, zones)
	case *corev1.Service:
		if hostname != "" {
			// k8gb takes a Service's host from the Gslb.
			o = o.DeepCopy()
			if o.Annotations == nil {
				o.Annotations = map[string]string{}
			}
			o.Annotations[object.AnnotationHostname] = hostname
		}
		base, _ = Derive(object.KindService, o, rcfg, w)
		hostSvcs = map[string][]string{"": {o.Namespace + "/" + o.Name}}
	case *gatewayv1.HTTPRoute, *gatewayv1.GRPCRoute, *gatewayv1.TLSRoute:
		base, parents = Derive(refKind, o, rcfg, w)
	case *gatewayv1.TCPRoute:
		v := routeView{kind: object.KindTCPRoute, meta: &o.ObjectMeta, parentRefs: o.Spec.ParentRefs, parents: o.Status.Parents,
			protocols: []gatewayv1.ProtocolType{gatewayv1.TCPProtocolType}}
		for _, r := range o.Spec.Rules {
			v.backends = append(v.backends, r.BackendRefs...)
		}
		base, parents = gslbPortRoute(&v, hostname, rcfg, w, out), o.Spec.ParentRefs
	case *gatewayv1.UDPRoute:
		v := routeView{kind: object.KindUDPRoute, meta: &o.ObjectMeta, parentRefs: o.Spec.ParentRefs, parents: o.Status.Parents,
			protocols: []gatewayv1.ProtocolType{gatewayv1.UDPProtocolType}}
		for _, r := range o.Spec.Rules {
			v.backends = append(v.backends, r.BackendRefs...)
		}
		base, parents = gslbPortRoute(&v, hostname, rcfg, w, out), o.Spec.ParentRefs
	}
	if m, err := meta.Accessor(refObject); err == nil {
		out.Uses = append(out.Uses, RouteParents(m.GetNamespace(), parents)...)
	}
	return base, hostSvcs
}

// gslbHealth applies the Gslb's spec.serviceHealthPolicy to d's hosts:
// Any (the default) keeps the referenced object's health; All wants every
// Service of a host to exist and have a ready endpoint.
func gslbHealth(g *object.GslbObject, d *Declared, hostSvcs map[string][]string, w GslbWorld) {
	if strings.EqualFold(g.Spec.ServiceHealthPolicy, "All") {
		// k8gb's All: every Service of the host exists and has a ready
		// endpoint; a host without Services is not healthy.
		ready := map[string]bool{}
		for i := range d.Hosts {
			h := &d.Hosts[i]
			svcs, ok := hostSvcs[h.Name]
			if !ok {
				svcs = hostSvcs[""]
			}
			if len(svcs) == 0 {
				h.Ready = false
			}
			for _, s := range svcs {
				r, asked := ready[s]
				if !asked {
					ns, name, _ := strings.Cut(s, "/")
					r = w.Ready(ns, name)
					ready[s] = r
				}
				h.Ready = h.Ready && r
			}
		}
	} else if p := g.Spec.ServiceHealthPolicy; p != "" && !strings.EqualFold(p, "Any") {
		d.Bad = append(d.Bad, "spec.serviceHealthPolicy "+strconv.Quote(p)+": want Any or All; Any is used")
	}
}

// gslbPortRoute derives a TCPRoute or a UDPRoute: its host is the Gslb's
// k8gb.io/hostname annotation, as in k8gb.
func gslbPortRoute(v *routeView, hostname string, cfg *Options, w World, out *GslbDerivation) *Declared {
	if strings.TrimSpace(hostname) == "" {
		out.Note = "a Gslb over a " + v.kind + " takes its host from annotation " + object.AnnotationK8gbHostname
		return nil
	}
	v.hostnames = []gatewayv1.Hostname{gatewayv1.Hostname(strings.TrimSpace(hostname))}
	return deriveRoute(v, cfg, w)
}

// gslbDeclared starts the declaration of Gslb g: its identity, labels,
// times, policy from spec.strategy (and gslb.fleetdns.io/* annotations,
// which override it) and TTL from spec.strategy.dnsTtlSeconds.
func gslbDeclared(g *object.GslbObject, kind string, base *Declared) *Declared {
	d := lbDeclared(kind, &g.ObjectMeta)
	d.Bad = nil
	if base != nil && base.Changed.After(d.Changed) {
		d.Changed = base.Changed
	}
	props, bad := gslbStrategyProps(&g.Spec.Strategy)
	d.Bad = append(d.Bad, bad...)
	for _, p := range d.props { // the annotations
		props[p.Name] = p.Value
	}
	d.props = nil
	for _, name := range slices.Sorted(maps.Keys(props)) {
		d.props = append(d.props, endpoint.ProviderSpecificProperty{Name: name, Value: props[name]})
	}
	d.ttl, d.ttlSet = 0, false
	if t := g.Spec.Strategy.DNSTtlSeconds; t > 0 && t <= object.MaxTTL {
		d.ttl, d.ttlSet = uint32(t), true
	}
	return d
}

// gslbStrategyProps maps spec.strategy to the gslb/* properties: type
// roundRobin (weighted when weights are given, k8gb's weighted round
// robin), failover, geoip; primaryGeoTag; weight; dnsTtlSeconds.
func gslbStrategyProps(s *object.GslbStrategy) (map[string]string, []string) {
	props := map[string]string{}
	var bad []string
	switch strings.ToLower(s.Type) {
	case "roundrobin":
		props["gslb/strategy"] = "roundRobin"
		if len(s.Weight) > 0 {
			props["gslb/strategy"] = "weighted"
		}
	case "failover":
		props["gslb/strategy"] = "failover"
	case "geoip":
		props["gslb/strategy"] = "geoip"
	case "":
	default:
		bad = append(bad, "spec.strategy.type "+strconv.Quote(s.Type)+": want roundRobin, failover or geoip; the block's default strategy is used")
	}
	if p := strings.TrimSpace(s.PrimaryGeoTag); p != "" {
		props["gslb/primary"] = p
	}
	if len(s.Weight) > 0 {
		var ws []string
		for _, tag := range slices.Sorted(maps.Keys(s.Weight)) {
			n := s.Weight[tag]
			if n < 0 {
				bad = append(bad, "spec.strategy.weight "+tag+"="+strconv.Itoa(n)+": want a number >= 0; taken as 0")
				n = 0
			}
			ws = append(ws, tag+"="+strconv.Itoa(n))
		}
		props["gslb/weight"] = strings.Join(ws, ",")
	}
	switch t := s.DNSTtlSeconds; {
	case t > 0 && t <= object.MaxTTL:
		props["gslb/ttl"] = strconv.Itoa(t)
	case t < 0 || t > object.MaxTTL:
		bad = append(bad, "spec.strategy.dnsTtlSeconds "+strconv.Itoa(t)+": want seconds, 0 to "+strconv.Itoa(object.MaxTTL)+"; the default TTL is used")
	}
	return props, bad
}

// gslbExposed applies k8gb's target overrides: k8gb.io/exposed-hostnames
// (resolved, as status host names are) before k8gb.io/exposed-ip-addresses;
// either replaces the object's targets.
func gslbExposed(annotations map[string]string, d *Declared) {
	if v, ok := annotations[object.AnnotationExposedHostnames]; ok {
		d.Addrs, d.Hostnames, d.AnnotatedHostnames = nil, nil, true
		for h := range strings.SplitSeq(v, ",") {
			if h = strings.TrimSpace(h); h == "" {
				continue
			}
			n := strings.ToLower(dns.Fqdn(h))
			if _, ok := dns.IsDomainName(n); !ok || n == "." || strings.ContainsAny(n, " \t\"*") {
				d.Bad = append(d.Bad, "annotation "+object.AnnotationExposedHostnames+": "+strconv.Quote(h)+" is not a host name")
				continue
			}
			d.Hostnames = append(d.Hostnames, n)
		}
		lbSortTargets(d)
		return
	}
	if v, ok := annotations[object.AnnotationExposedIPs]; ok {
		d.Addrs, d.Hostnames = nil, nil
		for s := range strings.SplitSeq(v, ",") {
			if s = strings.TrimSpace(s); s == "" {
				continue
			}
			a, err := netip.ParseAddr(s)
			if err != nil || a.Zone() != "" {
				d.Bad = append(d.Bad, "annotation "+object.AnnotationExposedIPs+": "+strconv.Quote(s)+" is not an IP address")
				continue
			}
			d.Addrs = append(d.Addrs, a.Unmap())
		}
		lbSortTargets(d)
	}
}

// ingressHostServices are the Services of each host of an Ingress, as
// deriveIngress reads them ("namespace/name"): a rule host's path
// backends, else the default backend; a host only in spec.tls the default
// backend.
func ingressHostServices(ing *networkingv1.Ingress, zones []string) map[string][]string {
	var def []string
	if b := ing.Spec.DefaultBackend; b != nil && b.Service != nil && b.Service.Name != "" {
		def = []string{ing.Namespace + "/" + b.Service.Name}
	}
	out := map[string][]string{}
	for _, r := range ing.Spec.Rules {
		name, ok := lbHostInZones(r.Host, zones)
		if !ok {
			continue
		}
		svcs := out[name]
		if r.HTTP != nil {
			for _, p := range r.HTTP.Paths {
				if s := p.Backend.Service; s != nil && s.Name != "" {
					svcs = append(svcs, ing.Namespace+"/"+s.Name)
				}
			}
		}
		out[name] = svcs
	}
	for name, svcs := range out {
		if len(svcs) == 0 {
			out[name] = def
		}
	}
	for _, t := range ing.Spec.TLS {
		for _, h := range t.Hosts {
			if name, ok := lbHostInZones(h, zones); ok {
				if _, seen := out[name]; !seen {
					out[name] = def
				}
			}
		}
	}
	return out
}
