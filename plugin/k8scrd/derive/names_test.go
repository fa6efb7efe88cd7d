package derive

import (
	"slices"
	"strings"
	"testing"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// k8sGatewayConfig is lbConfig with the naming words of body, one a line
// (the words are parsed in setup.go; names_test.go tests that).
func k8sGatewayConfig(t *testing.T, body string) *Options {
	t.Helper()
	cfg := lbConfig()
	for _, line := range strings.Split(body, "\n") {
		switch f := strings.Fields(line); {
		case len(f) == 0:
		case f[0] == "hostname_annotation":
			cfg.Names.Annotations = f[1:]
		case f[0] == "service_names":
			cfg.Names.ServiceNames = true
		case f[0] == "relative_hosts":
			cfg.Names.RelativeHosts = true
		default:
			t.Fatalf("%q: not a naming word", line)
		}
	}
	return cfg
}

// k8sGatewayNamesOf are the hosts d declares, nil for none.
func k8sGatewayNamesOf(d *Declared) []string {
	if d == nil {
		return nil
	}
	var out []string
	for _, h := range d.Hosts {
		out = append(out, h.Name)
	}
	return out
}

func TestK8sGatewayServiceNames(t *testing.T) {
	lb := corev1.ServiceTypeLoadBalancer
	both := "hostname_annotation coredns.io/hostname external-dns.alpha.kubernetes.io/hostname"
	tests := []struct {
		name, words string
		svc         *corev1.Service
		want        []string
		unserved    map[string]float64 // reason -> names counted
	}{
		{
			name: "coredns.io/hostname without the word: not served, counted",
			svc:  lbService(lb, map[string]string{object.AnnotationK8sGatewayHostname: "www.example.org"}, "ip:192.0.2.1"),
			want: nil, unserved: map[string]float64{ReasonK8sGatewayAnnotation: 1},
		},
		{
			name: "coredns.io/hostname with the word, a comma list with spaces, lower-cased", words: both,
			svc:  lbService(lb, map[string]string{object.AnnotationK8sGatewayHostname: "WWW.example.org, api.example.org"}, "ip:192.0.2.1"),
			want: []string{"api.example.org.", "www.example.org."},
		},
		{
			name: "coredns.io/hostname wins over external-dns's, as in k8s_gateway", words: both,
			svc: lbService(lb, map[string]string{
				object.AnnotationK8sGatewayHostname: "a.example.org", object.AnnotationHostname: "b.example.org",
			}, "ip:192.0.2.1"),
			want: []string{"a.example.org."},
		},
		{
			name: "external-dns's read by default; coredns.io/hostname beside it counted",
			svc: lbService(lb, map[string]string{
				object.AnnotationK8sGatewayHostname: "a.example.org", object.AnnotationHostname: "b.example.org",
			}, "ip:192.0.2.1"),
			want: []string{"b.example.org."}, unserved: map[string]float64{ReasonK8sGatewayAnnotation: 1},
		},
		{
			name: "no annotation, without service_names: NAME.NAMESPACE counted per zone",
			svc:  lbService(lb, nil, "ip:192.0.2.1"),
			want: nil, unserved: map[string]float64{reasonK8sGatewayServiceName: 2},
		},
		{
			name: "no annotation, service_names: NAME.NAMESPACE below every zone", words: "service_names",
			svc:  lbService(lb, nil, "ip:192.0.2.1"),
			want: []string{"front.web.example.org.", "front.web.shop.test."},
		},
		{
			name: "service_names stays off an annotated Service, as in k8s_gateway", words: "service_names",
			svc:  lbService(lb, hostnameAnnotation("www.example.org"), "ip:192.0.2.1"),
			want: []string{"www.example.org."},
		},
		{
			name: "a relative host without relative_hosts: counted", words: both,
			svc:  lbService(lb, map[string]string{object.AnnotationK8sGatewayHostname: "good.ok"}, "ip:192.0.2.1"),
			want: nil, unserved: map[string]float64{reasonK8sGatewayRelative: 2},
		},
		{
			name: "relative_hosts: below every zone; another domain's host stays outside; bad names named", words: both + "\nrelative_hosts",
			svc: lbService(lb, map[string]string{
				object.AnnotationK8sGatewayHostname: "good.ok,www.other.com,foo_bar,abcd0123456789012345678901234567890123456789012345678901234567890",
			}, "ip:192.0.2.1"),
			want: []string{"good.ok.example.org.", "good.ok.shop.test."},
		},
		{
			name: "resolve-endpoints on a ClusterIP Service: counted, nothing declared",
			svc: lbService(corev1.ServiceTypeClusterIP, map[string]string{
				object.AnnotationK8sGatewayEndpoints: "true", object.AnnotationK8sGatewayHostname: "pods.example.org",
			}),
			want: nil, unserved: map[string]float64{ReasonK8sGatewayEndpoints: 1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := k8sGatewayConfig(t, tc.words)
			reasons := []string{ReasonK8sGatewayAnnotation, reasonK8sGatewayServiceName, reasonK8sGatewayRelative, ReasonK8sGatewayEndpoints}
			before := map[string]float64{}
			for _, r := range reasons {
				before[r] = testutil.ToFloat64(unservedNames.WithLabelValues(r))
			}
			unservedNotes.Lock() // each case is the first sight of the object
			clear(unservedNotes.last)
			unservedNotes.Unlock()
			got := k8sGatewayNamesOf(deriveService(tc.svc, cfg, &lbWorld{}))
			if !slices.Equal(got, tc.want) {
				t.Errorf("hosts %q, want %q", got, tc.want)
			}
			for _, r := range reasons {
				if d := testutil.ToFloat64(unservedNames.WithLabelValues(r)) - before[r]; d != tc.unserved[r] {
					t.Errorf("unserved %s: counted %v, want %v", r, d, tc.unserved[r])
				}
			}
			// Derived again unchanged (an EndpointSlice moved): not counted again.
			deriveService(tc.svc, cfg, &lbWorld{})
			for _, r := range reasons {
				if d := testutil.ToFloat64(unservedNames.WithLabelValues(r)) - before[r]; d != tc.unserved[r] {
					t.Errorf("derived twice, unserved %s: counted %v, want %v", r, d, tc.unserved[r])
				}
			}
		})
	}
}

func TestK8sGatewayBadAnnotationNamed(t *testing.T) {
	cfg := k8sGatewayConfig(t, "hostname_annotation coredns.io/hostname\nrelative_hosts")
	svc := lbService(corev1.ServiceTypeLoadBalancer, map[string]string{object.AnnotationK8sGatewayHostname: "good,foo_bar"}, "ip:192.0.2.1")
	d := deriveService(svc, cfg, &lbWorld{})
	if d == nil || len(d.Bad) != 1 || !strings.Contains(d.Bad[0], `"foo_bar" is not a host name`) {
		t.Fatalf("want foo_bar named as bad, got %+v", d)
	}
}

func TestServiceExternalIPsReplaceStatus(t *testing.T) {
	svc := lbService(corev1.ServiceTypeLoadBalancer, hostnameAnnotation("www.example.org"), "ip:192.0.2.1", "lb.example.net")
	svc.Spec.ExternalIPs = []string{"192.0.2.9", "not-an-ip"}
	d := deriveService(svc, lbConfig(), &lbWorld{})
	v := lbViewOf(d)
	if !slices.Equal(v.Addrs, []string{"192.0.2.9"}) || len(d.Hostnames) != 0 {
		t.Errorf("targets %q %q, want the external IP alone", v.Addrs, d.Hostnames)
	}
	if len(d.Bad) != 1 || !strings.Contains(d.Bad[0], "spec.externalIPs[1]") {
		t.Errorf("bad %q, want spec.externalIPs[1] named", d.Bad)
	}
	if trimmed := object.TrimService(svc); !slices.Equal(trimmed.Spec.ExternalIPs, svc.Spec.ExternalIPs) {
		t.Errorf("the informer cache drops spec.externalIPs: %q", trimmed.Spec.ExternalIPs)
	}
}

func TestK8sGatewayAnnotationsSurviveTheCache(t *testing.T) {
	svc := lbService(corev1.ServiceTypeClusterIP, map[string]string{
		object.AnnotationK8sGatewayHostname: "a", object.AnnotationK8sGatewayEndpoints: "true", "other.io/x": "y",
	})
	got := object.TrimService(svc).Annotations
	if got[object.AnnotationK8sGatewayHostname] != "a" || got[object.AnnotationK8sGatewayEndpoints] != "true" || got["other.io/x"] != "" {
		t.Errorf("cached annotations %v", got)
	}
}

func TestK8sGatewayRelativeIngressHosts(t *testing.T) {
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "relative-ing"},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{
			{Host: "myapp"}, {Host: "www.example.org"}, {Host: "www.other.com"}, {Host: "api.dev"}, {Host: "www.outside.test"},
		}},
	}
	before := testutil.ToFloat64(unservedNames.WithLabelValues(reasonK8sGatewayRelative))
	if got := k8sGatewayNamesOf(deriveIngress(ing, lbConfig(), &lbWorld{})); !slices.Equal(got, []string{"www.example.org."}) {
		t.Errorf("without relative_hosts: %q", got)
	}
	if d := testutil.ToFloat64(unservedNames.WithLabelValues(reasonK8sGatewayRelative)) - before; d != 2 {
		t.Errorf("myapp below two zones counted %v times, want 2 (www.other.com, api.dev and www.outside.test are other domains')", d)
	}
	got := k8sGatewayNamesOf(deriveIngress(ing, k8sGatewayConfig(t, "relative_hosts"), &lbWorld{}))
	if want := []string{"myapp.example.org.", "myapp.shop.test.", "www.example.org."}; !slices.Equal(got, want) {
		t.Errorf("with relative_hosts: %q, want %q", got, want)
	}
}

