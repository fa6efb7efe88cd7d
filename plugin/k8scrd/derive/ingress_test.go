package derive

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// lbWorld is the world of the Ingress and Service derivation tests: the
// Services ("ns/name") that have a ready endpoint, and the default
// IngressClass. It records which Services were asked about.
type lbWorld struct {
	readySvcs    []string
	defaultClass string

	mu    sync.Mutex
	asked []string
}

func (w *lbWorld) Ready(namespace, name string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.asked = append(w.asked, namespace+"/"+name)
	return slices.Contains(w.readySvcs, namespace+"/"+name)
}

func (w *lbWorld) DefaultIngressClass() string { return w.defaultClass }

func (w *lbWorld) Gateway(namespace, name string) *gatewayv1.Gateway { return nil }

// lbConfig is a block for example.org. and shop.test.
func lbConfig(classes ...string) *Options {
	return &Options{Zones: []string{"example.org.", "shop.test."}, IngressClasses: classes}
}

// lbView is what a test compares of a declared: hosts as "name" or
// "name unready", targets as strings.
type lbView struct {
	Hosts     []string
	Addrs     []string
	Hostnames []string
	Services  []string
	Bad       []string
	Props     []string
	TTL       string
}

func lbViewOf(d *Declared) *lbView {
	if d == nil {
		return nil
	}
	v := &lbView{Hostnames: d.Hostnames, Services: d.Services, Bad: d.Bad, TTL: "default"}
	for _, h := range d.Hosts {
		if h.Ready {
			v.Hosts = append(v.Hosts, h.Name)
		} else {
			v.Hosts = append(v.Hosts, h.Name+" unready")
		}
	}
	for _, a := range d.Addrs {
		v.Addrs = append(v.Addrs, a.String())
	}
	for _, p := range d.props {
		v.Props = append(v.Props, p.Name+"="+p.Value)
	}
	if d.ttlSet {
		v.TTL = fmt.Sprint(d.ttl)
	}
	return v
}

func (v *lbView) String() string {
	if v == nil {
		return "nil (declares nothing)"
	}
	return fmt.Sprintf("hosts %q addrs %q hostnames %q services %q bad %q props %q ttl %s",
		v.Hosts, v.Addrs, v.Hostnames, v.Services, v.Bad, v.Props, v.TTL)
}

// lbEqualView compares views, nil slices equal to empty ones.
func lbEqualView(got, want *lbView) bool {
	if got == nil || want == nil {
		return got == want
	}
	norm := func(v lbView) lbView {
		for _, s := range []*[]string{&v.Hosts, &v.Addrs, &v.Hostnames, &v.Services, &v.Bad, &v.Props} {
			if len(*s) == 0 {
				*s = nil
			}
		}
		if v.TTL == "" {
			v.TTL = "default"
		}
		return v
	}
	return reflect.DeepEqual(norm(*got), norm(*want))
}

// Builders for Ingresses, in the order a manifest reads.

func ingSvcBackend(name string) networkingv1.IngressBackend {
	return networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: name, Port: networkingv1.ServiceBackendPort{Number: 80}}}
}

func ingResourceBackend() networkingv1.IngressBackend {
	g := "storage.example.com"
	return networkingv1.IngressBackend{Resource: &corev1.TypedLocalObjectReference{APIGroup: &g, Kind: "Bucket", Name: "static"}}
}

// rule is a rule for host routing each path to the backends given.
func ingRule(host string, backends ...networkingv1.IngressBackend) networkingv1.IngressRule {
	r := networkingv1.IngressRule{Host: host}
	if len(backends) > 0 {
		r.HTTP = &networkingv1.HTTPIngressRuleValue{}
		for i, b := range backends {
			r.HTTP.Paths = append(r.HTTP.Paths, networkingv1.HTTPIngressPath{Path: fmt.Sprintf("/%d", i), Backend: b})
		}
	}
	return r
}

func lbIngress(entries ...string) networkingv1.IngressStatus {
	var s networkingv1.IngressStatus
	for _, e := range entries {
		if ip, ok := strings.CutPrefix(e, "ip:"); ok {
			s.LoadBalancer.Ingress = append(s.LoadBalancer.Ingress, networkingv1.IngressLoadBalancerIngress{IP: ip})
		} else {
			s.LoadBalancer.Ingress = append(s.LoadBalancer.Ingress, networkingv1.IngressLoadBalancerIngress{Hostname: e})
		}
	}
	return s
}

