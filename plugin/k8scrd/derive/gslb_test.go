package derive

import (
	"strings"
	"testing"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// gslbTestWorld is a world of referenced objects ("Kind/ns/name"), ready
// Services ("ns/name") and Gateways.
type gslbTestWorld struct {
	objs     map[string]any
	readySvc map[string]bool
	gateways map[string]*gatewayv1.Gateway
}

func (w *gslbTestWorld) Ready(ns, name string) bool  { return w.readySvc[ns+"/"+name] }
func (w *gslbTestWorld) DefaultIngressClass() string { return "" }
func (w *gslbTestWorld) Gateway(ns, name string) *gatewayv1.Gateway {
	return w.gateways[ns+"/"+name]
}
func (w *gslbTestWorld) Object(kind, ns, name string) any { return w.objs[kind+"/"+ns+"/"+name] }
func (w *gslbTestWorld) Objects(kind, ns string) []any {
	var out []any
	for k, o := range w.objs {
		if strings.HasPrefix(k, kind+"/"+ns+"/") {
			out = append(out, o)
		}
	}
	return out
}

// gslbWorldOf is a world with Ingress web/shop (hosts shop.example.org,
// backends app and api; www.elsewhere.test outside the zones; status
// 198.51.100.1), LoadBalancer Service web/lb (198.51.100.7, no hostname
// annotation), and the route world's Gateway web/gw with a TCP listener.
// Services web/app and web/lb are ready, web/api is not.
func gslbWorldOf() *gslbTestWorld {
	ing := lbIngressOf(networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{
		ingRule("shop.example.org", ingSvcBackend("app"), ingSvcBackend("api")),
		ingRule("www.elsewhere.test", ingSvcBackend("app")),
	}}, lbIngress("ip:198.51.100.1"), nil)
	ing.Labels = map[string]string{"app": "shop"}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "lb", Labels: map[string]string{"app": "lb"}},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer},
		Status:     corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "198.51.100.7"}}}},
	}
	gw := routeGateway("web", "gw", []gatewayv1.Listener{
		routeListener("http", 80, gatewayv1.HTTPProtocolType, "", ""),
		routeListener("tcp", 5432, gatewayv1.TCPProtocolType, "", ""),
	}, "198.51.100.20")
	return &gslbTestWorld{
		objs: map[string]any{
			"Ingress/web/shop": ing, "Service/web/lb": svc, "HTTPRoute/web/www": routeHTTP(),
			"TCPRoute/web/db": routeTCP(),
		},
		readySvc: map[string]bool{"web/app": true, "web/lb": true},
		gateways: map[string]*gatewayv1.Gateway{"web/gw": gw},
	}
}

func routeTCP() *gatewayv1.TCPRoute {
	ref := routeParent("gw")
	return &gatewayv1.TCPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "db", Generation: routeGeneration},
		Spec: gatewayv1.TCPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{ref}},
			Rules: []gatewayv1.TCPRouteRule{{BackendRefs: []gatewayv1.BackendRef{{
				BackendObjectReference: gatewayv1.BackendObjectReference{Name: "app", Port: routePtr(gatewayv1.PortNumber(5432))},
			}}}},
		},
		Status: gatewayv1.TCPRouteStatus{RouteStatus: gatewayv1.RouteStatus{Parents: []gatewayv1.RouteParentStatus{routeStatus(ref, routeAccepted)}}},
	}
}

// gslbOf is Gslb web/shop (uid g-1) with the spec given.
func gslbOf(spec object.GslbSpec, annotations, lbls map[string]string) *object.GslbObject {
	return &object.GslbObject{
		ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "shop", UID: "g-1", Annotations: annotations, Labels: lbls},
		Spec:       spec,
	}
}

