package derive

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"

	"github.com/miekg/dns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/external-dns/endpoint"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// routeTestWorld is the world of the route tests: Gateways by
// "namespace/name", and the Services with a ready endpoint.
type routeTestWorld struct {
	gateways      map[string]*gatewayv1.Gateway
	readyServices map[string]bool
}

func (w routeTestWorld) Ready(ns, name string) bool  { return w.readyServices[ns+"/"+name] }
func (w routeTestWorld) DefaultIngressClass() string { return "" }
func (w routeTestWorld) Gateway(ns, name string) *gatewayv1.Gateway {
	return w.gateways[ns+"/"+name]
}

func routePtr[T any](v T) *T { return &v }

const routeGeneration = 3

// routeListener is a listener; from "" leaves allowedRoutes unset (Same).
func routeListener(name string, port int32, proto gatewayv1.ProtocolType, hostname string, from gatewayv1.FromNamespaces) gatewayv1.Listener {
	l := gatewayv1.Listener{Name: gatewayv1.SectionName(name), Port: gatewayv1.PortNumber(port), Protocol: proto}
	if hostname != "" {
		l.Hostname = routePtr(gatewayv1.Hostname(hostname))
	}
	if from != "" {
		l.AllowedRoutes = &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: routePtr(from)}}
	}
	return l
}

// routeGateway is Gateway ns/name of class "eg" with these listeners and
// status addresses ("TYPE=VALUE", or VALUE for an unset type).
func routeGateway(ns, name string, listeners []gatewayv1.Listener, addrs ...string) *gatewayv1.Gateway {
	gw := &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       gatewayv1.GatewaySpec{GatewayClassName: "eg", Listeners: listeners},
	}
	for _, a := range addrs {
		typ, value, ok := strings.Cut(a, "=")
		if !ok {
			gw.Status.Addresses = append(gw.Status.Addresses, gatewayv1.GatewayStatusAddress{Value: a})
			continue
		}
		gw.Status.Addresses = append(gw.Status.Addresses, gatewayv1.GatewayStatusAddress{Type: routePtr(gatewayv1.AddressType(typ)), Value: value})
	}
	return gw
}

// routeWorld is a world with gateway web/gw (an HTTP listener on port 80,
// no hostname, status address 192.0.2.10) and web/app ready.
func routeWorld() routeTestWorld {
	return routeTestWorld{
		gateways: map[string]*gatewayv1.Gateway{
			"web/gw": routeGateway("web", "gw", []gatewayv1.Listener{routeListener("http", 80, gatewayv1.HTTPProtocolType, "", "")}, "192.0.2.10"),
		},
		readyServices: map[string]bool{"web/app": true},
	}
}

// routeParent is a parentRef to Gateway name (namespace unset).
func routeParent(name string) gatewayv1.ParentReference {
	return gatewayv1.ParentReference{Name: gatewayv1.ObjectName(name)}
}

// routeStatus is a status entry for ref with the conditions given as
// "Type=Status@generation".
func routeStatus(ref gatewayv1.ParentReference, conds ...string) gatewayv1.RouteParentStatus {
	p := gatewayv1.RouteParentStatus{ParentRef: ref, ControllerName: "example.org/gateway"}
	for _, c := range conds {
		var typ, status string
		var gen int64
		if _, err := fmt.Sscanf(strings.NewReplacer("=", " ", "@", " ").Replace(c), "%s %s %d", &typ, &status, &gen); err != nil {
			panic(c)
		}
		p.Conditions = append(p.Conditions, metav1.Condition{Type: typ, Status: metav1.ConditionStatus(status), ObservedGeneration: gen})
	}
	return p
}

var routeAccepted = fmt.Sprintf("Accepted=True@%d", routeGeneration)

// routeHTTP is HTTPRoute web/www, hostname www.example.org, parent gw
// accepted at the current generation, backend Service app.
func routeHTTP() *gatewayv1.HTTPRoute {
	ref := routeParent("gw")
	return &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "www", Generation: routeGeneration, UID: "u-1"},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{ref}},
			Hostnames:       []gatewayv1.Hostname{"www.example.org"},
			Rules: []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{{
				BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{Name: "app", Port: routePtr(gatewayv1.PortNumber(8080))}},
			}}}},
		},
		Status: gatewayv1.HTTPRouteStatus{RouteStatus: gatewayv1.RouteStatus{Parents: []gatewayv1.RouteParentStatus{routeStatus(ref, routeAccepted)}}},
	}
}

// routeBackend is an HTTP backendRef to Service ns/name (ns "" unset).
func routeBackend(ns, name string) gatewayv1.HTTPBackendRef {
	b := gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(name)}}}
	if ns != "" {
		b.Namespace = routePtr(gatewayv1.Namespace(ns))
	}
	return b
}

func routeConfig() *Options {
	return &Options{Zones: []string{"example.org.", "example.net."}}
}

// routeSummary renders what a declared route serves, for comparison:
// hosts ("name" ready, "name(unready)"), addrs, hostnames, gateways, services.
func routeSummary(d *Declared) string {
	if d == nil {
		return "nil"
	}
	var hosts []string
	for _, h := range d.Hosts {
		if h.Ready {
			hosts = append(hosts, h.Name)
		} else {
			hosts = append(hosts, h.Name+"(unready)")
		}
	}
	var addrs []string
	for _, a := range d.Addrs {
		addrs = append(addrs, a.String())
	}
	return fmt.Sprintf("hosts=%s addrs=%s hostnames=%s gateways=%s services=%s",
		strings.Join(hosts, ","), strings.Join(addrs, ","), strings.Join(d.Hostnames, ","),
		strings.Join(d.Gateways, ","), strings.Join(d.Services, ","))
}

// routeStd is the summary of routeHTTP in routeWorld.
const routeStd = "hosts=www.example.org. addrs=192.0.2.10 hostnames= gateways=web/gw services=web/app"