func lbIngressOf(spec networkingv1.IngressSpec, status networkingv1.IngressStatus, annotations map[string]string) *networkingv1.Ingress {
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "shop", UID: "u-1", Annotations: annotations},
		Spec:       spec, Status: status,
	}
}

func TestIngressDerivation(t *testing.T) {
	up := []string{"web/front", "web/default"}
	tests := []struct {
		name  string
		ing   *networkingv1.Ingress
		ready []string
		want  *lbView
	}{
		{
			name: "rule and tls hosts lower-cased and qualified, outside the zones ignored silently",
			ing: lbIngressOf(networkingv1.IngressSpec{
				Rules: []networkingv1.IngressRule{ingRule("WWW.Example.org", ingSvcBackend("front")), ingRule("www.other.net", ingSvcBackend("front"))},
				TLS:   []networkingv1.IngressTLS{{Hosts: []string{"www.example.org", "www.other.net"}}},
			}, lbIngress("ip:192.0.2.10"), nil),
			ready: up,
			want:  &lbView{Hosts: []string{"www.example.org."}, Addrs: []string{"192.0.2.10"}, Services: []string{"web/front"}},
		},
		{
			name: "no host inside the zones declares nothing",
			ing: lbIngressOf(networkingv1.IngressSpec{
				Rules: []networkingv1.IngressRule{ingRule("www.other.net", ingSvcBackend("front"))},
			}, lbIngress("ip:192.0.2.10"), nil),
			ready: up,
			want:  nil,
		},
		{
			name: "zone apex is inside the zone",
			ing: lbIngressOf(networkingv1.IngressSpec{
				Rules: []networkingv1.IngressRule{ingRule("shop.test.", ingSvcBackend("front"))},
			}, lbIngress("ip:192.0.2.10"), nil),
			ready: up,
			want:  &lbView{Hosts: []string{"shop.test."}, Addrs: []string{"192.0.2.10"}, Services: []string{"web/front"}},
		},
		{
			name: "a name that only ends like a zone is outside it",
			ing: lbIngressOf(networkingv1.IngressSpec{
				Rules: []networkingv1.IngressRule{ingRule("www.notexample.org", ingSvcBackend("front"))},
			}, lbIngress("ip:192.0.2.10"), nil),
			ready: up,
			want:  nil,
		},
		{
			name: "wildcard host stays a wildcard name",
			ing: lbIngressOf(networkingv1.IngressSpec{
				Rules: []networkingv1.IngressRule{ingRule("*.Shop.test", ingSvcBackend("front"))},
			}, lbIngress("ip:192.0.2.10"), nil),
			ready: up,
			want:  &lbView{Hosts: []string{"*.shop.test."}, Addrs: []string{"192.0.2.10"}, Services: []string{"web/front"}},
		},
		{
			name: "pending load balancer: hosts declared, no targets",
			ing: lbIngressOf(networkingv1.IngressSpec{
				Rules: []networkingv1.IngressRule{ingRule("www.example.org", ingSvcBackend("front"))},
			}, networkingv1.IngressStatus{}, nil),
			ready: up,
			want:  &lbView{Hosts: []string{"www.example.org."}, Services: []string{"web/front"}},
		},
		{
			name: "bad status address named, the others served",
			ing: lbIngressOf(networkingv1.IngressSpec{
				Rules: []networkingv1.IngressRule{ingRule("www.example.org", ingSvcBackend("front"))},
			}, lbIngress("ip:192.0.2.10", "ip:192.0.2.300", "ip:2001:db8::1", "ip:fe80::1%eth0"), nil),
			ready: up,
			want: &lbView{
				Hosts: []string{"www.example.org."}, Addrs: []string{"192.0.2.10", "2001:db8::1"}, Services: []string{"web/front"},
				Bad: []string{
					`status.loadBalancer.ingress[1].ip "192.0.2.300": not an IP address`,
					`status.loadBalancer.ingress[3].ip "fe80::1%eth0": not an IP address`,
				},
			},
		},
		{
			name: "status host names lower-cased and qualified, addresses and names sorted and unique",
			ing: lbIngressOf(networkingv1.IngressSpec{
				Rules: []networkingv1.IngressRule{ingRule("www.example.org", ingSvcBackend("front"))},
			}, lbIngress("LB-1.ELB.Amazonaws.com", "ip:192.0.2.20", "lb-1.elb.amazonaws.com.", "ip:192.0.2.10", "ip:192.0.2.20", "a.lb.net", "bad name.lb.net"), nil),
			ready: up,
			want: &lbView{
				Hosts: []string{"www.example.org."}, Addrs: []string{"192.0.2.10", "192.0.2.20"},
				Hostnames: []string{"a.lb.net.", "lb-1.elb.amazonaws.com."}, Services: []string{"web/front"},
				Bad: []string{`status.loadBalancer.ingress[6].hostname "bad name.lb.net": not a host name`},
			},
		},
		{
			name: "host unready when its backend has no ready endpoint; other hosts keep theirs",
			ing: lbIngressOf(networkingv1.IngressSpec{
				Rules: []networkingv1.IngressRule{ingRule("www.example.org", ingSvcBackend("front")), ingRule("api.example.org", ingSvcBackend("api"))},
			}, lbIngress("ip:192.0.2.10"), nil),
			ready: up,
			want: &lbView{
				Hosts: []string{"api.example.org. unready", "www.example.org."}, Addrs: []string{"192.0.2.10"},
				Services: []string{"web/api", "web/front"},
			},
		},
		{
			name: "multiple rules for one host: ready when any of its backends is",
			ing: lbIngressOf(networkingv1.IngressSpec{
				Rules: []networkingv1.IngressRule{
					ingRule("www.example.org", ingSvcBackend("front")),
					ingRule("www.example.org", ingSvcBackend("search"), ingSvcBackend("cart")),
				},
			}, lbIngress("ip:192.0.2.10"), nil),
			ready: up,
			want: &lbView{
				Hosts: []string{"www.example.org."}, Addrs: []string{"192.0.2.10"},
				Services: []string{"web/cart", "web/front", "web/search"},
			},
		},
		{
			name: "multiple rules for one host: unready when none of its backends is",
			ing: lbIngressOf(networkingv1.IngressSpec{
				Rules: []networkingv1.IngressRule{
					ingRule("www.example.org", ingSvcBackend("cart")),
					ingRule("WWW.example.org", ingSvcBackend("search")),
				},
			}, lbIngress("ip:192.0.2.10"), nil),
			ready: up,
			want: &lbView{
				Hosts: []string{"www.example.org. unready"}, Addrs: []string{"192.0.2.10"},
				Services: []string{"web/cart", "web/search"},
			},
		},
		{
			name: "rule with only resource backends takes the default backend's health",
			ing: lbIngressOf(networkingv1.IngressSpec{
				DefaultBackend: lbPtr(ingSvcBackend("default")),
				Rules:          []networkingv1.IngressRule{ingRule("static.example.org", ingResourceBackend())},
			}, lbIngress("ip:192.0.2.10"), nil),
			ready: up,
			want:  &lbView{Hosts: []string{"static.example.org."}, Addrs: []string{"192.0.2.10"}, Services: []string{"web/default"}},
		},
		{
			name: "rule without paths takes the default backend's health, unready with it",
			ing: lbIngressOf(networkingv1.IngressSpec{
				DefaultBackend: lbPtr(ingSvcBackend("down")),
				Rules:          []networkingv1.IngressRule{ingRule("static.example.org")},
			}, lbIngress("ip:192.0.2.10"), nil),
			ready: up,
			want:  &lbView{Hosts: []string{"static.example.org. unready"}, Addrs: []string{"192.0.2.10"}, Services: []string{"web/down"}},
		},
		{
			name: "rule with only resource backends and no default backend: declared, unready",
			ing: lbIngressOf(networkingv1.IngressSpec{
				Rules: []networkingv1.IngressRule{ingRule("static.example.org", ingResourceBackend())},
			}, lbIngress("ip:192.0.2.10"), nil),
			ready: up,
			want:  &lbView{Hosts: []string{"static.example.org. unready"}, Addrs: []string{"192.0.2.10"}},
		},
		{
			name: "tls-only host takes its health from the default backend",
			ing: lbIngressOf(networkingv1.IngressSpec{
				DefaultBackend: lbPtr(ingSvcBackend("default")),
				Rules:          []networkingv1.IngressRule{ingRule("www.example.org", ingSvcBackend("down"))},
				TLS:            []networkingv1.IngressTLS{{Hosts: []string{"www.example.org", "secure.example.org"}}},
			}, lbIngress("ip:192.0.2.10"), nil),
			ready: up,
			want: &lbView{
				Hosts: []string{"secure.example.org.", "www.example.org. unready"}, Addrs: []string{"192.0.2.10"},
				Services: []string{"web/default", "web/down"},
			},
		},
		{
			name: "tls-only host unready with an unready default backend",
			ing: lbIngressOf(networkingv1.IngressSpec{
				DefaultBackend: lbPtr(ingSvcBackend("down")),
				TLS:            []networkingv1.IngressTLS{{Hosts: []string{"secure.example.org"}}},
			}, lbIngress("ip:192.0.2.10"), nil),
			ready: up,
			want:  &lbView{Hosts: []string{"secure.example.org. unready"}, Addrs: []string{"192.0.2.10"}, Services: []string{"web/down"}},
		},
		{
			name: "tls-only host without a default backend is not served, the rule hosts are",
			ing: lbIngressOf(networkingv1.IngressSpec{
				Rules: []networkingv1.IngressRule{ingRule("www.example.org", ingSvcBackend("front"))},
				TLS:   []networkingv1.IngressTLS{{Hosts: []string{"www.example.org", "secure.example.org"}}},
			}, lbIngress("ip:192.0.2.10"), nil),
			ready: up,
			want:  &lbView{Hosts: []string{"www.example.org."}, Addrs: []string{"192.0.2.10"}, Services: []string{"web/front"}},
		},
		{
			name: "only tls hosts and no default backend declares nothing",
			ing: lbIngressOf(networkingv1.IngressSpec{
				TLS: []networkingv1.IngressTLS{{Hosts: []string{"secure.example.org"}}},
			}, lbIngress("ip:192.0.2.10"), nil),
			ready: up,
			want:  nil,
		},
		{
			name: "wildcard tls host without a rule takes the default backend's health",
			ing: lbIngressOf(networkingv1.IngressSpec{
				DefaultBackend: lbPtr(ingSvcBackend("default")),
				TLS:            []networkingv1.IngressTLS{{Hosts: []string{"*.shop.test"}}, {Hosts: []string{"*.SHOP.test"}}},
			}, lbIngress("ip:192.0.2.10"), nil),
			ready: up,
			want:  &lbView{Hosts: []string{"*.shop.test."}, Addrs: []string{"192.0.2.10"}, Services: []string{"web/default"}},
		},
		{
			name: "a rule with an empty host is not a host and its backends are not read",
			ing: lbIngressOf(networkingv1.IngressSpec{
				Rules: []networkingv1.IngressRule{ingRule("", ingSvcBackend("catchall")), ingRule("www.example.org", ingSvcBackend("front"))},
			}, lbIngress("ip:192.0.2.10"), nil),
			ready: up,
			want:  &lbView{Hosts: []string{"www.example.org."}, Addrs: []string{"192.0.2.10"}, Services: []string{"web/front"}},
		},
		{
			name: "only an empty-host rule declares nothing",
			ing: lbIngressOf(networkingv1.IngressSpec{
				DefaultBackend: lbPtr(ingSvcBackend("default")),
				Rules:          []networkingv1.IngressRule{ingRule("", ingSvcBackend("front"))},
			}, lbIngress("ip:192.0.2.10"), nil),
			ready: up,
			want:  nil,
		},
		{
			name: "gslb annotations become properties, ttl annotation sets the ttl",
			ing: lbIngressOf(networkingv1.IngressSpec{
				Rules: []networkingv1.IngressRule{ingRule("www.example.org", ingSvcBackend("front"))},
			}, lbIngress("ip:192.0.2.10"), map[string]string{
				"gslb.fleetdns.io/strategy": "failover", "gslb.fleetdns.io/primary": "eu", "gslb.fleetdns.io/": "ignored",
				object.AnnotationTTL: "60", "other.io/thing": "x",
			}),
			ready: up,
			want: &lbView{
				Hosts: []string{"www.example.org."}, Addrs: []string{"192.0.2.10"}, Services: []string{"web/front"},
				Props: []string{"gslb/primary=eu", "gslb/strategy=failover"}, TTL: "60",
			},
		},
		{
			name: "malformed ttl annotation named, the default used, the rest served",
			ing: lbIngressOf(networkingv1.IngressSpec{
				Rules: []networkingv1.IngressRule{ingRule("www.example.org", ingSvcBackend("front"))},
			}, lbIngress("ip:192.0.2.10"), map[string]string{object.AnnotationTTL: "1m"}),
			ready: up,
			want: &lbView{
				Hosts: []string{"www.example.org."}, Addrs: []string{"192.0.2.10"}, Services: []string{"web/front"},
				Bad: []string{`annotation external-dns.alpha.kubernetes.io/ttl="1m": want seconds, 0 to 2147483647; the default TTL is used`},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := &lbWorld{readySvcs: tc.ready}
			got := lbViewOf(deriveIngress(tc.ing, lbConfig(), w))
			if !lbEqualView(got, tc.want) {
				t.Errorf("got  %v\nwant %v", got, tc.want)
			}
			// What was read is what a change must derive again.
			asked := slices.Sorted(slices.Values(w.asked))
			if got != nil && !slices.Equal(slices.Compact(asked), got.Services) {
				t.Errorf("asked the world about %q, recorded services %q", asked, got.Services)
			}
		})
	}
}

