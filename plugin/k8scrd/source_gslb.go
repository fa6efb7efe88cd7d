package k8scrd

import (
	"context"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/coredns/coredns/plugin"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
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

const (
	// kindGslb is a Gslb of k8gb.io/v1beta1 (the word of `resources`).
	kindGslb = "Gslb"
	// kindGslbLegacy is a Gslb of the legacy group k8gb.absa.oss/v1beta1:
	// served under `resources Gslb` too. Its name is kubectl's kind.group.
	kindGslbLegacy = "Gslb.k8gb.absa.oss"
	// kindTCPRoute and kindUDPRoute are read only as a Gslb's resourceRef:
	// they carry no host names, the Gslb's k8gb.io/hostname annotation does.
	kindTCPRoute = "TCPRoute"
	kindUDPRoute = "UDPRoute"
	// kindVirtualService (Istio) is a resourceRef k8gb reads and k8scrd does not.
	kindVirtualService = "VirtualService"
)

// k8gb's names.
const (
	gslbGroup       = "k8gb.io"
	gslbLegacyGroup = "k8gb.absa.oss"
	gslbVersion     = "v1beta1"

	// annotationExposedIPs and annotationExposedHostnames replace a Gslb's
	// targets (comma lists), as in k8gb; the host names are resolved.
	annotationExposedIPs       = "k8gb.io/exposed-ip-addresses"
	annotationExposedHostnames = "k8gb.io/exposed-hostnames"
	// annotationK8gbHostname is the host of a Gslb over a Service, a TCPRoute or a UDPRoute.
	annotationK8gbHostname = "k8gb.io/hostname"
	// labelMigrated marks a legacy Gslb that k8gb migrated to k8gb.io: its twin is served.
	labelMigrated = "k8gb.io/migrated-to-k8gb-io"
	// labelDNSType and labelLegacyDNSType mark the DNSEndpoints k8gb's operator writes.
	labelDNSType       = "k8gb.io/dnstype"
	labelLegacyDNSType = "k8gb.absa.oss/dnstype"
)

// gslbCRDs are the CRDs of the kinds the Gslb source watches besides the
// Gateway API kinds of gatewayKinds.
var gslbCRDs = map[string]string{
	kindGslb:       "gslbs." + gslbGroup,
	kindGslbLegacy: "gslbs." + gslbLegacyGroup,
	kindTCPRoute:   "tcproutes.gateway.networking.k8s.io",
	kindUDPRoute:   "udproutes.gateway.networking.k8s.io",
}

// gslbRefKinds are the kinds a Gslb may reference that k8scrd serves, and their API groups.
var gslbRefKinds = map[string]string{
	kindIngress:   networkingv1.GroupName,
	kindService:   corev1.GroupName,
	kindHTTPRoute: gatewayv1.GroupName,
	kindGRPCRoute: gatewayv1.GroupName,
	kindTLSRoute:  gatewayv1.GroupName,
	kindTCPRoute:  gatewayv1.GroupName,
	kindUDPRoute:  gatewayv1.GroupName,
}

// crdName is the CRD that serves kind.
func crdName(kind string) string {
	if n, ok := gatewayKinds[kind]; ok {
		return n
	}
	return gslbCRDs[kind]
}

func isGslbKind(kind string) bool { return kind == kindGslb || kind == kindGslbLegacy }

// gslbObject is what k8scrd reads of a Gslb (either group: their fields agree).
type gslbObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              gslbSpec `json:"spec,omitempty"`
}

type gslbSpec struct {
	Ingress             gslbIngressSpec `json:"ingress,omitempty"`
	Strategy            gslbStrategy    `json:"strategy"`
	ResourceRef         gslbResourceRef `json:"resourceRef,omitempty"`
	ServiceHealthPolicy string          `json:"serviceHealthPolicy,omitempty"`
}

// gslbIngressSpec is k8gb's embedded Ingress spec (its default backend is "backend").
type gslbIngressSpec struct {
	IngressClassName *string                      `json:"ingressClassName,omitempty"`
	DefaultBackend   *networkingv1.IngressBackend `json:"backend,omitempty"`
	TLS              []networkingv1.IngressTLS    `json:"tls,omitempty"`
	Rules            []networkingv1.IngressRule   `json:"rules,omitempty"`
}