func TestDeriveHTTPRoute(t *testing.T) {
	gwListeners := func(w routeTestWorld, ls ...gatewayv1.Listener) {
		w.gateways["web/gw"].Spec.Listeners = ls
	}
	tests := []struct {
		name  string
		route func(r *gatewayv1.HTTPRoute)
		world func(w routeTestWorld)
		cfg   func(c *Options)
		want  string
	}{
		{name: "accepted", want: routeStd},

		// Acceptance.
		{name: "not accepted", want: "nil", route: func(r *gatewayv1.HTTPRoute) {
			r.Status.Parents[0] = routeStatus(r.Spec.ParentRefs[0], "Accepted=False@3")
		}},
		{name: "no status entry", want: "nil", route: func(r *gatewayv1.HTTPRoute) { r.Status.Parents = nil }},
		{name: "no Accepted condition", want: "nil", route: func(r *gatewayv1.HTTPRoute) {
			r.Status.Parents[0] = routeStatus(r.Spec.ParentRefs[0], "ResolvedRefs=True@3")
		}},
		{name: "accepted at a stale generation", want: "nil", route: func(r *gatewayv1.HTTPRoute) {
			r.Status.Parents[0] = routeStatus(r.Spec.ParentRefs[0], "Accepted=True@2")
		}},
		{name: "accepted at a newer generation than the spec read", want: "nil", route: func(r *gatewayv1.HTTPRoute) { r.Generation = 2 }},
		{name: "status entry for another sectionName", want: "nil", route: func(r *gatewayv1.HTTPRoute) {
			ref := r.Spec.ParentRefs[0]
			ref.SectionName = routePtr(gatewayv1.SectionName("http"))
			r.Status.Parents[0] = routeStatus(ref, routeAccepted)
		}},
		{name: "status entry for another port", want: "nil", route: func(r *gatewayv1.HTTPRoute) {
			ref := r.Spec.ParentRefs[0]
			ref.Port = routePtr(gatewayv1.PortNumber(80))
			r.Status.Parents[0] = routeStatus(ref, routeAccepted)
		}},
		{name: "status entry for a Gateway of the same name in another namespace", want: "nil", route: func(r *gatewayv1.HTTPRoute) {
			ref := r.Spec.ParentRefs[0]
			ref.Namespace = routePtr(gatewayv1.Namespace("infra"))
			r.Status.Parents[0] = routeStatus(ref, routeAccepted)
		}},
		{name: "status entry with the defaults written out", want: routeStd, route: func(r *gatewayv1.HTTPRoute) {
			ref := r.Spec.ParentRefs[0]
			ref.Group = routePtr(gatewayv1.Group(gatewayv1.GroupName))
			ref.Kind = routePtr(gatewayv1.Kind("Gateway"))
			ref.Namespace = routePtr(gatewayv1.Namespace("web"))
			r.Status.Parents[0] = routeStatus(ref, routeAccepted)
		}},
		{name: "parent that is not a Gateway", want: "nil", route: func(r *gatewayv1.HTTPRoute) {
			ref := r.Spec.ParentRefs[0]
			ref.Group, ref.Kind = routePtr(gatewayv1.Group("")), routePtr(gatewayv1.Kind("Service"))
			r.Spec.ParentRefs[0] = ref
			r.Status.Parents[0] = routeStatus(ref, routeAccepted)
		}},
		{name: "missing gateway", want: "nil", world: func(w routeTestWorld) { delete(w.gateways, "web/gw") }},
		{name: "gateway in another namespace", want: "hosts=www.example.org. addrs=192.0.2.20 hostnames= gateways=infra/shared services=web/app",
			route: func(r *gatewayv1.HTTPRoute) {
				ref := routeParent("shared")
				ref.Namespace = routePtr(gatewayv1.Namespace("infra"))
				r.Spec.ParentRefs[0] = ref
				r.Status.Parents[0] = routeStatus(ref, routeAccepted)
			},
			world: func(w routeTestWorld) {
				w.gateways["infra/shared"] = routeGateway("infra", "shared", []gatewayv1.Listener{routeListener("http", 80, gatewayv1.HTTPProtocolType, "", gatewayv1.NamespacesFromAll)}, "192.0.2.20")
			}},

		// gateway_class.
		{name: "gateway of a class served", want: routeStd, cfg: func(c *Options) { c.GatewayClasses = []string{"other", "eg"} }},
		{name: "gateway of another class", want: "nil", cfg: func(c *Options) { c.GatewayClasses = []string{"other"} }},

		// Listener selection.
		{name: "sectionName picks its listener", want: "hosts=b.example.org. addrs=192.0.2.10 hostnames= gateways=web/gw services=web/app",
			route: func(r *gatewayv1.HTTPRoute) {
				r.Spec.Hostnames = nil
				r.Spec.ParentRefs[0].SectionName = routePtr(gatewayv1.SectionName("b"))
				r.Status.Parents[0] = routeStatus(r.Spec.ParentRefs[0], routeAccepted)
			},
			world: func(w routeTestWorld) {
				gwListeners(w, routeListener("a", 80, gatewayv1.HTTPProtocolType, "a.example.org", ""),
					routeListener("b", 80, gatewayv1.HTTPProtocolType, "b.example.org", ""))
			}},
		{name: "port picks its listeners", want: "hosts=b.example.org.,c.example.org. addrs=192.0.2.10 hostnames= gateways=web/gw services=web/app",
			route: func(r *gatewayv1.HTTPRoute) {
				r.Spec.Hostnames = nil
				r.Spec.ParentRefs[0].Port = routePtr(gatewayv1.PortNumber(8080))
				r.Status.Parents[0] = routeStatus(r.Spec.ParentRefs[0], routeAccepted)
			},
			world: func(w routeTestWorld) {
				gwListeners(w, routeListener("a", 80, gatewayv1.HTTPProtocolType, "a.example.org", ""),
					routeListener("b", 8080, gatewayv1.HTTPProtocolType, "b.example.org", ""),
					routeListener("c", 8080, gatewayv1.HTTPProtocolType, "c.example.org", ""))
			}},
		{name: "neither: every listener", want: "hosts=a.example.org.,b.example.org. addrs=192.0.2.10 hostnames= gateways=web/gw services=web/app",
			route: func(r *gatewayv1.HTTPRoute) { r.Spec.Hostnames = nil },
			world: func(w routeTestWorld) {
				gwListeners(w, routeListener("a", 80, gatewayv1.HTTPProtocolType, "a.example.org", ""),
					routeListener("b", 8080, gatewayv1.HTTPProtocolType, "b.example.org", ""))
			}},
		{name: "sectionName and a port it does not have: no listener, no hosts, no targets", want: "hosts= addrs= hostnames= gateways=web/gw services=web/app",
			route: func(r *gatewayv1.HTTPRoute) {
				r.Spec.ParentRefs[0].SectionName = routePtr(gatewayv1.SectionName("a"))
				r.Spec.ParentRefs[0].Port = routePtr(gatewayv1.PortNumber(8080))
				r.Status.Parents[0] = routeStatus(r.Spec.ParentRefs[0], routeAccepted)
			},
			world: func(w routeTestWorld) {
				gwListeners(w, routeListener("a", 80, gatewayv1.HTTPProtocolType, "", ""),
					routeListener("b", 8080, gatewayv1.HTTPProtocolType, "", ""))
			}},
		{name: "sectionName of no listener", want: "hosts= addrs= hostnames= gateways=web/gw services=web/app",
			route: func(r *gatewayv1.HTTPRoute) {
				r.Spec.ParentRefs[0].SectionName = routePtr(gatewayv1.SectionName("nosuch"))
				r.Status.Parents[0] = routeStatus(r.Spec.ParentRefs[0], routeAccepted)
			}},

		// Listener protocol.
		{name: "TLS listener does not take an HTTPRoute", want: "hosts= addrs= hostnames= gateways=web/gw services=web/app",
			world: func(w routeTestWorld) { gwListeners(w, routeListener("tls", 443, gatewayv1.TLSProtocolType, "", "")) }},
		{name: "TCP listener does not take an HTTPRoute", want: "hosts= addrs= hostnames= gateways=web/gw services=web/app",
			world: func(w routeTestWorld) { gwListeners(w, routeListener("tcp", 443, gatewayv1.TCPProtocolType, "", "")) }},
		{name: "HTTPS listener takes an HTTPRoute", want: routeStd,
			world: func(w routeTestWorld) {
				gwListeners(w, routeListener("https", 443, gatewayv1.HTTPSProtocolType, "", ""))
			}},
		{name: "only the listeners of its protocol give hosts", want: "hosts=h.example.org. addrs=192.0.2.10 hostnames= gateways=web/gw services=web/app",
			route: func(r *gatewayv1.HTTPRoute) { r.Spec.Hostnames = nil },
			world: func(w routeTestWorld) {
				gwListeners(w, routeListener("tls", 443, gatewayv1.TLSProtocolType, "t.example.org", ""),
					routeListener("http", 80, gatewayv1.HTTPProtocolType, "h.example.org", ""))
			}},

		// allowedRoutes.
		{name: "allowedRoutes Same (default) refuses another namespace", want: "hosts= addrs= hostnames= gateways=infra/shared services=web/app",
			route: func(r *gatewayv1.HTTPRoute) {
				ref := routeParent("shared")
				ref.Namespace = routePtr(gatewayv1.Namespace("infra"))
				r.Spec.ParentRefs[0] = ref
				r.Status.Parents[0] = routeStatus(ref, routeAccepted)
			},
			world: func(w routeTestWorld) {
				w.gateways["infra/shared"] = routeGateway("infra", "shared", []gatewayv1.Listener{routeListener("http", 80, gatewayv1.HTTPProtocolType, "", "")}, "192.0.2.20")
			}},
		{name: "allowedRoutes Same written out", want: routeStd,
			world: func(w routeTestWorld) {
				gwListeners(w, routeListener("http", 80, gatewayv1.HTTPProtocolType, "", gatewayv1.NamespacesFromSame))
			}},
		{name: "allowedRoutes Selector is taken as admitting", want: "hosts=www.example.org. addrs=192.0.2.20 hostnames= gateways=infra/shared services=web/app",
			route: func(r *gatewayv1.HTTPRoute) {
				ref := routeParent("shared")
				ref.Namespace = routePtr(gatewayv1.Namespace("infra"))
				r.Spec.ParentRefs[0] = ref
				r.Status.Parents[0] = routeStatus(ref, routeAccepted)
			},
			world: func(w routeTestWorld) {
				w.gateways["infra/shared"] = routeGateway("infra", "shared", []gatewayv1.Listener{routeListener("http", 80, gatewayv1.HTTPProtocolType, "", gatewayv1.NamespacesFromSelector)}, "192.0.2.20")
			}},
		{name: "allowedRoutes None", want: "hosts= addrs= hostnames= gateways=web/gw services=web/app",
			world: func(w routeTestWorld) {
				gwListeners(w, routeListener("http", 80, gatewayv1.HTTPProtocolType, "", gatewayv1.NamespacesFromNone))
			}},
		{name: "allowedRoutes kinds without HTTPRoute", want: "hosts= addrs= hostnames= gateways=web/gw services=web/app",
			world: func(w routeTestWorld) {
				l := routeListener("http", 80, gatewayv1.HTTPProtocolType, "", "")
				l.AllowedRoutes = &gatewayv1.AllowedRoutes{Kinds: []gatewayv1.RouteGroupKind{{Kind: "GRPCRoute"}}}
				gwListeners(w, l)
			}},
		{name: "allowedRoutes kinds of another group", want: "hosts= addrs= hostnames= gateways=web/gw services=web/app",
			world: func(w routeTestWorld) {
				l := routeListener("http", 80, gatewayv1.HTTPProtocolType, "", "")
				l.AllowedRoutes = &gatewayv1.AllowedRoutes{Kinds: []gatewayv1.RouteGroupKind{{Group: routePtr(gatewayv1.Group("example.org")), Kind: "HTTPRoute"}}}
				gwListeners(w, l)
			}},
		{name: "allowedRoutes kinds with HTTPRoute", want: routeStd,
			world: func(w routeTestWorld) {
				l := routeListener("http", 80, gatewayv1.HTTPProtocolType, "", "")
				l.AllowedRoutes = &gatewayv1.AllowedRoutes{Kinds: []gatewayv1.RouteGroupKind{{Kind: "GRPCRoute"}, {Group: routePtr(gatewayv1.Group(gatewayv1.GroupName)), Kind: "HTTPRoute"}}}
				gwListeners(w, l)
			}},

		// Zones.
		{name: "hosts outside the zones are ignored silently", want: "hosts=a.example.net.,www.example.org. addrs=192.0.2.10 hostnames= gateways=web/gw services=web/app",
			route: func(r *gatewayv1.HTTPRoute) {
				r.Spec.Hostnames = []gatewayv1.Hostname{"www.example.org", "www.example.com", "a.example.net", "example.org.example.com"}
			}},
		{name: "no host inside the zones", want: "hosts= addrs=192.0.2.10 hostnames= gateways=web/gw services=web/app",
			route: func(r *gatewayv1.HTTPRoute) { r.Spec.Hostnames = []gatewayv1.Hostname{"www.example.com"} }},
		{name: "hosts lower-case, sorted, unique", want: "hosts=*.shop.example.org.,a.example.org.,www.example.org. addrs=192.0.2.10 hostnames= gateways=web/gw services=web/app",
			route: func(r *gatewayv1.HTTPRoute) {
				r.Spec.Hostnames = []gatewayv1.Hostname{"WWW.Example.org", "*.shop.example.org", "a.example.org", "www.example.org"}
			}},

		// Health.
		{name: "backend not ready", want: "hosts=www.example.org.(unready) addrs=192.0.2.10 hostnames= gateways=web/gw services=web/app",
			world: func(w routeTestWorld) { clear(w.readyServices) }},
		{name: "some backend ready", want: "hosts=www.example.org.,x.example.org. addrs=192.0.2.10 hostnames= gateways=web/gw services=web/app,web/down,web/down2",
			route: func(r *gatewayv1.HTTPRoute) {
				r.Spec.Hostnames = append(r.Spec.Hostnames, "x.example.org")
				r.Spec.Rules = []gatewayv1.HTTPRouteRule{
					{BackendRefs: []gatewayv1.HTTPBackendRef{routeBackend("", "down")}},
					{BackendRefs: []gatewayv1.HTTPBackendRef{routeBackend("", "down2"), routeBackend("web", "app")}},
				}
			}},
		{name: "no backendRefs", want: "hosts=www.example.org.(unready) addrs=192.0.2.10 hostnames= gateways=web/gw services=",
			route: func(r *gatewayv1.HTTPRoute) { r.Spec.Rules = []gatewayv1.HTTPRouteRule{{}} }},
		{name: "a backend that is not a Service", want: "hosts=www.example.org.(unready) addrs=192.0.2.10 hostnames= gateways=web/gw services=",
			route: func(r *gatewayv1.HTTPRoute) {
				b := routeBackend("", "app")
				b.Group, b.Kind = routePtr(gatewayv1.Group("example.org")), routePtr(gatewayv1.Kind("Bucket"))
				r.Spec.Rules[0].BackendRefs = []gatewayv1.HTTPBackendRef{b}
			}},
		{name: "a Service of kind written out", want: routeStd,
			route: func(r *gatewayv1.HTTPRoute) {
				b := routeBackend("", "app")
				b.Group, b.Kind = routePtr(gatewayv1.Group("")), routePtr(gatewayv1.Kind("Service"))
				r.Spec.Rules[0].BackendRefs = []gatewayv1.HTTPBackendRef{b}
			}},
		{name: "a ready backend of weight 0 takes no traffic", want: "hosts=www.example.org.(unready) addrs=192.0.2.10 hostnames= gateways=web/gw services=web/app",
			route: func(r *gatewayv1.HTTPRoute) { r.Spec.Rules[0].BackendRefs[0].Weight = routePtr(int32(0)) }},
		{name: "cross-namespace backend without ResolvedRefs", want: "hosts=www.example.org.(unready) addrs=192.0.2.10 hostnames= gateways=web/gw services=data/api",
			route: func(r *gatewayv1.HTTPRoute) {
				r.Spec.Rules[0].BackendRefs = []gatewayv1.HTTPBackendRef{routeBackend("data", "api")}
			},
			world: func(w routeTestWorld) { w.readyServices["data/api"] = true }},
		{name: "cross-namespace backend with ResolvedRefs False", want: "hosts=www.example.org.(unready) addrs=192.0.2.10 hostnames= gateways=web/gw services=data/api",
			route: func(r *gatewayv1.HTTPRoute) {
				r.Spec.Rules[0].BackendRefs = []gatewayv1.HTTPBackendRef{routeBackend("data", "api")}
				r.Status.Parents[0] = routeStatus(r.Spec.ParentRefs[0], routeAccepted, "ResolvedRefs=False@3")
			},
			world: func(w routeTestWorld) { w.readyServices["data/api"] = true }},
		{name: "cross-namespace backend with a stale ResolvedRefs", want: "hosts=www.example.org.(unready) addrs=192.0.2.10 hostnames= gateways=web/gw services=data/api",
			route: func(r *gatewayv1.HTTPRoute) {
				r.Spec.Rules[0].BackendRefs = []gatewayv1.HTTPBackendRef{routeBackend("data", "api")}
				r.Status.Parents[0] = routeStatus(r.Spec.ParentRefs[0], routeAccepted, "ResolvedRefs=True@2")
			},
			world: func(w routeTestWorld) { w.readyServices["data/api"] = true }},
		{name: "cross-namespace backend with ResolvedRefs", want: "hosts=www.example.org. addrs=192.0.2.10 hostnames= gateways=web/gw services=data/api",
			route: func(r *gatewayv1.HTTPRoute) {
				r.Spec.Rules[0].BackendRefs = []gatewayv1.HTTPBackendRef{routeBackend("data", "api")}
				r.Status.Parents[0] = routeStatus(r.Spec.ParentRefs[0], routeAccepted, "ResolvedRefs=True@3")
			},
			world: func(w routeTestWorld) { w.readyServices["data/api"] = true }},
		{name: "ResolvedRefs of a parent that does not count", want: "hosts=www.example.org.(unready) addrs=192.0.2.10 hostnames= gateways=web/gw,web/other services=data/api",
			route: func(r *gatewayv1.HTTPRoute) {
				other := routeParent("other")
				r.Spec.ParentRefs = append(r.Spec.ParentRefs, other)
				r.Status.Parents = append(r.Status.Parents, routeStatus(other, routeAccepted, "ResolvedRefs=True@3"))
				r.Spec.Rules[0].BackendRefs = []gatewayv1.HTTPBackendRef{routeBackend("data", "api")}
			},
			world: func(w routeTestWorld) { w.readyServices["data/api"] = true }}, // web/other is missing
		{name: "the route's own namespace written out", want: routeStd,
			route: func(r *gatewayv1.HTTPRoute) {
				r.Spec.Rules[0].BackendRefs = []gatewayv1.HTTPBackendRef{routeBackend("web", "app")}
			}},

		// Targets.
		{name: "addresses of every type", want: "hosts=www.example.org. addrs=192.0.2.10,192.0.2.11,2001:db8::1 hostnames=lb.example.com. gateways=web/gw services=web/app",
			world: func(w routeTestWorld) {
				w.gateways["web/gw"] = routeGateway("web", "gw", w.gateways["web/gw"].Spec.Listeners,
					"IPAddress=192.0.2.11", "192.0.2.10", "IPAddress=2001:db8::1", "Hostname=LB.example.com", "NamedAddress=pool-a", "192.0.2.10", "IPAddress=::ffff:192.0.2.11")
			}},
		{name: "no status addresses yet", want: "hosts=www.example.org. addrs= hostnames= gateways=web/gw services=web/app",
			world: func(w routeTestWorld) { w.gateways["web/gw"].Status.Addresses = nil }},
		{name: "two parents: targets merged", want: "hosts=www.example.org. addrs=192.0.2.10,192.0.2.20 hostnames= gateways=infra/shared,web/gw services=web/app",
			route: func(r *gatewayv1.HTTPRoute) {
				ref := routeParent("shared")
				ref.Namespace = routePtr(gatewayv1.Namespace("infra"))
				r.Spec.ParentRefs = append(r.Spec.ParentRefs, ref, routeParent("gw"))
				r.Status.Parents = append(r.Status.Parents, routeStatus(ref, routeAccepted))
			},
			world: func(w routeTestWorld) {
				w.gateways["infra/shared"] = routeGateway("infra", "shared", []gatewayv1.Listener{routeListener("http", 80, gatewayv1.HTTPProtocolType, "", gatewayv1.NamespacesFromAll)}, "192.0.2.20", "192.0.2.10")
			}},
		{name: "two parents, one not accepted: its targets are not served", want: routeStd,
			route: func(r *gatewayv1.HTTPRoute) {
				ref := routeParent("other")
				r.Spec.ParentRefs = append(r.Spec.ParentRefs, ref)
				r.Status.Parents = append(r.Status.Parents, routeStatus(ref, "Accepted=False@3"))
			},
			world: func(w routeTestWorld) {
				w.gateways["web/other"] = routeGateway("web", "other", w.gateways["web/gw"].Spec.Listeners, "192.0.2.30")
			}},
		{name: "two parents, one of another class: read, not served", want: "hosts=www.example.org. addrs=192.0.2.10 hostnames= gateways=web/gw,web/other services=web/app",
			cfg: func(c *Options) { c.GatewayClasses = []string{"eg"} },
			route: func(r *gatewayv1.HTTPRoute) {
				ref := routeParent("other")
				r.Spec.ParentRefs = append(r.Spec.ParentRefs, ref)
				r.Status.Parents = append(r.Status.Parents, routeStatus(ref, routeAccepted))
			},
			world: func(w routeTestWorld) {
				gw := routeGateway("web", "other", w.gateways["web/gw"].Spec.Listeners, "192.0.2.30")
				gw.Spec.GatewayClassName = "istio"
				w.gateways["web/other"] = gw
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, w, cfg := routeHTTP(), routeWorld(), routeConfig()
			if tc.route != nil {
				tc.route(r)
			}
			if tc.world != nil {
				tc.world(w)
			}
			if tc.cfg != nil {
				tc.cfg(cfg)
			}
			d := deriveHTTPRoute(r, cfg, w)
			if got := routeSummary(d); got != tc.want {
				t.Errorf("derived\n %s\nwant\n %s", got, tc.want)
			}
			if d != nil && len(d.Bad) > 0 {
				t.Errorf("bad %q, want none", d.Bad)
			}
		})
	}
}