func TestIngressClassRules(t *testing.T) {
	named := func(c string) *string { return &c }
	tests := []struct {
		name         string
		className    *string
		annotation   string
		defaultClass string
		want         string
	}{
		{name: "ingressClassName", className: named("nginx"), want: "nginx"},
		{name: "ingressClassName wins over the annotation", className: named("nginx"), annotation: "traefik", want: "nginx"},
		{name: "annotation without ingressClassName", annotation: "traefik", defaultClass: "nginx", want: "traefik"},
		{name: "empty ingressClassName is unset", className: named(""), annotation: "traefik", want: "traefik"},
		{name: "default class without either", defaultClass: "nginx", want: "nginx"},
		{name: "no class at all", want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ing := lbIngressOf(networkingv1.IngressSpec{IngressClassName: tc.className}, networkingv1.IngressStatus{}, nil)
			if tc.annotation != "" {
				ing.Annotations = map[string]string{object.AnnotationIngressClass: tc.annotation}
			}
			if got := ingressClass(ing, tc.defaultClass); got != tc.want {
				t.Errorf("class %q, want %q", got, tc.want)
			}
		})
	}
}

func TestIngressServedOnlyForConfiguredClasses(t *testing.T) {
	named := func(c string) *string { return &c }
	tests := []struct {
		name         string
		classes      []string // ingress_class
		className    *string
		annotation   string
		defaultClass string
		served       bool
	}{
		{name: "no ingress_class serves every class", className: named("anything"), served: true},
		{name: "no ingress_class serves an Ingress without class", served: true},
		{name: "class in the list", classes: []string{"traefik", "nginx"}, className: named("nginx"), served: true},
		{name: "class not in the list", classes: []string{"traefik"}, className: named("nginx"), served: false},
		{name: "annotation class in the list", classes: []string{"traefik"}, annotation: "traefik", served: true},
		{name: "ingressClassName decides over the annotation", classes: []string{"traefik"}, className: named("nginx"), annotation: "traefik", served: false},
		{name: "default class in the list", classes: []string{"nginx"}, defaultClass: "nginx", served: true},
		{name: "default class not in the list", classes: []string{"traefik"}, defaultClass: "nginx", served: false},
		{name: "no class with a list is not served", classes: []string{"nginx"}, served: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ing := lbIngressOf(networkingv1.IngressSpec{
				IngressClassName: tc.className,
				Rules:            []networkingv1.IngressRule{ingRule("www.example.org", ingSvcBackend("front"))},
			}, lbIngress("ip:192.0.2.10"), nil)
			if tc.annotation != "" {
				ing.Annotations = map[string]string{object.AnnotationIngressClass: tc.annotation}
			}
			d := deriveIngress(ing, lbConfig(tc.classes...), &lbWorld{defaultClass: tc.defaultClass})
			if served := d != nil; served != tc.served {
				t.Errorf("served %v, want %v (%v)", served, tc.served, lbViewOf(d))
			}
		})
	}
}