type gslbStrategy struct {
	Type          string         `json:"type"`
	Weight        map[string]int `json:"weight,omitempty"`
	PrimaryGeoTag string         `json:"primaryGeoTag,omitempty"`
	DNSTtlSeconds int            `json:"dnsTtlSeconds,omitempty"`
}

// gslbResourceRef is an ObjectReference and a LabelSelector, inline.
type gslbResourceRef struct {
	APIVersion       string                            `json:"apiVersion,omitempty"`
	Kind             string                            `json:"kind,omitempty"`
	Namespace        string                            `json:"namespace,omitempty"`
	Name             string                            `json:"name,omitempty"`
	MatchLabels      map[string]string                 `json:"matchLabels,omitempty"`
	MatchExpressions []metav1.LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

func (r *gslbResourceRef) empty() bool {
	return r.Kind == "" && r.Name == "" && r.APIVersion == "" && len(r.MatchLabels) == 0 && len(r.MatchExpressions) == 0
}

// gslbWorld is the world of a Gslb's derivation: the referenced objects besides.
type gslbWorld interface {
	world
	// object is kind's object namespace/name (*networkingv1.Ingress,
	// *corev1.Service, *gatewayv1.HTTPRoute, ...), nil when there is none.
	object(kind, namespace, name string) any
	// objects are kind's objects in namespace.
	objects(kind, namespace string) []any
}

// Dependency keys of a Gslb: the object it names, or every object of a
// kind in a namespace (a label selector).
const (
	depRef   = "ref:"
	depRefNS = "refns:"
)

// gslbDerivation is what a Gslb's derivation gives besides the declaration.
type gslbDerivation struct {
	// uses are dependency keys: the referenced object and the route's Gateways.
	uses []string
	// note says why the Gslb declares nothing, or what of it is not served
	// (a missing Ingress, a VirtualService): logged once.
	note string
}

// deriveGslb derives what Gslb g (of kind kindGslb or kindGslbLegacy)
// declares; nil: nothing (see the derivation's note).
func deriveGslb(g *gslbObject, kind string, cfg *config, w gslbWorld) (*declared, gslbDerivation) {
	var out gslbDerivation
	if kind == kindGslbLegacy && strings.EqualFold(g.Labels[labelMigrated], "true") {
		out.note = "labelled " + labelMigrated + "=true: its " + gslbGroup + " twin is served instead"
		return nil, out
	}
	// The Gslb names its object: the Ingress and Gateway class filters
	// choose the objects served as sources of their own, not these.
	rcfg := *cfg
	rcfg.ingressClasses, rcfg.gatewayClasses = nil, nil

	ref := &g.Spec.ResourceRef
	var (
		base      *declared
		hostSvcs  map[string][]string // host -> its Services ("namespace/name"), for serviceHealthPolicy All
		refNS     = g.Namespace
		refKind   = ref.Kind
		refObject any
	)
	if ref.empty() {
		// spec.ingress: k8gb's operator creates an Ingress of the Gslb's
		// name from it; without the operator the user does.
		refKind = kindIngress
		out.uses = []string{depRef + kindIngress + ":" + g.Namespace + "/" + g.Name}
		refObject = w.object(kindIngress, g.Namespace, g.Name)
		if refObject == nil {
			if len(g.Spec.Ingress.Rules) == 0 {
				out.note = "neither spec.resourceRef nor spec.ingress names a host"
				return nil, out
			}
			out.note = "the Ingress " + g.Namespace + "/" + g.Name + " that spec.ingress describes does not exist; k8gb's operator created it, without the operator create it yourself (docs/replace-k8gb.md); its hosts are declared without targets here"
			d := gslbDeclared(g, kind, nil)
			for _, r := range g.Spec.Ingress.Rules {
				if name, ok := lbHostInZones(r.Host, cfg.zones); ok {
					d.hosts = append(d.hosts, declaredHost{name: name})
				}
			}
			if len(d.hosts) == 0 {
				return nil, out
			}
			d.hosts = lbSortHosts(d.hosts)
			return d, out
		}
	} else {
		group, ok := gslbRefKinds[ref.Kind]
		if !ok {
			if ref.Kind == kindVirtualService {
				out.note = "spec.resourceRef names an Istio VirtualService, which k8scrd does not serve; reference the Service of its gateway or an Ingress instead"
			} else {
				out.note = "spec.resourceRef kind " + strconv.Quote(ref.Kind) + " is not one k8scrd serves (Ingress, Service, HTTPRoute, GRPCRoute, TLSRoute, TCPRoute, UDPRoute)"
			}
			return nil, out
		}
		if gv, err := schema.ParseGroupVersion(ref.APIVersion); ref.APIVersion != "" && (err != nil || gv.Group != group) {
			out.note = "spec.resourceRef apiVersion " + strconv.Quote(ref.APIVersion) + " is not of group " + strconv.Quote(group) + " for kind " + ref.Kind
			return nil, out
		}
		switch {
		case ref.Name != "":
			if ref.Namespace != "" {
				refNS = ref.Namespace
			}
			out.uses = []string{depRef + ref.Kind + ":" + refNS + "/" + ref.Name}
			refObject = w.object(ref.Kind, refNS, ref.Name)
			if refObject == nil {
				out.note = "spec.resourceRef " + ref.Kind + " " + refNS + "/" + ref.Name + " does not exist"
				return nil, out
			}
		case len(ref.MatchLabels) > 0 || len(ref.MatchExpressions) > 0:
			// k8gb lists in the Gslb's namespace and takes exactly one match.
			sel, err := metav1.LabelSelectorAsSelector(&metav1.LabelSelector{MatchLabels: ref.MatchLabels, MatchExpressions: ref.MatchExpressions})
			if err != nil {
				out.note = "spec.resourceRef label selector: " + err.Error()
				return nil, out
			}
			out.uses = []string{depRefNS + ref.Kind + ":" + g.Namespace}
			var matched []any
			for _, o := range w.objects(ref.Kind, g.Namespace) {
				if m, err := meta.Accessor(o); err == nil && sel.Matches(labels.Set(m.GetLabels())) {
					matched = append(matched, o)
				}
			}
			if len(matched) != 1 {
				out.note = "spec.resourceRef selector " + strconv.Quote(sel.String()) + " matches " + strconv.Itoa(len(matched)) + " " + ref.Kind + " objects; k8gb takes exactly one"
				return nil, out
			}
			refObject = matched[0]
		default:
			out.note = "spec.resourceRef names neither an object nor a label selector"
			return nil, out
		}
	}

	hostname := g.Annotations[annotationK8gbHostname]
	var parents []gatewayv1.ParentReference
	switch o := refObject.(type) {
	case *networkingv1.Ingress:
		base, hostSvcs = deriveIngress(o, &rcfg, w), ingressHostServices(o, cfg.zones)
	case *corev1.Service:
		if hostname != "" {
			// k8gb takes a Service's host from the Gslb.
			o = o.DeepCopy()
			if o.Annotations == nil {
				o.Annotations = map[string]string{}
			}
			o.Annotations[annotationHostname] = hostname
		}
		base = deriveService(o, &rcfg, w)
		hostSvcs = map[string][]string{"": {o.Namespace + "/" + o.Name}}
	case *gatewayv1.HTTPRoute:
		base, parents = deriveHTTPRoute(o, &rcfg, w), o.Spec.ParentRefs
	case *gatewayv1.GRPCRoute:
		base, parents = deriveGRPCRoute(o, &rcfg, w), o.Spec.ParentRefs
	case *gatewayv1.TLSRoute:
		base, parents = deriveTLSRoute(o, &rcfg, w), o.Spec.ParentRefs
	case *gatewayv1.TCPRoute:
		v := routeView{kind: kindTCPRoute, meta: &o.ObjectMeta, parentRefs: o.Spec.ParentRefs, parents: o.Status.Parents,
			protocols: []gatewayv1.ProtocolType{gatewayv1.TCPProtocolType}}
		for _, r := range o.Spec.Rules {
			v.backends = append(v.backends, r.BackendRefs...)
		}
		base, parents = gslbPortRoute(&v, hostname, &rcfg, w, &out), o.Spec.ParentRefs
	case *gatewayv1.UDPRoute:
		v := routeView{kind: kindUDPRoute, meta: &o.ObjectMeta, parentRefs: o.Spec.ParentRefs, parents: o.Status.Parents,
			protocols: []gatewayv1.ProtocolType{gatewayv1.UDPProtocolType}}
		for _, r := range o.Spec.Rules {
			v.backends = append(v.backends, r.BackendRefs...)
		}
		base, parents = gslbPortRoute(&v, hostname, &rcfg, w, &out), o.Spec.ParentRefs
	}
	if m, err := meta.Accessor(refObject); err == nil {
		out.uses = append(out.uses, routeParents(m.GetNamespace(), parents)...)
	}
	if base == nil {
		if out.note == "" && refKind == kindService && hostname == "" {
			out.note = "a Gslb over a Service takes its host from annotation " + annotationK8gbHostname
		}
		return nil, out
	}

	d := gslbDeclared(g, kind, base)
	d.hosts = base.hosts
	d.addrs, d.hostnames = base.addrs, base.hostnames
	d.services, d.gateways = base.services, base.gateways
	if refKind != kindIngress || hostSvcs == nil {
		// A Service's or a route's every host has all its Services.
		hostSvcs = map[string][]string{"": base.services}
	}
	if strings.EqualFold(g.Spec.ServiceHealthPolicy, "All") {
		// k8gb's All: every Service of the host exists and has a ready
		// endpoint; a host without Services is not healthy.
		ready := map[string]bool{}
		for i := range d.hosts {
			h := &d.hosts[i]
			svcs, ok := hostSvcs[h.name]
			if !ok {
				svcs = hostSvcs[""]
			}
			if len(svcs) == 0 {
				h.ready = false
			}
			for _, s := range svcs {
				r, asked := ready[s]
				if !asked {
					ns, name, _ := strings.Cut(s, "/")
					r = w.ready(ns, name)
					ready[s] = r
				}
				h.ready = h.ready && r
			}
		}
	} else if p := g.Spec.ServiceHealthPolicy; p != "" && !strings.EqualFold(p, "Any") {
		d.bad = append(d.bad, "spec.serviceHealthPolicy "+strconv.Quote(p)+": want Any or All; Any is used")
	}
	for _, b := range base.bad {
		d.bad = append(d.bad, refKind+" "+base.namespace+"/"+base.name+": "+b)
	}
	gslbExposed(g.Annotations, d)
	return d, out
}

// gslbPortRoute derives a TCPRoute or a UDPRoute: its host is the Gslb's
// k8gb.io/hostname annotation, as in k8gb.
func gslbPortRoute(v *routeView, hostname string, cfg *config, w world, out *gslbDerivation) *declared {
	if strings.TrimSpace(hostname) == "" {
		out.note = "a Gslb over a " + v.kind + " takes its host from annotation " + annotationK8gbHostname
		return nil
	}
	v.hostnames = []gatewayv1.Hostname{gatewayv1.Hostname(strings.TrimSpace(hostname))}
	return deriveRoute(v, cfg, w)
}

// gslbDeclared starts the declaration of Gslb g: its identity, labels,
// times, policy from spec.strategy (and gslb.fleetdns.io/* annotations,
// which override it) and TTL from spec.strategy.dnsTtlSeconds.
func gslbDeclared(g *gslbObject, kind string, base *declared) *declared {
	d := lbDeclared(kind, &g.ObjectMeta)
	d.bad = nil
	if base != nil && base.changed.After(d.changed) {
		d.changed = base.changed
	}
	props, bad := gslbStrategyProps(&g.Spec.Strategy)
	d.bad = append(d.bad, bad...)
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
func gslbStrategyProps(s *gslbStrategy) (map[string]string, []string) {
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
func gslbExposed(annotations map[string]string, d *declared) {
	if v, ok := annotations[annotationExposedHostnames]; ok {
		d.addrs, d.hostnames = nil, nil
		for h := range strings.SplitSeq(v, ",") {
			if h = strings.TrimSpace(h); h == "" {
				continue
			}
			n := strings.ToLower(dns.Fqdn(h))
			if _, ok := dns.IsDomainName(n); !ok || n == "." || strings.ContainsAny(n, " \t\"*") {
				d.bad = append(d.bad, "annotation "+annotationExposedHostnames+": "+strconv.Quote(h)+" is not a host name")
				continue
			}
			d.hostnames = append(d.hostnames, n)
		}
		lbSortTargets(d)
		return
	}
	if v, ok := annotations[annotationExposedIPs]; ok {
		d.addrs, d.hostnames = nil, nil
		for s := range strings.SplitSeq(v, ",") {
			if s = strings.TrimSpace(s); s == "" {
				continue
			}
			a, err := netip.ParseAddr(s)
			if err != nil || a.Zone() != "" {
				d.bad = append(d.bad, "annotation "+annotationExposedIPs+": "+strconv.Quote(s)+" is not an IP address")
				continue
			}
			d.addrs = append(d.addrs, a.Unmap())
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

// gslbFromUnstructured reads a Gslb as the dynamic informer holds it.
func gslbFromUnstructured(u *unstructured.Unstructured) (*gslbObject, error) {
	g := &gslbObject{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, g); err != nil {
		return nil, err
	}
	return g, nil
}

// --- The API source's wiring (cluster, source_kube.go) ---

// watchedKinds are the kinds cluster.start watches with the core API
// clients: the derived kinds served, and with the Gslb source the
// Ingresses and Services a Gslb may name.
func (c *cluster) watchedKinds() []string {
	ks := slices.DeleteFunc(c.derivedKinds(), func(k string) bool { return crdName(k) != "" || k == kindGslb })
	if c.cfg.serves(kindGslb) {
		for _, k := range []string{kindIngress, kindService} {
			if !slices.Contains(ks, k) {
				ks = append(ks, k)
			}
		}
	}
	return ks
}

// crdKinds are the kinds watched once their CRD is established: the route
// kinds served (or, with the Gslb source, that a Gslb may name), their
// Gateways, and both Gslb groups.
func (c *cluster) crdKinds() []string {
	var ks []string
	for _, k := range c.derivedKinds() {
		if gatewayKinds[k] != "" {
			ks = append(ks, k)
		}
	}
	if c.cfg.serves(kindGslb) {
		for _, k := range []string{kindHTTPRoute, kindGRPCRoute, kindTLSRoute, kindTCPRoute, kindUDPRoute} {
			if !slices.Contains(ks, k) {
				ks = append(ks, k)
			}
		}
	}
	if len(ks) > 0 {
		ks = append(ks, kindGateway)
	}
	if c.cfg.serves(kindGslb) {
		ks = append(ks, kindGslb, kindGslbLegacy)
	}
	return ks
}

// kindHandler is the event handler of a derived kind's informers: its
// objects are queued when the kind is served, and the Gslbs that name
// them are derived again when the Gslb source is.
func (c *cluster) kindHandler(kind string) cache.ResourceEventHandler {
	own := c.cfg.serves(kind) || isGslbKind(kind)
	if _, refd := gslbRefKinds[kind]; !refd || !c.cfg.serves(kindGslb) {
		return c.objectHandler(kind)
	}
	var hs []cache.ResourceEventHandler
	if own {
		hs = append(hs, c.objectHandler(kind))
	}
	hs = append(hs, metaHandler(func(m metav1.Object) {
		c.touch(depRef + kind + ":" + m.GetNamespace() + "/" + m.GetName())
		c.touch(depRefNS + kind + ":" + m.GetNamespace())
	}, nil))
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			for _, h := range hs {
				h.OnAdd(obj, false)
			}
		},
		UpdateFunc: func(old, obj any) {
			for _, h := range hs {
				h.OnUpdate(old, obj)
			}
		},
		DeleteFunc: func(obj any) {
			for _, h := range hs {
				h.OnDelete(obj)
			}
		},
	}
}

// startGslbKind starts the informers of a kind only the Gslb source
// watches: the Gslbs of either group (through the dynamic client), and
// TCPRoutes and UDPRoutes.
func (c *cluster) startGslbKind(kind string, namespaces []string) (*watched, error) {
	switch kind {
	case kindTCPRoute:
		return c.watch(kind, "tcproutes", c.gw.GatewayV1().RESTClient(), &gatewayv1.TCPRoute{}, namespaces, "", nil, c.kindHandler(kind))
	case kindUDPRoute:
		return c.watch(kind, "udproutes", c.gw.GatewayV1().RESTClient(), &gatewayv1.UDPRoute{}, namespaces, "", nil, c.kindHandler(kind))
	}
	group := gslbGroup
	if kind == kindGslbLegacy {
		group = gslbLegacyGroup
	}
	gvr := schema.GroupVersionResource{Group: group, Version: gslbVersion, Resource: "gslbs"}
	w := &watched{byNS: map[string]cache.SharedIndexInformer{}}
	for _, ns := range namespaces {
		ri := c.dyn.Resource(gvr).Namespace(ns)
		lw := &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				o.LabelSelector = c.cfg.labels
				return ri.List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				o.LabelSelector = c.cfg.labels
				return ri.Watch(ctx, o)
			},
		}
		inf := cache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, 0, cache.Indexers{})
		if err := inf.SetTransform(trimGslb); err != nil {
			return nil, err
		}
		if err := inf.SetWatchErrorHandler(watchError(gvr.Resource+"."+group, ns)); err != nil {
			return nil, err
		}
		reg, err := inf.AddEventHandler(c.kindHandler(kind))
		if err != nil {
			return nil, err
		}
		w.byNS[ns] = inf
		c.mu.Lock()
		c.synced = append(c.synced, reg.HasSynced)
		c.mu.Unlock()
	}
	c.run(kind, w)
	return w, nil
}

// trimGslb converts a Gslb as it arrives into what the derivation reads;
// its status (which k8gb's operator wrote) is never read.
func trimGslb(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	g, err := gslbFromUnstructured(u)
	if err != nil {
		// Kept as it came: the derivation reports it.
		return trim(obj)
	}
	g.ManagedFields = gslbLastChange(g.ManagedFields)
	if a := g.Annotations; a[corev1.LastAppliedConfigAnnotation] != "" {
		a = maps.Clone(a)
		delete(a, corev1.LastAppliedConfigAnnotation)
		g.Annotations = a
	}
	return g, nil
}

// gslbLastChange keeps, of the managedFields, the newest time only (the
// change time the derivation reads).
func gslbLastChange(mfs []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
	var newest *metav1.Time
	for _, mf := range mfs {
		if mf.Time != nil && (newest == nil || mf.Time.After(newest.Time)) {
			newest = mf.Time
		}
	}
	if newest == nil {
		return nil
	}
	return []metav1.ManagedFieldsEntry{{Time: newest}}
}

// DeepCopyObject implements runtime.Object; what the cache holds is never changed.
func (g *gslbObject) DeepCopyObject() runtime.Object {
	cp := *g
	return &cp
}

// object implements gslbWorld.
func (c *cluster) object(kind, namespace, name string) any {
	c.mu.Lock()
	w := c.kinds[kind]
	c.mu.Unlock()
	return w.get(namespace, name)
}

// objects implements gslbWorld.
func (c *cluster) objects(kind, namespace string) []any {
	c.mu.Lock()
	w := c.kinds[kind]
	c.mu.Unlock()
	idx := w.indexer(namespace)
	if idx == nil {
		return nil
	}
	var out []any
	for _, o := range idx.List() {
		if m, err := meta.Accessor(o); err == nil && m.GetNamespace() == namespace {
			out = append(out, o)
		}
	}
	return out
}

// deriveGslbAt derives the Gslb of kind at namespace/name from the cache;
// uses are the dependency keys to record besides its Services and Gateways.
func (c *cluster) deriveGslbAt(key, kind, ns, name string) (d *declared, uses []string) {
	g, ok := c.object(kind, ns, name).(*gslbObject)
	if !ok {
		c.note(key, kind, ns, name, "")
		return nil, nil
	}
	d, out := deriveGslb(g, kind, c.cfg, c)
	c.note(key, kind, ns, name, out.note)
	return d, out.uses
}

// note logs what the derivation of a Gslb says about it, once per distinct note.
func (c *cluster) note(key, kind, ns, name, note string) {
	c.mu.Lock()
	if c.notes == nil {
		c.notes = map[string]string{}
	}
	same := c.notes[key] == note
	if note == "" {
		delete(c.notes, key)
	} else {
		c.notes[key] = note
	}
	c.mu.Unlock()
	if !same && note != "" {
		log.Warningf("%s %s/%s: %s", kind, ns, name, note)
	}
}

// gslbSynced tells the owners of k8gb's DNSEndpoints whether the Gslb at
// key is served, after its declaration reached the builder: a served
// Gslb's operator-written DNSEndpoints are ignored from then on.
func (c *cluster) gslbSynced(key, kind, ns, name string) {
	if c.owners == nil {
		return
	}
	// A legacy Gslb migrated to k8gb.io counts as served: its twin is.
	g, ok := c.object(kind, ns, name).(*gslbObject)
	if !ok {
		c.owners.unserve(key)
		return
	}
	c.owners.serve(key, string(g.UID))
}

// --- k8gb's DNSEndpoints under a served Gslb ---

// gslbOwners keeps the DNSEndpoints that k8gb's operator wrote (labelled
// k8gb.io/dnstype or k8gb.absa.oss/dnstype, controlled by a Gslb) and
// hands the builder only those whose Gslb is not served: the operator's
// frozen records never beat the live source. It serializes the builder
// calls for these DNSEndpoints, so that a Gslb served concurrently with
// its DNSEndpoint's update never lets the DNSEndpoint through.
type gslbOwners struct {
	b *builder

	mu     sync.Mutex
	served map[string]string        // Gslb key -> uid
	uids   map[string]int           // uid -> Gslb keys serving it
	held   map[string]*heldEndpoint // DNSEndpoint key -> it
	byUID  map[string]map[string]struct{}
}

type heldEndpoint struct {
	owner   string
	obj     *object.Object
	ignored bool
}

func newGslbOwners(b *builder) *gslbOwners {
	return &gslbOwners{b: b, served: map[string]string{}, uids: map[string]int{}, held: map[string]*heldEndpoint{}, byUID: map[string]map[string]struct{}{}}
}

// k8gbController is the uid of the Gslb that controls a DNSEndpoint
// k8gb's operator wrote, "" for any other DNSEndpoint.
func k8gbController(m *metav1.ObjectMeta) string {
	if m.Labels[labelDNSType] == "" && m.Labels[labelLegacyDNSType] == "" {
		return ""
	}
	for _, r := range m.OwnerReferences {
		if r.Controller == nil || !*r.Controller || r.Kind != kindGslb {
			continue
		}
		if gv, err := schema.ParseGroupVersion(r.APIVersion); err == nil && (gv.Group == gslbGroup || gv.Group == gslbLegacyGroup) {
			return string(r.UID)
		}
	}
	return ""
}

// upsert hands the builder DNSEndpoint o, controlled by the Gslb of uid
// owner ("" none), unless that Gslb is served.
func (g *gslbOwners) upsert(o *object.Object, owner string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.forget(o.Key)
	if owner == "" {
		g.b.upsert(o)
		return
	}
	h := &heldEndpoint{owner: owner, obj: o, ignored: g.uids[owner] > 0}
	g.held[o.Key] = h
	m := g.byUID[owner]
	if m == nil {
		m = map[string]struct{}{}
		g.byUID[owner] = m
	}
	m[o.Key] = struct{}{}
	if h.ignored {
		g.b.remove(o.Key)
	} else {
		g.b.upsert(o)
	}
	g.count()
}

// remove drops DNSEndpoint key, deleted at version (for the SOA serial).
func (g *gslbOwners) remove(key string, version uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.forget(key)
	g.b.removeAt(key, version)
	g.count()
}

func (g *gslbOwners) forget(key string) {
	h := g.held[key]
	if h == nil {
		return
	}
	delete(g.held, key)
	if m := g.byUID[h.owner]; m != nil {
		delete(m, key)
		if len(m) == 0 {
			delete(g.byUID, h.owner)
		}
	}
}

// serve marks the Gslb at key (of uid) served: its DNSEndpoints leave the store.
func (g *gslbOwners) serve(key, uid string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if old, ok := g.served[key]; ok {
		if old == uid {
			return
		}
		g.drop(key)
	}
	g.served[key] = uid
	g.uids[uid]++
	for k := range g.byUID[uid] {
		if h := g.held[k]; !h.ignored {
			h.ignored = true
			g.b.remove(k)
		}
	}
	g.count()
}

// unserve marks the Gslb at key not served (gone): DNSEndpoints it
// controlled, while they remain, are served again.
func (g *gslbOwners) unserve(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.drop(key)
	g.count()
}

func (g *gslbOwners) drop(key string) {
	uid, ok := g.served[key]
	if !ok {
		return
	}
	delete(g.served, key)
	if g.uids[uid]--; g.uids[uid] > 0 {
		return
	}
	delete(g.uids, uid)
	for k := range g.byUID[uid] {
		if h := g.held[k]; h.ignored {
			h.ignored = false
			g.b.upsert(h.obj)
		}
	}
}

// count sets the gauge of DNSEndpoints ignored now.
func (g *gslbOwners) count() {
	n := 0
	for _, h := range g.held {
		if h.ignored {
			n++
		}
	}
	gslbIgnoredEndpoints.Set(float64(n))
}

var gslbIgnoredEndpoints = promauto.NewGauge(prometheus.GaugeOpts{
	Namespace: plugin.Namespace,
	Subsystem: "k8scrd",
	Name:      "gslb_ignored_dnsendpoints",
	Help:      "DNSEndpoints written by k8gb's operator ignored now because the Gslb that controls them is served (resources Gslb).",
})