func TestDeriveRouteHostnameIntersection(t *testing.T) {
	tests := []struct {
		listener string // "" none
		route    []gatewayv1.Hostname
		want     string
	}{
		{"", []gatewayv1.Hostname{"www.example.org", "api.example.org"}, "api.example.org.,www.example.org."},
		{"www.example.org", nil, "www.example.org."},
		{"*.example.org", nil, "*.example.org."},
		{"", nil, ""},
		{"www.example.org", []gatewayv1.Hostname{"www.example.org"}, "www.example.org."},
		{"www.example.org", []gatewayv1.Hostname{"api.example.org"}, ""},
		{"WWW.example.org.", []gatewayv1.Hostname{"www.EXAMPLE.org"}, "www.example.org."},
		// A wildcard listener keeps the route's more specific names.
		{"*.example.org", []gatewayv1.Hostname{"www.example.org", "a.b.example.org", "example.org", "www.example.net", "wwwexample.org"}, "a.b.example.org.,www.example.org."},
		// A wildcard route takes the listener's name below it.
		{"www.example.org", []gatewayv1.Hostname{"*.example.org"}, "www.example.org."},
		{"a.b.example.org", []gatewayv1.Hostname{"*.example.org"}, "a.b.example.org."},
		{"example.org", []gatewayv1.Hostname{"*.example.org"}, ""},
		{"*.example.org", []gatewayv1.Hostname{".example.org"}, ""}, // malformed (a directory file has no CRD validation)
		{"www.example.net", []gatewayv1.Hostname{"*.example.org"}, ""},
		// Two wildcards: the longer, either way round.
		{"*.example.org", []gatewayv1.Hostname{"*.shop.example.org"}, "*.shop.example.org."},
		{"*.shop.example.org", []gatewayv1.Hostname{"*.example.org"}, "*.shop.example.org."},
		{"*.example.org", []gatewayv1.Hostname{"*.example.org"}, "*.example.org."},
		{"*.example.org", []gatewayv1.Hostname{"*.example.net"}, ""},
		{"*.example.org", []gatewayv1.Hostname{"*.wexample.org"}, ""},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/%v", tc.listener, tc.route), func(t *testing.T) {
			r, w := routeHTTP(), routeWorld()
			r.Spec.Hostnames = tc.route
			l := routeListener("http", 80, gatewayv1.HTTPProtocolType, tc.listener, "")
			w.gateways["web/gw"].Spec.Listeners = []gatewayv1.Listener{l}
			d := deriveHTTPRoute(r, routeConfig(), w)
			if d == nil {
				t.Fatal("declared nothing")
			}
			var got []string
			for _, h := range d.Hosts {
				got = append(got, h.Name)
			}
			if g := strings.Join(got, ","); g != tc.want {
				t.Errorf("listener %q, route %q: hosts %q, want %q", tc.listener, tc.route, g, tc.want)
			}
		})
	}
}