func TestIngressMetadataCarried(t *testing.T) {
	created := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	older, newest := created.Add(time.Hour), created.Add(2*time.Hour)
	ing := lbIngressOf(networkingv1.IngressSpec{
		Rules: []networkingv1.IngressRule{ingRule("www.example.org", ingSvcBackend("front"))},
	}, lbIngress("ip:192.0.2.10"), nil)
	ing.CreationTimestamp = metav1.NewTime(created)
	ing.Labels = map[string]string{"app": "shop"}
	ing.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: "kubectl", Time: lbPtr(metav1.NewTime(newest))},
		{Manager: "controller", Time: lbPtr(metav1.NewTime(older))},
		{Manager: "untimed"},
	}
	d := deriveIngress(ing, lbConfig(), &lbWorld{})
	if d == nil {
		t.Fatal("declares nothing")
	}
	if d.Kind != object.KindIngress || d.Namespace != "web" || d.Name != "shop" || d.UID != "u-1" {
		t.Errorf("identity %s %s/%s %s, want Ingress web/shop u-1", d.Kind, d.Namespace, d.Name, d.UID)
	}
	if !d.Created.Equal(created) || !d.Changed.Equal(newest) {
		t.Errorf("created %v changed %v, want %v and the newest managedFields time %v", d.Created, d.Changed, created, newest)
	}
	if !reflect.DeepEqual(d.labels, map[string]string{"app": "shop"}) {
		t.Errorf("labels %v", d.labels)
	}
	ing.Labels["app"] = "changed"
	if d.labels["app"] != "shop" {
		t.Error("declared labels share the object's map")
	}

	ing.ManagedFields = nil
	if d := deriveIngress(ing, lbConfig(), &lbWorld{}); !d.Changed.Equal(created) {
		t.Errorf("without managedFields changed %v, want the creation %v", d.Changed, created)
	}
}