func refTo(kind, name string) object.GslbResourceRef {
	api := map[string]string{object.KindIngress: "networking.k8s.io/v1", object.KindService: "v1", object.KindTCPRoute: "gateway.networking.k8s.io/v1alpha2"}[kind]
	if api == "" {
		api = "gateway.networking.k8s.io/v1"
	}
	return object.GslbResourceRef{APIVersion: api, Kind: kind, Name: name}
}

func TestGslbDerivation(t *testing.T) {
	rr := object.GslbStrategy{Type: "roundRobin"}
	embedded := object.GslbIngressSpec{Rules: []networkingv1.IngressRule{ingRule("shop.example.org", ingSvcBackend("app")), ingRule("other.example.org")}}
	tests := []struct {
		name  string
		kind  string
		g     *object.GslbObject
		world func(*gslbTestWorld)
		cfg   func(*Options)
		want  *lbView
		note  string // a substring of the note; "" none
		uses  []string
	}{
		{
			name: "ingress by name, round robin: the Ingress's hosts in the zones and its targets, ready as any Service is",
			g:    gslbOf(object.GslbSpec{ResourceRef: refTo(object.KindIngress, "shop"), Strategy: rr}, nil, nil),
			want: &lbView{Hosts: []string{"shop.example.org."}, Addrs: []string{"198.51.100.1"}, Services: []string{"web/api", "web/app"},
				Props: []string{"gslb/strategy=roundRobin"}},
			uses: []string{"ref:Ingress:web/shop"},
		},
		{
			name: "class filters do not apply to the Ingress a Gslb names",
			g:    gslbOf(object.GslbSpec{ResourceRef: refTo(object.KindIngress, "shop"), Strategy: rr}, nil, nil),
			cfg:  func(c *Options) { c.IngressClasses = []string{"internal"} },
			want: &lbView{Hosts: []string{"shop.example.org."}, Addrs: []string{"198.51.100.1"}, Services: []string{"web/api", "web/app"},
				Props: []string{"gslb/strategy=roundRobin"}},
		},
		{
			name: "failover: primary and TTL",
			g:    gslbOf(object.GslbSpec{ResourceRef: refTo(object.KindIngress, "shop"), Strategy: object.GslbStrategy{Type: "failover", PrimaryGeoTag: "eu", DNSTtlSeconds: 30}}, nil, nil),
			want: &lbView{Hosts: []string{"shop.example.org."}, Addrs: []string{"198.51.100.1"}, Services: []string{"web/api", "web/app"},
				Props: []string{"gslb/primary=eu", "gslb/strategy=failover", "gslb/ttl=30"}, TTL: "30"},
		},
		{
			name: "round robin with weights is weighted",
			g:    gslbOf(object.GslbSpec{ResourceRef: refTo(object.KindIngress, "shop"), Strategy: object.GslbStrategy{Type: "roundRobin", Weight: map[string]int{"us": 20, "eu": 80}}}, nil, nil),
			want: &lbView{Hosts: []string{"shop.example.org."}, Addrs: []string{"198.51.100.1"}, Services: []string{"web/api", "web/app"},
				Props: []string{"gslb/strategy=weighted", "gslb/weight=eu=80,us=20"}},
		},
		{
			name: "geoip, and a gslb.fleetdns.io annotation overrides the spec",
			g: gslbOf(object.GslbSpec{ResourceRef: refTo(object.KindIngress, "shop"), Strategy: object.GslbStrategy{Type: "geoip", DNSTtlSeconds: 10}},
				map[string]string{"gslb.fleetdns.io/ttl": "5", "gslb.fleetdns.io/all-down": "all"}, nil),
			want: &lbView{Hosts: []string{"shop.example.org."}, Addrs: []string{"198.51.100.1"}, Services: []string{"web/api", "web/app"},
				Props: []string{"gslb/all-down=all", "gslb/strategy=geoip", "gslb/ttl=5"}, TTL: "10"},
		},
		{
			name: "serviceHealthPolicy All: one unready Service makes the host unready",
			g:    gslbOf(object.GslbSpec{ResourceRef: refTo(object.KindIngress, "shop"), Strategy: rr, ServiceHealthPolicy: "All"}, nil, nil),
			want: &lbView{Hosts: []string{"shop.example.org. unready"}, Addrs: []string{"198.51.100.1"}, Services: []string{"web/api", "web/app"},
				Props: []string{"gslb/strategy=roundRobin"}},
		},
		{
			name:  "serviceHealthPolicy All: every Service ready",
			g:     gslbOf(object.GslbSpec{ResourceRef: refTo(object.KindIngress, "shop"), Strategy: rr, ServiceHealthPolicy: "All"}, nil, nil),
			world: func(w *gslbTestWorld) { w.readySvc["web/api"] = true },
			want: &lbView{Hosts: []string{"shop.example.org."}, Addrs: []string{"198.51.100.1"}, Services: []string{"web/api", "web/app"},
				Props: []string{"gslb/strategy=roundRobin"}},
		},
		{
			name:  "serviceHealthPolicy Any: no Service ready",
			g:     gslbOf(object.GslbSpec{ResourceRef: refTo(object.KindIngress, "shop"), Strategy: rr}, nil, nil),
			world: func(w *gslbTestWorld) { w.readySvc["web/app"] = false },
			want: &lbView{Hosts: []string{"shop.example.org. unready"}, Addrs: []string{"198.51.100.1"}, Services: []string{"web/api", "web/app"},
				Props: []string{"gslb/strategy=roundRobin"}},
		},
		{
			name: "by label selector, exactly one match",
			g:    gslbOf(object.GslbSpec{ResourceRef: object.GslbResourceRef{APIVersion: "networking.k8s.io/v1", Kind: object.KindIngress, MatchLabels: map[string]string{"app": "shop"}}, Strategy: rr}, nil, nil),
			want: &lbView{Hosts: []string{"shop.example.org."}, Addrs: []string{"198.51.100.1"}, Services: []string{"web/api", "web/app"},
				Props: []string{"gslb/strategy=roundRobin"}},
			uses: []string{"refns:Ingress:web"},
		},
		{
			name: "by label selector, two matches: nothing, as k8gb",
			g:    gslbOf(object.GslbSpec{ResourceRef: object.GslbResourceRef{Kind: object.KindIngress, MatchLabels: map[string]string{"app": "shop"}}, Strategy: rr}, nil, nil),
			world: func(w *gslbTestWorld) {
				i := *w.objs["Ingress/web/shop"].(*networkingv1.Ingress)
				i.Name = "shop2"
				w.objs["Ingress/web/shop2"] = &i
			},
			note: "matches 2 Ingress objects",
			uses: []string{"refns:Ingress:web"},
		},
		{
			name: "by label selector, no match",
			g:    gslbOf(object.GslbSpec{ResourceRef: object.GslbResourceRef{Kind: object.KindIngress, MatchLabels: map[string]string{"app": "none"}}, Strategy: rr}, nil, nil),
			note: "matches 0 Ingress objects",
		},
		{
			name: "the referenced object is missing",
			g:    gslbOf(object.GslbSpec{ResourceRef: refTo(object.KindIngress, "gone"), Strategy: rr}, nil, nil),
			note: "does not exist",
			uses: []string{"ref:Ingress:web/gone"},
		},
		{
			name: "Service: its host from k8gb.io/hostname",
			g:    gslbOf(object.GslbSpec{ResourceRef: refTo(object.KindService, "lb"), Strategy: rr}, map[string]string{object.AnnotationK8gbHostname: "lb.example.org"}, nil),
			want: &lbView{Hosts: []string{"lb.example.org."}, Addrs: []string{"198.51.100.7"}, Services: []string{"web/lb"}, Props: []string{"gslb/strategy=roundRobin"}},
			uses: []string{"ref:Service:web/lb"},
		},
		{
			name: "Service by selector without a hostname annotation: nothing",
			g:    gslbOf(object.GslbSpec{ResourceRef: object.GslbResourceRef{APIVersion: "v1", Kind: object.KindService, MatchLabels: map[string]string{"app": "lb"}}, Strategy: rr}, nil, nil),
			note: object.AnnotationK8gbHostname,
		},
		{
			name: "spec.ingress: the Ingress of the Gslb's name",
			g:    gslbOf(object.GslbSpec{Ingress: embedded, Strategy: rr}, nil, nil),
			want: &lbView{Hosts: []string{"shop.example.org."}, Addrs: []string{"198.51.100.1"}, Services: []string{"web/api", "web/app"},
				Props: []string{"gslb/strategy=roundRobin"}},
			uses: []string{"ref:Ingress:web/shop"},
		},
		{
			name:  "spec.ingress without its Ingress: the hosts declared, no targets, noted",
			g:     gslbOf(object.GslbSpec{Ingress: embedded, Strategy: rr}, nil, nil),
			world: func(w *gslbTestWorld) { delete(w.objs, "Ingress/web/shop") },
			want:  &lbView{Hosts: []string{"other.example.org. unready", "shop.example.org. unready"}, Props: []string{"gslb/strategy=roundRobin"}},
			note:  "create it yourself",
		},
		{
			name: "exposed IP addresses replace the targets",
			g: gslbOf(object.GslbSpec{ResourceRef: refTo(object.KindIngress, "shop"), Strategy: rr},
				map[string]string{object.AnnotationExposedIPs: "198.51.100.9, 2001:db8::9,nope"}, nil),
			want: &lbView{Hosts: []string{"shop.example.org."}, Addrs: []string{"198.51.100.9", "2001:db8::9"}, Services: []string{"web/api", "web/app"},
				Props: []string{"gslb/strategy=roundRobin"}, Bad: []string{`annotation k8gb.io/exposed-ip-addresses: "nope" is not an IP address`}},
		},
		{
			name: "exposed host names win over exposed addresses and are resolved",
			g: gslbOf(object.GslbSpec{ResourceRef: refTo(object.KindIngress, "shop"), Strategy: rr},
				map[string]string{object.AnnotationExposedIPs: "198.51.100.9", object.AnnotationExposedHostnames: "LB.Example.NET"}, nil),
			want: &lbView{Hosts: []string{"shop.example.org."}, Hostnames: []string{"lb.example.net."}, Services: []string{"web/api", "web/app"},
				Props: []string{"gslb/strategy=roundRobin"}},
		},
		{
			name: "legacy group is served",
			kind: object.KindGslbLegacy,
			g:    gslbOf(object.GslbSpec{ResourceRef: refTo(object.KindIngress, "shop"), Strategy: rr}, nil, nil),
			want: &lbView{Hosts: []string{"shop.example.org."}, Addrs: []string{"198.51.100.1"}, Services: []string{"web/api", "web/app"},
				Props: []string{"gslb/strategy=roundRobin"}},
		},
		{
			name: "legacy Gslb migrated to k8gb.io: skipped for its twin",
			kind: object.KindGslbLegacy,
			g:    gslbOf(object.GslbSpec{ResourceRef: refTo(object.KindIngress, "shop"), Strategy: rr}, nil, map[string]string{object.LabelMigrated: "true"}),
			note: "twin is served",
		},
		{
			name: "the migrated label means nothing on a k8gb.io Gslb",
			g:    gslbOf(object.GslbSpec{ResourceRef: refTo(object.KindIngress, "shop"), Strategy: rr}, nil, map[string]string{object.LabelMigrated: "true"}),
			want: &lbView{Hosts: []string{"shop.example.org."}, Addrs: []string{"198.51.100.1"}, Services: []string{"web/api", "web/app"},
				Props: []string{"gslb/strategy=roundRobin"}},
		},
		{
			name: "Istio VirtualService: not served, noted",
			g:    gslbOf(object.GslbSpec{ResourceRef: object.GslbResourceRef{APIVersion: "networking.istio.io/v1", Kind: "VirtualService", Name: "shop"}, Strategy: rr}, nil, nil),
			note: "VirtualService",
		},
		{
			name: "an apiVersion of another group: nothing",
			g:    gslbOf(object.GslbSpec{ResourceRef: object.GslbResourceRef{APIVersion: "example.com/v1", Kind: object.KindIngress, Name: "shop"}, Strategy: rr}, nil, nil),
			note: "is not of group",
		},
		{
			name: "HTTPRoute: the route's hosts and its Gateway's addresses",
			g:    gslbOf(object.GslbSpec{ResourceRef: refTo(object.KindHTTPRoute, "www"), Strategy: rr}, nil, nil),
			want: &lbView{Hosts: []string{"www.example.org."}, Addrs: []string{"198.51.100.20"}, Services: []string{"web/app"}, Props: []string{"gslb/strategy=roundRobin"}},
			uses: []string{"ref:HTTPRoute:web/www", "gw:web/gw"},
		},
		{
			name: "TCPRoute: its host from k8gb.io/hostname, on the TCP listener",
			g:    gslbOf(object.GslbSpec{ResourceRef: refTo(object.KindTCPRoute, "db"), Strategy: rr}, map[string]string{object.AnnotationK8gbHostname: "db.example.org"}, nil),
			want: &lbView{Hosts: []string{"db.example.org."}, Addrs: []string{"198.51.100.20"}, Services: []string{"web/app"}, Props: []string{"gslb/strategy=roundRobin"}},
		},
		{
			name: "TCPRoute without k8gb.io/hostname: nothing",
			g:    gslbOf(object.GslbSpec{ResourceRef: refTo(object.KindTCPRoute, "db"), Strategy: rr}, nil, nil),
			note: object.AnnotationK8gbHostname,
		},
		{
			name: "a strategy type k8gb does not know",
			g:    gslbOf(object.GslbSpec{ResourceRef: refTo(object.KindIngress, "shop"), Strategy: object.GslbStrategy{Type: "random"}}, nil, nil),
			want: &lbView{Hosts: []string{"shop.example.org."}, Addrs: []string{"198.51.100.1"}, Services: []string{"web/api", "web/app"},
				Bad: []string{`spec.strategy.type "random": want roundRobin, failover or geoip; the block's default strategy is used`}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := gslbWorldOf()
			if tc.world != nil {
				tc.world(w)
			}
			cfg := lbConfig()
			if tc.cfg != nil {
				tc.cfg(cfg)
			}
			kind := tc.kind
			if kind == "" {
				kind = object.KindGslb
			}
			d, out := DeriveGslb(tc.g, kind, cfg, w)
			if got := lbViewOf(d); !lbEqualView(got, tc.want) {
				t.Errorf("got  %v\nwant %v", got, tc.want)
			}
			if tc.note == "" && out.Note != "" || tc.note != "" && !strings.Contains(out.Note, tc.note) {
				t.Errorf("note %q, want one with %q", out.Note, tc.note)
			}
			for _, u := range tc.uses {
				if !strings.Contains(strings.Join(out.Uses, " "), u) {
					t.Errorf("uses %q, want %q among them", out.Uses, u)
				}
			}
			if d != nil && (d.Kind != kind || d.Name != "shop" || d.UID != "g-1") {
				t.Errorf("declared as %s %s/%s uid %s, want the Gslb", d.Kind, d.Namespace, d.Name, d.UID)
			}
		})
	}
}

