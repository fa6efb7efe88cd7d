package deploy

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/fleetdns/fleetdns/test/harness"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// The load balancers of the two clusters' Ingress controllers, as their
// status reports them. Data only: nothing connects to them.
const (
	euLB = "203.0.113.80"
	usLB = "198.51.100.80"
)

// appRun plays the controllers of one cluster for the example app
// (deploy/multicluster/app/app.yaml, applied by the overlay): no controller
// runs in these tests, so what the Ingress controller and the EndpointSlice
// controller would write, it writes. Its pods' addresses are in pods.
type appRun struct {
	k     *harness.Kube
	pods  *podNet
	slice string
}

const appNS = "fleetdns"

// runApp writes the Ingress controller's load-balancer address into Ingress
// app's status and an EndpointSlice for Service app with two Ready pods, as
// after `kubectl apply -k` with two replicas running. Slices left by an
// earlier test are removed first.
func runApp(t *testing.T, k *harness.Kube, pods *podNet, lb string) *appRun {
	t.Helper()
	cs := k.Clientset()
	ctx := harness.Context(t)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ing, err := cs.NetworkingV1().Ingresses(appNS).Get(ctx, "app", metav1.GetOptions{})
		if err != nil {
			return err
		}
		ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: lb}}
		_, err = cs.NetworkingV1().Ingresses(appNS).UpdateStatus(ctx, ing, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("writing Ingress app's load balancer %s, as its controller would: %v", lb, err)
	}
	if err := cs.DiscoveryV1().EndpointSlices(appNS).DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=app"}); err != nil {
		t.Fatal(err)
	}
	a := &appRun{k: k, pods: pods, slice: fmt.Sprintf("app-%05x", rand.IntN(1<<20))}
	a.write(t, a.newPods(2, true))
	return a
}

// newPods returns n endpoints at new pod addresses.
func (a *appRun) newPods(n int, ready bool) []discoveryv1.Endpoint {
	var eps []discoveryv1.Endpoint
	for range n {
		ip := a.pods.addr()
		eps = append(eps, discoveryv1.Endpoint{
			Addresses:  []string{ip},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr(ready), Serving: ptr(ready), Terminating: ptr(false)},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: appNS, Name: fmt.Sprintf("app-%05x", rand.IntN(1<<20))},
		})
	}
	return eps
}

// write replaces the endpoints of the app's EndpointSlice, as the
// EndpointSlice controller does.
func (a *appRun) write(t *testing.T, eps []discoveryv1.Endpoint) {
	t.Helper()
	cs := a.k.Clientset()
	ctx := harness.Context(t)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := cs.DiscoveryV1().EndpointSlices(appNS).Get(ctx, a.slice, metav1.GetOptions{})
		if err != nil {
			s = &discoveryv1.EndpointSlice{
				ObjectMeta: metav1.ObjectMeta{Name: a.slice, Namespace: appNS, Labels: map[string]string{
					discoveryv1.LabelServiceName: "app",
					discoveryv1.LabelManagedBy:   "endpointslice-controller.k8s.io",
				}},
				AddressType: discoveryv1.AddressTypeIPv4,
				Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080)), Protocol: ptr(corev1.ProtocolTCP)}},
				Endpoints:   eps,
			}
			_, err = cs.DiscoveryV1().EndpointSlices(appNS).Create(ctx, s, metav1.CreateOptions{})
			return err
		}
		s.Endpoints = eps
		_, err = cs.DiscoveryV1().EndpointSlices(appNS).Update(ctx, s, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("writing EndpointSlice %s for Service app: %v", a.slice, err)
	}
}

// scaleToZero is `kubectl scale deployment app --replicas=0` as the
// EndpointSlice controller shows it: the pods are terminating (not ready,
// still serving their last requests); podsGone then removes them.
func (a *appRun) scaleToZero(t *testing.T) {
	t.Helper()
	s, err := a.k.Clientset().DiscoveryV1().EndpointSlices(appNS).Get(harness.Context(t), a.slice, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eps := s.Endpoints
	for i := range eps {
		eps[i].Conditions = discoveryv1.EndpointConditions{Ready: ptr(false), Serving: ptr(true), Terminating: ptr(true)}
	}
	a.write(t, eps)
}

// podsGone: the terminating pods have exited; the slice has no endpoints.
func (a *appRun) podsGone(t *testing.T) {
	t.Helper()
	a.write(t, []discoveryv1.Endpoint{})
}

// scaleUp is `kubectl scale deployment app --replicas=n` once the new pods
// pass their readiness probe.
func (a *appRun) scaleUp(t *testing.T, n int) {
	t.Helper()
	a.write(t, a.newPods(n, true))
}
