package derive

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// bulkyMeta is the metadata of an object another tool also annotates: a
// 200 KiB annotation and a last-applied-configuration no derivation reads,
// besides the ones the derivations do read.
func bulkyMeta(name string, read map[string]string) metav1.ObjectMeta {
	created := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	changed := metav1.NewTime(created.Add(time.Hour))
	a := map[string]string{
		"tools.example.com/blob":           strings.Repeat("x", 200<<10),
		corev1.LastAppliedConfigAnnotation: strings.Repeat("{}", 1000),
	}
	for k, v := range read {
		a[k] = v
	}
	return metav1.ObjectMeta{
		Name: name, Namespace: "ns", UID: types.UID("u-" + name), ResourceVersion: "7", CreationTimestamp: created,
		Labels:      map[string]string{"app": name, "k8gb.io/dnstype": "local"},
		Annotations: a,
		ManagedFields: []metav1.ManagedFieldsEntry{
			{Manager: "kubectl", Time: &changed, FieldsV1: metav1.NewFieldsV1(strings.Repeat("{}", 500))},
			{Manager: "controller", Time: &created},
		},
	}
}

// readAnnotations are annotations the derivations read.
var readAnnotations = map[string]string{
	object.AnnotationHostname:           "web.example.org,api.example.org",
	object.AnnotationTTL:                "30",
	object.GslbAnnotations + "strategy": "failover",
	"k8gb.io/exposed-hostnames":         "a.example.org",
	object.AnnotationIngressClass:       "nginx",
	"kubernetes.io/description-foo":     "not read",
}

func TestTrimIngress(t *testing.T) {
	pt := networkingv1.PathTypePrefix
	ing := &networkingv1.Ingress{
		ObjectMeta: bulkyMeta("web", readAnnotations),
		Spec: networkingv1.IngressSpec{
			DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "def", Port: networkingv1.ServiceBackendPort{Number: 80}}},
			Rules: []networkingv1.IngressRule{
				{Host: "web.example.org", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{
					{Path: "/", PathType: &pt, Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Name: "http"}}}},
					{Path: "/static", PathType: &pt, Backend: networkingv1.IngressBackend{Resource: &corev1.TypedLocalObjectReference{Kind: "Bucket", Name: "b"}}},
				}}}},
				{Host: "res.example.org", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{
					{Path: "/", PathType: &pt, Backend: networkingv1.IngressBackend{Resource: &corev1.TypedLocalObjectReference{Kind: "Bucket", Name: "b"}}},
				}}}},
				{Host: "outside.test"},
			},
			TLS: []networkingv1.IngressTLS{{Hosts: []string{"tls.example.org", "web.example.org"}, SecretName: "cert"}},
		},
		Status: networkingv1.IngressStatus{LoadBalancer: networkingv1.IngressLoadBalancerStatus{Ingress: []networkingv1.IngressLoadBalancerIngress{
			{IP: "198.18.0.1", Ports: []networkingv1.IngressPortStatus{{Port: 443}}}, {Hostname: "lb.example.net"},
		}}},
	}
	for _, classes := range [][]string{nil, {"nginx"}, {"other"}} {
		w := &lbWorld{readySvcs: []string{"ns/web"}}
		want := lbViewOf(deriveIngress(ing, lbConfig(classes...), w))
		trimmed := object.TrimIngress(ing)
		if got := lbViewOf(deriveIngress(trimmed, lbConfig(classes...), w)); !lbEqualView(got, want) {
			t.Errorf("classes %v: trimmed Ingress derives\n%s\nwant\n%s", classes, got, want)
		}
		if again := object.TrimIngress(trimmed); !reflect.DeepEqual(again, trimmed) {
			t.Errorf("trimIngress is not idempotent:\n%+v\n%+v", again, trimmed)
		}
	}
	trimmed := object.TrimIngress(ing)
	checkTrimmedMeta(t, &ing.ObjectMeta, &trimmed.ObjectMeta)
	// The cache keeps its own, smaller form, and gives the derivations
	// the trimmed Ingress again.
	cached, err := object.Trim(ing)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cached.(*object.CachedIngress); !ok {
		t.Errorf("the cache keeps a %T, want its own form", cached)
	}
	if got := object.Derivable(cached); !reflect.DeepEqual(got, trimmed) {
		t.Errorf("the cache's Ingress is not the trimmed Ingress:\n%+v\nwant\n%+v", got, trimmed)
	}
	if n := trimmed.Size(); n > 2048 {
		t.Errorf("trimmed Ingress is %d bytes (protobuf), want at most 2 KiB", n)
	}
	if ing.Annotations["tools.example.com/blob"] == "" {
		t.Errorf("trimIngress changed its argument")
	}
}