func TestDeriveRouteBadAddresses(t *testing.T) {
	r, w := routeHTTP(), routeWorld()
	w.gateways["web/gw"] = routeGateway("web", "gw", w.gateways["web/gw"].Spec.Listeners,
		"192.0.2.10", "IPAddress=lb.example.com", "192.0.2.300", "IPAddress=fe80::1%eth0", "Hostname=bad..name")
	d := deriveHTTPRoute(r, routeConfig(), w)
	if got := routeSummary(d); got != routeStd {
		t.Errorf("derived %s, want %s", got, routeStd)
	}
	for _, want := range []string{`"lb.example.com" is not an IP address`, `"192.0.2.300" is not an IP address`, `"fe80::1%eth0" is not an IP address`, `"bad..name" is not a domain name`} {
		if !slices.ContainsFunc(d.Bad, func(b string) bool { return strings.Contains(b, want) && strings.Contains(b, "gateway web/gw") }) {
			t.Errorf("bad %q lacks %q", d.Bad, want)
		}
	}
	if len(d.Bad) != 4 {
		t.Errorf("bad %q, want 4 entries", d.Bad)
	}
}

func TestDeriveRouteMetadata(t *testing.T) {
	r, w := routeHTTP(), routeWorld()
	created := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	r.CreationTimestamp = metav1.NewTime(created)
	r.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: "kubectl", Time: routePtr(metav1.NewTime(created.Add(time.Hour)))},
		{Manager: "controller", Time: routePtr(metav1.NewTime(created.Add(2 * time.Hour)))},
		{Manager: "other"},
	}
	r.Labels = map[string]string{"team": "shop"}
	r.Annotations = map[string]string{
		object.AnnotationTTL:                "120",
		object.GslbAnnotations + "strategy": "failover",
		object.GslbAnnotations + "primary":  "eu",
		"example.org/unrelated":             "x",
	}
	d := deriveHTTPRoute(r, routeConfig(), w)
	if d == nil {
		t.Fatal("declared nothing")
	}
	if d.Kind != object.KindHTTPRoute || d.Namespace != "web" || d.Name != "www" || d.UID != "u-1" {
		t.Errorf("kind/namespace/name/uid %s/%s/%s/%s", d.Kind, d.Namespace, d.Name, d.UID)
	}
	if !d.Created.Equal(created) || !d.Changed.Equal(created.Add(2*time.Hour)) {
		t.Errorf("created %v changed %v, want %v and %v", d.Created, d.Changed, created, created.Add(2*time.Hour))
	}
	if d.labels["team"] != "shop" {
		t.Errorf("labels %v", d.labels)
	}
	if !d.ttlSet || d.ttl != 120 {
		t.Errorf("ttl %d set %v, want 120", d.ttl, d.ttlSet)
	}
	wantProps := endpoint.ProviderSpecific{{Name: "gslb/primary", Value: "eu"}, {Name: "gslb/strategy", Value: "failover"}}
	if !slices.Equal(d.props, wantProps) {
		t.Errorf("props %v, want %v", d.props, wantProps)
	}
	if len(d.Bad) != 0 {
		t.Errorf("bad %q", d.Bad)
	}

	// Without managedFields the change time is the creation time; a TTL
	// out of range is reported and the default used.
	r.ManagedFields = nil
	r.Annotations = map[string]string{object.AnnotationTTL: "soon"}
	d = deriveHTTPRoute(r, routeConfig(), w)
	if !d.Changed.Equal(created) {
		t.Errorf("changed %v, want the creation time %v", d.Changed, created)
	}
	if d.ttlSet || len(d.Bad) != 1 || !strings.Contains(d.Bad[0], object.AnnotationTTL) {
		t.Errorf("ttl set %v, bad %q: want the default and one complaint", d.ttlSet, d.Bad)
	}
	if len(d.props) != 0 {
		t.Errorf("props %v, want none", d.props)
	}
}

