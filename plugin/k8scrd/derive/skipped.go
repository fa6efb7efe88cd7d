package derive

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Why a name an object declares is not served: one vocabulary for the
// Events on the object (the API feed) and for `coredns -lint` (lint.go),
// so that the lint prints before an apply what the object says after it.
const (
	// EventNameRefused: tenancy refused the name (tenancy.go).
	EventNameRefused = "NameRefused"
	// EventInvalidEndpoint: an endpoint that does not parse, or an RRset
	// that fits in no DNS message.
	EventInvalidEndpoint = "InvalidEndpoint"
	// EventNameSkipped: a name the object names but that the derivation
	// or the block does not take: another class, a parent that has not
	// accepted it, a name k8s_gateway would serve and the block's naming
	// words do not (names.go's reasons, but for a Service's
	// NAME.NAMESPACE). The lint also says names outside the zones, a
	// Service's NAME.NAMESPACE, and a namespace or labels the block does
	// not read.
	EventNameSkipped = "NameSkipped"
	// EventReferenceRefused: a Gslb names an object it may not use.
	EventReferenceRefused = "ReferenceRefused"
)

// SkipNote is one reason a derived object, or one of its names, is not
// served; name is "" when the reason is the object's as a whole.
type SkipNote struct {
	Name string
	Msg  string
	// K8sGateway is the reason* of names.go when the name is one
	// k8s_gateway would serve and the block's naming words do not.
	K8sGateway string
	// Zone: outside the zones. Said by the lint only: a cluster runs
	// several servers (kube-system's, the GSLB zone's, external-dns's
	// providers), and a name outside this one's zones is most often
	// another's, served there; an Event would tell its team otherwise.
	Zone bool
	// LintOnly: said by the lint, not as an Event: a route its parent has
	// not looked at yet (an Event would race the controller), a
	// LoadBalancer Service's NAME.NAMESPACE name.
	LintOnly bool
}

// SkippedNames explains what of a derived object (an Ingress, a Service, a
// route) the derivation did not take, given what it declared (d, nil for
// nothing) and the names k8s_gateway would serve that the derivation
// handed to cfg.names.unserved (unserved): the names it names that are not
// among d's hosts, and why. It reads the object as the derivations do and
// decides nothing: the derivation's answer stands, this only says why.
func SkippedNames(kind string, obj any, d *Declared, unserved []UnservedName, cfg *Options, w World) []SkipNote {
	var notes []SkipNote
	took := func(name string) bool {
		if d == nil {
			return false
		}
		return slices.ContainsFunc(d.Hosts, func(h DeclaredHost) bool { return h.Name == name })
	}
	// zone notes a host outside the zones; in reports whether it is
	// inside (with `relative_hosts`, a relative host is, below the zones).
	// A relative host without `relative_hosts` is the derivation's to say
	// (reasonK8sGatewayRelative), not one of another domain.
	zone := func(host, from string) (name string, in bool) {
		host = strings.TrimSpace(host)
		if host == "" || host == "." {
			return "", false
		}
		names, relative, invalid := cfg.Names.hostNames(host, cfg.Zones)
		switch {
		case len(names) > 0:
			return names[0], true
		case relative, invalid && cfg.Names.RelativeHosts:
			return "", false // an invalid one: the derivation says it (d.bad)
		}
		name = strings.ToLower(strings.TrimSuffix(host, ".") + ".")
		notes = append(notes, SkipNote{Name: name, Msg: fmt.Sprintf("%s (%s) is outside the zones %s", name, from, strings.Join(cfg.Zones, " ")), Zone: true})
		return name, false
	}
	switch o := obj.(type) {
	case *networkingv1.Ingress:
		if len(cfg.IngressClasses) > 0 {
			if c := ingressClass(o, w.DefaultIngressClass()); !slices.Contains(cfg.IngressClasses, c) {
				what := fmt.Sprintf("IngressClass %q", c)
				if c == "" {
					what = "no IngressClass (no ingressClassName, no " + object.AnnotationIngressClass + " annotation, no default class)"
				}
				return append(notes, SkipNote{Name: "", Msg: fmt.Sprintf("%s is not one ingress_class serves (%s)", what, strings.Join(cfg.IngressClasses, " "))})
			}
		}
		for _, r := range o.Spec.Rules {
			zone(r.Host, "rule host")
		}
		for _, t := range o.Spec.TLS {
			for _, h := range t.Hosts {
				if name, in := zone(h, "tls host"); in && !took(name) && o.Spec.DefaultBackend == nil {
					notes = append(notes, SkipNote{Name: name, Msg: fmt.Sprintf("%s is only in spec.tls, and without a default backend nothing routes it", name)})
				}
			}
		}
	case *corev1.Service:
		// The annotation the block reads (hostname_annotation); the
		// others, and NAME.NAMESPACE, are the derivation's to say.
		key, hosts, annotated := cfg.Names.hostnameAnnotation(o.Annotations)
		_, k8sgw := o.Annotations[object.AnnotationK8sGatewayHostname]
		if o.Spec.Type != corev1.ServiceTypeLoadBalancer {
			if annotated || k8sgw {
				t := cmp.Or(o.Spec.Type, corev1.ServiceTypeClusterIP) // the API's default
				notes = append(notes, SkipNote{Name: "", Msg: fmt.Sprintf("a Service of type %s: only LoadBalancer Services' hosts are served", t)})
			}
			break // else a ClusterIP Service names no host, unless k8s_gateway's resolve-endpoints
		}
		for _, h := range splitHostnames(hosts) {
			zone(h, "annotation "+key)
		}
	case *gatewayv1.HTTPRoute, *gatewayv1.GRPCRoute, *gatewayv1.TLSRoute:
		notes = append(notes, skippedRoute(routeOf(kind, obj), d, cfg, w, zone, took)...)
	}
	for _, u := range unserved {
		// A LoadBalancer Service without a hostname is most often not
		// meant for DNS: its NAME.NAMESPACE name is the lint's to say.
		notes = append(notes, SkipNote{Name: u.name, Msg: unservedMessage(u), K8sGateway: u.reason,
			LintOnly: u.reason == reasonK8sGatewayServiceName})
	}
	return notes
}

