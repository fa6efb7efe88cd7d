package hostile_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"
	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestHostileGslbRefersToAnotherNamespace is issue 24's finding 8: a
// tenant's Gslbs name another team's Ingress and LoadBalancer Service in
// spec.resourceRef.namespace. k8gb resolves spec.resourceRef in the Gslb's
// own namespace only: the tenant's Gslbs declare nothing (a Warning Event
// ReferenceRefused on each), the team's host answers its own target, its
// localtargets- answer is unaffected, and the tenant's host over the
// team's Service (which leaked the Service's address and readiness) is not
// served.
func TestHostileGslbRefersToAnotherNamespace(t *testing.T) {
	k := harness.SharedKube(t)
	root := harness.ModuleRoot(t)
	for _, crd := range []string{"gslbs.k8gb.io", "gslbs.k8gb.absa.oss"} {
		b, err := os.ReadFile(filepath.Join(root, "deploy/crd", crd+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		k.Apply(t, string(b))
		k.WaitCRDEstablished(t, crd)
	}
	victim := k.NewNamespace(t, "pay")
	evil := k.NewNamespace(t, "evil")
	cs := k.Clientset()
	ctx := harness.Context(t)

	// The team's world: Service app (ready), Ingress checkout routing
	// pay.example.org to it at 198.18.3.1, LoadBalancer Service lb at 198.18.3.2.
	for _, name := range []string{"app", "lb"} {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP, Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		}}
		if name == "lb" {
			svc.Spec.Type, svc.Spec.AllocateLoadBalancerNodePorts = corev1.ServiceTypeLoadBalancer, new(false)
		}
		got, err := cs.CoreV1().Services(victim).Create(ctx, svc, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if name == "lb" {
			got.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.18.3.2", IPMode: new(corev1.LoadBalancerIPModeVIP)}}
			if _, err := cs.CoreV1().Services(victim).UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		k.PutEndpointSlice(t, victim, &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-1", Labels: map[string]string{
				"kubernetes.io/service-name": name, "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"198.18.0.10"},
				Conditions: discoveryv1.EndpointConditions{Ready: new(true), Serving: new(true), Terminating: new(false)}}},
		})
	}
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "checkout"}, Spec: networkingv1.IngressSpec{
		Rules: []networkingv1.IngressRule{{Host: "pay.example.org", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: new(networkingv1.PathTypePrefix), Backend: networkingv1.IngressBackend{
				Service: &networkingv1.IngressServiceBackend{Name: "app", Port: networkingv1.ServiceBackendPort{Number: 80}}}}},
		}}}},
	}}
	got, err := cs.NetworkingV1().Ingresses(victim).Create(ctx, ing, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "198.18.3.1"}}
	if _, err := cs.NetworkingV1().Ingresses(victim).UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	ip := harness.NewIP(t)
	ready := harness.HostPort(t, ip)
	cd := harness.StartCoreDNS(t, fmt.Sprintf(`example.org {
    bind %s
    ready %s
    localtargets
    k8scrd {
        kubeconfig %s
        namespaces %s %s
        resources Ingress Gslb
        tenancy strict
    }
}
`, ip, ready, k.Kubeconfig, victim, evil), harness.WithReadyURL("http://"+ready+"/ready"), harness.WithStartTimeout(time.Minute))

	answer := func(name string) string {
		r, err := harness.Ask(cd.Addr, name, dns.TypeA, harness.NoRD, harness.Timeout(time.Second))
		if err != nil {
			return err.Error()
		}
		if r.Rcode != dns.RcodeSuccess {
			return dns.RcodeToString[r.Rcode]
		}
		a := harness.Targets(r, dns.TypeA)
		slices.Sort(a)
		return strings.Join(a, ",")
	}
	expect := func(name, want string) {
		t.Helper()
		testkit.Eventually(t, 10*time.Second, name, func() (bool, string) {
			got := answer(name)
			return got == want, "finding 8: " + name + " A = " + got + ", want " + want
		})
	}
	expect("pay.example.org.", "198.18.3.1")
	expect("localtargets-pay.example.org.", "198.18.3.1")

	// The tenant's Gslbs: one over the team's Ingress with targets of its
	// own, one over the team's Service under a host of the tenant's.
	k.Apply(t, fmt.Sprintf(`apiVersion: k8gb.io/v1beta1
kind: Gslb
metadata:
  name: steal
  namespace: %[1]s
  annotations: {k8gb.io/exposed-ip-addresses: 198.18.66.6}
spec:
  resourceRef: {apiVersion: networking.k8s.io/v1, kind: Ingress, name: checkout, namespace: %[2]s}
  strategy: {type: roundRobin}
---
apiVersion: k8gb.io/v1beta1
kind: Gslb
metadata:
  name: peek
  namespace: %[1]s
  annotations: {k8gb.io/hostname: peek.example.org}
spec:
  resourceRef: {apiVersion: v1, kind: Service, name: lb, namespace: %[2]s}
  strategy: {type: roundRobin}
`, evil, victim))

	// Both Gslbs derived and refused: an Event on each.
	refused := func() []string {
		l, err := cs.CoreV1().Events(evil).List(harness.Context(t), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var on []string
		for _, e := range l.Items {
			if e.Reason == "ReferenceRefused" && e.InvolvedObject.Kind == "Gslb" {
				on = append(on, e.InvolvedObject.Name)
			}
		}
		slices.Sort(on)
		return slices.Compact(on)
	}
	if _, ok := testkit.Within(30*time.Second, func() bool { return slices.Equal(refused(), []string{"peek", "steal"}) }); !ok {
		t.Errorf("finding 8: ReferenceRefused Events on Gslbs %q within 30 s, want on peek and steal", refused())
	}
	for range 5 {
		for name, want := range map[string]string{
			"pay.example.org.":              "198.18.3.1",
			"localtargets-pay.example.org.": "198.18.3.1",
			"peek.example.org.":             "NXDOMAIN",
		} {
			if got := answer(name); got != want {
				t.Fatalf("finding 8: with the tenant's Gslbs over the team's objects, %s A = %s, want %s", name, got, want)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
}