// routeGRPC is GRPCRoute web/rpc like routeHTTP.
func routeGRPC() *gatewayv1.GRPCRoute {
	h := routeHTTP()
	return &gatewayv1.GRPCRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "rpc", Generation: routeGeneration},
		Spec: gatewayv1.GRPCRouteSpec{
			CommonRouteSpec: h.Spec.CommonRouteSpec,
			Hostnames:       []gatewayv1.Hostname{"rpc.example.org"},
			Rules: []gatewayv1.GRPCRouteRule{{BackendRefs: []gatewayv1.GRPCBackendRef{{
				BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{Name: "app"}},
			}}}},
		},
		Status: gatewayv1.GRPCRouteStatus{RouteStatus: h.Status.RouteStatus},
	}
}

// routeTLS is TLSRoute web/tls like routeHTTP.
func routeTLS() *gatewayv1.TLSRoute {
	h := routeHTTP()
	return &gatewayv1.TLSRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "tls", Generation: routeGeneration},
		Spec: gatewayv1.TLSRouteSpec{
			CommonRouteSpec: h.Spec.CommonRouteSpec,
			Hostnames:       []gatewayv1.Hostname{"db.example.org"},
			Rules: []gatewayv1.TLSRouteRule{{BackendRefs: []gatewayv1.BackendRef{
				{BackendObjectReference: gatewayv1.BackendObjectReference{Name: "app"}},
			}}},
		},
		Status: gatewayv1.TLSRouteStatus{RouteStatus: h.Status.RouteStatus},
	}
}