// The object a Gslb declares carries the Gslb's policy on every endpoint
// and marks unready hosts, as gslb and localtargets read them.
func TestGslbDeclaredObject(t *testing.T) {
	w := gslbWorldOf()
	g := gslbOf(object.GslbSpec{ResourceRef: refTo(object.KindIngress, "shop"), Strategy: object.GslbStrategy{Type: "failover", PrimaryGeoTag: "eu", DNSTtlSeconds: 30}, ServiceHealthPolicy: "All"}, nil, nil)
	d, _ := DeriveGslb(g, object.KindGslb, lbConfig(), w)
	o, _ := d.Object(nil, []string{"example.org."}, 60)
	if o.Key != "Gslb:web/shop" || len(o.Endpoints) != 1 {
		t.Fatalf("object %s with %d endpoints, want Gslb:web/shop with 1", o.Key, len(o.Endpoints))
	}
	e := o.Endpoints[0]
	if e.Extra == nil || !e.Extra.Unready {
		t.Errorf("endpoint not marked unready under serviceHealthPolicy All with web/api down")
	}
	if e.TTL != 30 {
		t.Errorf("TTL %d, want 30 (dnsTtlSeconds)", e.TTL)
	}
}

// Issue 24, finding 8: a Gslb's spec.resourceRef.namespace naming another
// team's object lent the Gslb that object's hosts and readiness. k8gb
// resolves spec.resourceRef in the Gslb's own namespace only; so does k8scrd.
func TestGslbResourceRefOtherNamespace(t *testing.T) {
	w := gslbWorldOf()
	theirs := lbIngressOf(networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{
		ingRule("pay.example.org", ingSvcBackend("checkout")),
	}}, lbIngress("ip:198.51.100.9"), nil)
	theirs.Namespace, theirs.Name, theirs.Labels = "pay", "checkout", map[string]string{"app": "shop"}
	w.objs["Ingress/pay/checkout"] = theirs
	w.objs["Service/pay/lb"] = &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "pay", Name: "lb"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer},
		Status:     corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "198.51.100.10"}}}},
	}
	w.readySvc["pay/checkout"] = true

	in := func(ns string, r object.GslbResourceRef) object.GslbResourceRef { r.Namespace = ns; return r }
	sel := object.GslbResourceRef{APIVersion: "networking.k8s.io/v1", Kind: object.KindIngress, MatchLabels: map[string]string{"app": "shop"}}
	for _, tc := range []struct {
		name string
		ref  object.GslbResourceRef
	}{
		{"Ingress by name in another namespace", in("pay", refTo(object.KindIngress, "checkout"))},
		{"Service by name in another namespace", in("pay", refTo(object.KindService, "lb"))},
		{"label selector with another namespace", in("pay", sel)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gslbOf(object.GslbSpec{ResourceRef: tc.ref, Strategy: object.GslbStrategy{Type: "roundRobin"}},
				map[string]string{object.AnnotationK8gbHostname: "pay.example.org"}, nil)
			d, out := DeriveGslb(g, object.KindGslb, lbConfig(), w)
			if d != nil {
				t.Errorf("declares %v, want nothing", lbViewOf(d))
			}
			if !out.Refused || !strings.Contains(out.Note, `namespace "pay"`) {
				t.Errorf("note %q refused %v, want the other namespace refused", out.Note, out.Refused)
			}
			if u := strings.Join(out.Uses, " "); strings.Contains(u, "pay") {
				t.Errorf("uses %q: the Gslb depends on the other namespace's objects", u)
			}
		})
	}

	// Its own namespace, named: served as without it.
	g := gslbOf(object.GslbSpec{ResourceRef: in("web", refTo(object.KindIngress, "shop")), Strategy: object.GslbStrategy{Type: "roundRobin"}}, nil, nil)
	d, out := DeriveGslb(g, object.KindGslb, lbConfig(), w)
	want := &lbView{Hosts: []string{"shop.example.org."}, Addrs: []string{"198.51.100.1"}, Services: []string{"web/api", "web/app"},
		Props: []string{"gslb/strategy=roundRobin"}}
	if got := lbViewOf(d); !lbEqualView(got, want) || out.Refused {
		t.Errorf("own namespace named: got %v refused %v, want %v", got, out.Refused, want)
	}
}