// The builder's object of a derived Ingress: every host answers (A
// endpoints even while pending), the unready host's endpoints are marked.
func TestIngressDerivedObjectMarksUnreadyHosts(t *testing.T) {
	ing := lbIngressOf(networkingv1.IngressSpec{
		Rules: []networkingv1.IngressRule{ingRule("www.example.org", ingSvcBackend("front")), ingRule("api.example.org", ingSvcBackend("api")), ingRule("*.shop.test", ingSvcBackend("front"))},
	}, lbIngress("ip:192.0.2.10", "ip:2001:db8::1"), map[string]string{"gslb.fleetdns.io/strategy": "roundRobin"})
	cfg := lbConfig()
	d := deriveIngress(ing, cfg, &lbWorld{readySvcs: []string{"web/front"}})
	o, bad := d.Object(nil, cfg.Zones, 30)
	if len(bad) != 0 {
		t.Fatalf("invalid endpoints %v", bad)
	}
	var got []string
	for _, e := range o.Endpoints {
		s := fmt.Sprintf("%s %d %v", e.Name, e.Type, e.Addrs)
		if e.Extra != nil && e.Extra.Unready {
			s += " unready"
		}
		got = append(got, s)
	}
	want := []string{
		"*.shop.test. 1 [192.0.2.10]", "*.shop.test. 28 [2001:db8::1]",
		"api.example.org. 1 [192.0.2.10] unready", "api.example.org. 28 [2001:db8::1] unready",
		"www.example.org. 1 [192.0.2.10]", "www.example.org. 28 [2001:db8::1]",
	}
	if !slices.Equal(got, want) {
		t.Errorf("endpoints\n%q\nwant\n%q", got, want)
	}
	if o.Kind != object.KindIngress || o.Key != SourceKey(object.KindIngress, "web", "shop") {
		t.Errorf("object kind %q key %q", o.Kind, o.Key)
	}
}

func TestIngressHostsSortedMergedReadyIfAnyIs(t *testing.T) {
	got := lbSortHosts([]DeclaredHost{{Name: "www.example.org."}, {Name: "api.example.org."}, {Name: "www.example.org.", Ready: true}, {Name: "api.example.org."}})
	want := []DeclaredHost{{Name: "api.example.org."}, {Name: "www.example.org.", Ready: true}}
	if !slices.Equal(got, want) {
		t.Errorf("hosts %+v, want %+v", got, want)
	}
}

func lbPtr[T any](v T) *T { return &v }