func TestDeriveGRPCRoute(t *testing.T) {
	tests := []struct {
		name     string
		protocol gatewayv1.ProtocolType
		kinds    []gatewayv1.RouteGroupKind
		route    func(r *gatewayv1.GRPCRoute)
		want     string
	}{
		{name: "on an HTTP listener", protocol: gatewayv1.HTTPProtocolType,
			want: "hosts=rpc.example.org. addrs=192.0.2.10 hostnames= gateways=web/gw services=web/app"},
		{name: "on an HTTPS listener", protocol: gatewayv1.HTTPSProtocolType,
			want: "hosts=rpc.example.org. addrs=192.0.2.10 hostnames= gateways=web/gw services=web/app"},
		{name: "not on a TLS listener", protocol: gatewayv1.TLSProtocolType,
			want: "hosts= addrs= hostnames= gateways=web/gw services=web/app"},
		{name: "allowedRoutes kinds HTTPRoute only", protocol: gatewayv1.HTTPProtocolType, kinds: []gatewayv1.RouteGroupKind{{Kind: "HTTPRoute"}},
			want: "hosts= addrs= hostnames= gateways=web/gw services=web/app"},
		{name: "allowedRoutes kinds GRPCRoute", protocol: gatewayv1.HTTPProtocolType, kinds: []gatewayv1.RouteGroupKind{{Kind: "GRPCRoute"}},
			want: "hosts=rpc.example.org. addrs=192.0.2.10 hostnames= gateways=web/gw services=web/app"},
		{name: "stale acceptance", protocol: gatewayv1.HTTPProtocolType, want: "nil",
			route: func(r *gatewayv1.GRPCRoute) { r.Generation = routeGeneration + 1 }},
		{name: "cross-namespace backend with ResolvedRefs", protocol: gatewayv1.HTTPProtocolType,
			route: func(r *gatewayv1.GRPCRoute) {
				r.Spec.Rules[0].BackendRefs[0].Namespace = routePtr(gatewayv1.Namespace("data"))
				r.Status.Parents[0] = routeStatus(r.Spec.ParentRefs[0], routeAccepted, "ResolvedRefs=True@3")
			},
			want: "hosts=rpc.example.org. addrs=192.0.2.10 hostnames= gateways=web/gw services=data/app"},
		{name: "cross-namespace backend without ResolvedRefs", protocol: gatewayv1.HTTPProtocolType,
			route: func(r *gatewayv1.GRPCRoute) {
				r.Spec.Rules[0].BackendRefs[0].Namespace = routePtr(gatewayv1.Namespace("data"))
			},
			want: "hosts=rpc.example.org.(unready) addrs=192.0.2.10 hostnames= gateways=web/gw services=data/app"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, w := routeGRPC(), routeWorld()
			w.readyServices["data/app"] = true
			l := routeListener("l", 443, tc.protocol, "", "")
			if tc.kinds != nil {
				l.AllowedRoutes = &gatewayv1.AllowedRoutes{Kinds: tc.kinds}
			}
			w.gateways["web/gw"].Spec.Listeners = []gatewayv1.Listener{l}
			if tc.route != nil {
				tc.route(r)
			}
			d := deriveGRPCRoute(r, routeConfig(), w)
			if got := routeSummary(d); got != tc.want {
				t.Errorf("derived\n %s\nwant\n %s", got, tc.want)
			}
			if d != nil && d.Kind != object.KindGRPCRoute {
				t.Errorf("kind %q", d.Kind)
			}
		})
	}
}