func TestTrimService(t *testing.T) {
	lb := &corev1.Service{
		ObjectMeta: bulkyMeta("web", readAnnotations),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
			Selector: map[string]string{"app": "web"},
		},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "198.18.0.2"}, {Hostname: "lb.example.net"}}}},
	}
	w := &lbWorld{readySvcs: []string{"ns/web"}}
	want := lbViewOf(deriveService(lb, lbConfig(), w))
	trimmed := object.TrimService(lb)
	if got := lbViewOf(deriveService(trimmed, lbConfig(), w)); !lbEqualView(got, want) || want == nil {
		t.Errorf("trimmed Service derives\n%s\nwant\n%s", got, want)
	}
	checkTrimmedMeta(t, &lb.ObjectMeta, &trimmed.ObjectMeta)
	if again := object.TrimService(trimmed); !reflect.DeepEqual(again, trimmed) {
		t.Errorf("trimService is not idempotent")
	}

	// A Service that declares nothing costs its name and labels.
	plain := lb.DeepCopy()
	plain.Spec.Type = corev1.ServiceTypeClusterIP
	plain.Annotations = map[string]string{"tools.example.com/blob": strings.Repeat("x", 200<<10)}
	small := object.TrimService(plain)
	if d := deriveService(small, lbConfig(), w); d != nil {
		t.Errorf("a ClusterIP Service declares %s", lbViewOf(d))
	}
	if n := small.Size(); n > 256 {
		t.Errorf("trimmed ClusterIP Service is %d bytes (protobuf), want at most 256", n)
	}
	if small.Annotations != nil {
		t.Errorf("trimmed ClusterIP Service keeps annotations %v", small.Annotations)
	}
}

func TestTrimIngressClass(t *testing.T) {
	ic := &networkingv1.IngressClass{
		ObjectMeta: bulkyMeta("nginx", map[string]string{object.AnnotationDefaultClass: "true"}),
		Spec:       networkingv1.IngressClassSpec{Controller: "k8s.io/ingress-nginx"},
	}
	trimmed := object.TrimIngressClass(ic)
	if trimmed.Annotations[object.AnnotationDefaultClass] != "true" || trimmed.Name != "nginx" || !trimmed.CreationTimestamp.Equal(&ic.CreationTimestamp) {
		t.Errorf("trimmed IngressClass lost what defaultIngressClass reads: %+v", trimmed.ObjectMeta)
	}
	if n := trimmed.Size(); n > 512 {
		t.Errorf("trimmed IngressClass is %d bytes (protobuf), want at most 512", n)
	}
}

func TestTrimDispatch(t *testing.T) {
	ready := true
	for _, obj := range []any{
		&networkingv1.Ingress{ObjectMeta: bulkyMeta("i", nil)},
		&corev1.Service{ObjectMeta: bulkyMeta("s", nil)},
		&networkingv1.IngressClass{ObjectMeta: bulkyMeta("c", nil)},
		&discoveryv1.EndpointSlice{ObjectMeta: bulkyMeta("e", nil), Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"198.18.0.3"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}}},
		&corev1.ConfigMap{ObjectMeta: bulkyMeta("other", nil)},
	} {
		got, err := object.Trim(obj)
		if err != nil {
			t.Fatal(err)
		}
		again, err := object.Trim(got)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(again, got) {
			t.Errorf("%T: trim is not idempotent", obj)
		}
		if o, ok := got.(interface{ GetAnnotations() map[string]string }); ok {
			if a := o.GetAnnotations(); a[corev1.LastAppliedConfigAnnotation] != "" {
				t.Errorf("%T keeps the last-applied-configuration", obj)
			}
		}
		if o, ok := got.(interface {
			GetManagedFields() []metav1.ManagedFieldsEntry
		}); ok {
			for _, mf := range o.GetManagedFields() {
				if mf.FieldsV1 != nil {
					t.Errorf("%T keeps managedFields' fields", obj)
				}
			}
		}
	}
}

// checkTrimmedMeta: what lbDeclared, Events and Gslb selectors read stays;
// what no derivation reads goes.
func checkTrimmedMeta(t *testing.T, orig, got *metav1.ObjectMeta) {
	t.Helper()
	if got.Name != orig.Name || got.Namespace != orig.Namespace || got.UID != orig.UID || got.ResourceVersion != orig.ResourceVersion ||
		!got.CreationTimestamp.Equal(&orig.CreationTimestamp) || !reflect.DeepEqual(got.Labels, orig.Labels) {
		t.Errorf("trimmed metadata lost identity, times or labels: %+v", got)
	}
	if d1, d2 := lbDeclared(object.KindIngress, orig), lbDeclared(object.KindIngress, got); !d1.Changed.Equal(d2.Changed) {
		t.Errorf("change time %v, want %v", d2.Changed, d1.Changed)
	}
	for k, v := range orig.Annotations {
		_, kept := got.Annotations[k]
		if kept != object.ReadAnnotation(k) || kept && got.Annotations[k] != v {
			t.Errorf("annotation %q: kept %v, want %v", k, kept, object.ReadAnnotation(k))
		}
	}
	if got.Annotations["tools.example.com/blob"] != "" || len(got.ManagedFields) != 1 || got.ManagedFields[0].FieldsV1 != nil {
		t.Errorf("trimmed metadata keeps what no derivation reads")
	}
}