// routeOf is the view of a route that the derivation reads.
func routeOf(kind string, obj any) *routeView {
	switch r := obj.(type) {
	case *gatewayv1.HTTPRoute:
		return &routeView{kind: kind, meta: &r.ObjectMeta, hostnames: r.Spec.Hostnames, parentRefs: r.Spec.ParentRefs, parents: r.Status.Parents, protocols: routeHTTPProtocols}
	case *gatewayv1.GRPCRoute:
		return &routeView{kind: kind, meta: &r.ObjectMeta, hostnames: r.Spec.Hostnames, parentRefs: r.Spec.ParentRefs, parents: r.Status.Parents, protocols: routeHTTPProtocols}
	case *gatewayv1.TLSRoute:
		return &routeView{kind: kind, meta: &r.ObjectMeta, hostnames: r.Spec.Hostnames, parentRefs: r.Spec.ParentRefs, parents: r.Status.Parents, protocols: routeTLSProtocols}
	}
	return nil
}

// skippedRoute explains a route: why no parent counts (d nil), and which
// of its hostnames no listener of a counting parent took.
func skippedRoute(v *routeView, d *Declared, cfg *Options, w World, zone func(host, from string) (string, bool), took func(string) bool) []SkipNote {
	if v == nil {
		return nil
	}
	var notes []SkipNote
	if d == nil {
		for i := range v.parentRefs {
			ref := &v.parentRefs[i]
			if !routeRefIsGateway(ref) {
				continue
			}
			gw := routeRefNamespace(ref, v.meta.Namespace) + "/" + string(ref.Name)
			if accepted, _ := routeParentConditions(v, ref); !accepted {
				reported := slices.ContainsFunc(v.parents, func(p gatewayv1.RouteParentStatus) bool { return routeSameParent(&p.ParentRef, ref, v.meta.Namespace) })
				notes = append(notes, SkipNote{Name: "", Msg: fmt.Sprintf("parent Gateway %s has not accepted it (no Accepted=True at generation %d in status.parents)", gw, v.meta.Generation), LintOnly: !reported})
				continue
			}
			g := w.Gateway(routeRefNamespace(ref, v.meta.Namespace), string(ref.Name))
			if g == nil {
				notes = append(notes, SkipNote{Name: "", Msg: fmt.Sprintf("parent Gateway %s is not there (or not in a namespace this block reads)", gw)})
				continue
			}
			if len(cfg.GatewayClasses) > 0 && !slices.Contains(cfg.GatewayClasses, string(g.Spec.GatewayClassName)) {
				notes = append(notes, SkipNote{Name: "", Msg: fmt.Sprintf("parent Gateway %s is of GatewayClass %q, not one gateway_class serves (%s)", gw, g.Spec.GatewayClassName, strings.Join(cfg.GatewayClasses, " "))})
			}
		}
		if len(notes) == 0 {
			notes = append(notes, SkipNote{Name: "", Msg: "no parentRef names a Gateway that accepted it"})
		}
	}
	for _, h := range v.hostnames {
		if name, in := zone(string(h), "hostname"); in && d != nil && !took(name) {
			notes = append(notes, SkipNote{Name: name, Msg: fmt.Sprintf("%s is taken by no listener of the Gateways that accepted the route", name)})
		}
	}
	return notes
}

// DeriveReported derives obj as derive does, and returns besides the names
// k8s_gateway would serve that the block does not, which the derivation
// hands to cfg.names.unserved: logged and counted as noteUnserved does
// (or handed to cfg's own collector), and said in the NameSkipped Events.
func DeriveReported(kind string, obj any, cfg *Options, w World) (*Declared, []gatewayv1.ParentReference, []UnservedName) {
	var (
		unserved        []UnservedName
		called          bool
		uKind, ns, name string
	)
	dcfg := *cfg
	dcfg.Names.Unserved = func(k, n, m string, names []UnservedName) {
		unserved = append(unserved, names...)
		called, uKind, ns, name = true, k, n, m
	}
	d, refs := Derive(kind, obj, &dcfg, w)
	if called {
		noteUnserved(cfg, uKind, ns, name, unserved)
	}
	return d, refs, unserved
}