func TestDeriveTLSRoute(t *testing.T) {
	tests := []struct {
		name     string
		protocol gatewayv1.ProtocolType
		hostname string
		route    func(r *gatewayv1.TLSRoute)
		world    func(w routeTestWorld)
		want     string
	}{
		{name: "on a TLS listener", protocol: gatewayv1.TLSProtocolType,
			want: "hosts=db.example.org. addrs=192.0.2.10 hostnames= gateways=web/gw services=web/app"},
		{name: "not on an HTTPS listener", protocol: gatewayv1.HTTPSProtocolType,
			want: "hosts= addrs= hostnames= gateways=web/gw services=web/app"},
		{name: "not on an HTTP listener", protocol: gatewayv1.HTTPProtocolType,
			want: "hosts= addrs= hostnames= gateways=web/gw services=web/app"},
		{name: "wildcard listener", protocol: gatewayv1.TLSProtocolType, hostname: "*.example.org",
			want: "hosts=db.example.org. addrs=192.0.2.10 hostnames= gateways=web/gw services=web/app"},
		{name: "listener of another name", protocol: gatewayv1.TLSProtocolType, hostname: "mq.example.org",
			want: "hosts= addrs=192.0.2.10 hostnames= gateways=web/gw services=web/app"},
		{name: "backend not ready", protocol: gatewayv1.TLSProtocolType,
			world: func(w routeTestWorld) { clear(w.readyServices) },
			want:  "hosts=db.example.org.(unready) addrs=192.0.2.10 hostnames= gateways=web/gw services=web/app"},
		{name: "not accepted", protocol: gatewayv1.TLSProtocolType, want: "nil",
			route: func(r *gatewayv1.TLSRoute) {
				r.Status.Parents[0] = routeStatus(r.Spec.ParentRefs[0], "Accepted=False@3")
			}},
		{name: "status hostname", protocol: gatewayv1.TLSProtocolType,
			world: func(w routeTestWorld) {
				w.gateways["web/gw"].Status.Addresses = []gatewayv1.GatewayStatusAddress{{Type: routePtr(gatewayv1.HostnameAddressType), Value: "nlb-1.elb.example.com."}}
			},
			want: "hosts=db.example.org. addrs= hostnames=nlb-1.elb.example.com. gateways=web/gw services=web/app"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, w := routeTLS(), routeWorld()
			w.gateways["web/gw"].Spec.Listeners = []gatewayv1.Listener{routeListener("l", 443, tc.protocol, tc.hostname, "")}
			if tc.route != nil {
				tc.route(r)
			}
			if tc.world != nil {
				tc.world(w)
			}
			d := deriveTLSRoute(r, routeConfig(), w)
			if got := routeSummary(d); got != tc.want {
				t.Errorf("derived\n %s\nwant\n %s", got, tc.want)
			}
			if d != nil && d.Kind != object.KindTLSRoute {
				t.Errorf("kind %q", d.Kind)
			}
		})
	}
}

