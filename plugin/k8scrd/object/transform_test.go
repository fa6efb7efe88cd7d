package object

import (
	"reflect"
	"testing"
	"unsafe"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// An Ingress of one host, as most are: its cached form is one block of at
// most 176 bytes (the allocator's size class; 240 before) and one block of
// its strings (seven before), and it gives the derivations the trimmed
// Ingress again. There is one per Ingress host.
func TestCachedIngressOfOneHost(t *testing.T) {
	if n := unsafe.Sizeof(CachedIngress{}); n > 176 {
		t.Errorf("CachedIngress is %d bytes, want at most 176 (a size class of the allocator)", n)
	}
	now := metav1.Now()
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "0b9a4a4e-3f7e-4d7e-9c1e-4a3a2f1b0c9d", ResourceVersion: "4711",
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Time: &now}}},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: "web.example.org",
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{
				{Path: "/", Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web"}}},
			}}}}}},
		Status: networkingv1.IngressStatus{LoadBalancer: networkingv1.IngressLoadBalancerStatus{Ingress: []networkingv1.IngressLoadBalancerIngress{{IP: "198.18.0.1"}}}},
	}
	cached, err := Trim(ing)
	if err != nil {
		t.Fatal(err)
	}
	c := cached.(*CachedIngress)
	if c.rare != nil {
		t.Errorf("an Ingress without annotations, default backend or TLS keeps %+v apart", *c.rare)
	}
	if got, want := Derivable(c), TrimIngress(ing); !reflect.DeepEqual(got, want) {
		t.Errorf("the cache's Ingress is\n%+v\nwant the trimmed one\n%+v", got, want)
	}
	first := unsafe.StringData(c.Name)
	for _, s := range []string{c.version, string(c.uid), c.rules[0].host, c.rules[0].services[0], c.lb[0].ip} {
		if p := uintptr(unsafe.Pointer(unsafe.StringData(s))); p < uintptr(unsafe.Pointer(first)) || p >= uintptr(unsafe.Pointer(first))+96 {
			t.Errorf("%q is not in the object's one block of strings", s)
		}
	}
}