func TestK8sGatewayRelativeRouteHosts(t *testing.T) {
	w := routeTestWorld{gateways: map[string]*gatewayv1.Gateway{
		"web/gw": routeGateway("web", "gw", []gatewayv1.Listener{routeListener("http", 80, gatewayv1.HTTPProtocolType, "", "")}, "192.0.2.7"),
	}}
	r := &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "rel", Generation: 1},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "gw"}}},
			Hostnames:       []gatewayv1.Hostname{"api", "www.example.org"},
		},
		Status: gatewayv1.HTTPRouteStatus{RouteStatus: gatewayv1.RouteStatus{Parents: []gatewayv1.RouteParentStatus{{
			ParentRef:  gatewayv1.ParentReference{Name: "gw"},
			Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, ObservedGeneration: 1}},
		}}}},
	}
	r.Spec.Hostnames = append(r.Spec.Hostnames, "shop") // one label: relative, though .shop is a top-level domain
	if got := k8sGatewayNamesOf(deriveHTTPRoute(r, lbConfig(), w)); !slices.Equal(got, []string{"www.example.org."}) {
		t.Errorf("without relative_hosts: %q", got)
	}
	got := k8sGatewayNamesOf(deriveHTTPRoute(r, k8sGatewayConfig(t, "relative_hosts"), w))
	if want := []string{"api.example.org.", "api.shop.test.", "shop.example.org.", "shop.shop.test.", "www.example.org."}; !slices.Equal(got, want) {
		t.Errorf("with relative_hosts: %q, want %q", got, want)
	}
}

func TestK8sGatewayUnservedSeam(t *testing.T) {
	cfg := lbConfig()
	var got []string
	cfg.Names.Unserved = func(kind, ns, name string, names []UnservedName) {
		for _, n := range names {
			got = append(got, kind+" "+ns+"/"+name+" "+n.name+" "+n.reason)
		}
	}
	before := testutil.ToFloat64(unservedNames.WithLabelValues(reasonK8sGatewayServiceName))
	svc := lbService(corev1.ServiceTypeLoadBalancer, nil, "ip:192.0.2.1")
	svc.Name = "seam"
	deriveService(svc, cfg, &lbWorld{})
	want := []string{"Service web/seam seam.web.example.org. " + reasonK8sGatewayServiceName, "Service web/seam seam.web.shop.test. " + reasonK8sGatewayServiceName}
	if !slices.Equal(got, want) {
		t.Errorf("collected %q, want %q", got, want)
	}
	if d := testutil.ToFloat64(unservedNames.WithLabelValues(reasonK8sGatewayServiceName)) - before; d != 0 {
		t.Errorf("counted %v with a collector set, want 0 (the collector takes them)", d)
	}
}