// TestDeriveRouteObject checks what a derived route serves through the
// contract's object: an A endpoint with the Gateway's addresses at each host.
func TestDeriveRouteObject(t *testing.T) {
	r, w := routeHTTP(), routeWorld()
	r.Spec.Hostnames = []gatewayv1.Hostname{"www.example.org", "*.shop.example.org"}
	w.gateways["web/gw"].Status.Addresses = append(w.gateways["web/gw"].Status.Addresses, gatewayv1.GatewayStatusAddress{Value: "2001:db8::10"})
	cfg := routeConfig()
	d := deriveHTTPRoute(r, cfg, w)
	o, bad := d.Object(nil, cfg.Zones, 30)
	if len(bad) != 0 {
		t.Fatalf("invalid %v", bad)
	}
	if o.Key != SourceKey(object.KindHTTPRoute, "web", "www") || o.Kind != object.KindHTTPRoute {
		t.Errorf("key %q kind %q", o.Key, o.Kind)
	}
	for _, name := range []string{"www.example.org.", "*.shop.example.org."} {
		var got []string
		for _, e := range o.At(name) {
			got = append(got, fmt.Sprintf("%s %v unready=%v", dns.TypeToString[e.Type], e.Addrs, e.Extra != nil && e.Extra.Unready))
		}
		want := []string{"A [192.0.2.10] unready=false", "AAAA [2001:db8::10] unready=false"}
		if !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}

	// Backends down: the same declaration, its endpoints marked unready.
	clear(w.readyServices)
	o, _ = deriveHTTPRoute(r, cfg, w).Object(nil, cfg.Zones, 30)
	eps := o.At("www.example.org.")
	if len(eps) != 2 {
		t.Fatalf("backends down: %d endpoints at www.example.org., want the same 2 (A and AAAA)", len(eps))
	}
	for _, e := range eps {
		if e.Extra == nil || !e.Extra.Unready {
			t.Errorf("%s %s: not marked unready", e.Name, dns.TypeToString[e.Type])
		}
	}
}

// TestRouteTargetsPerAdmittingListener: a route attached to two Gateways
// whose listeners each admit one of its hosts serves at each host the
// addresses of the Gateway that admitted it, not both Gateways'.
func TestRouteTargetsPerAdmittingListener(t *testing.T) {
	w := routeTestWorld{
		gateways: map[string]*gatewayv1.Gateway{
			"web/gw-a": routeGateway("web", "gw-a", []gatewayv1.Listener{routeListener("http", 80, gatewayv1.HTTPProtocolType, "a.example.org", "")}, "192.0.2.10", "2001:db8::10"),
			"web/gw-b": routeGateway("web", "gw-b", []gatewayv1.Listener{routeListener("http", 80, gatewayv1.HTTPProtocolType, "b.example.org", "")}, "192.0.2.20"),
		},
		readyServices: map[string]bool{"web/app": true},
	}
	r := routeHTTP()
	a, b := routeParent("gw-a"), routeParent("gw-b")
	r.Spec.ParentRefs = []gatewayv1.ParentReference{a, b}
	r.Status.Parents = []gatewayv1.RouteParentStatus{routeStatus(a, routeAccepted), routeStatus(b, routeAccepted)}
	r.Spec.Hostnames = []gatewayv1.Hostname{"a.example.org", "b.example.org"}
	cfg := routeConfig()
	o, bad := deriveHTTPRoute(r, cfg, w).Object(nil, cfg.Zones, 30)
	if len(bad) != 0 {
		t.Fatalf("invalid %v", bad)
	}
	for name, want := range map[string][]string{
		"a.example.org.": {"A [192.0.2.10]", "AAAA [2001:db8::10]"},
		"b.example.org.": {"A [192.0.2.20]"},
	} {
		var got []string
		for _, e := range o.At(name) {
			got = append(got, fmt.Sprintf("%s %v", dns.TypeToString[e.Type], e.Addrs))
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}
