package sources_test

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"
	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// propagation bounds how long a change may take to reach the answers in
// these tests; docs/architecture.md ("Sources") promises a second for
// readiness, and the waits below poll every 10-50 ms, so a passing test costs what the change costs.
const propagation = 10 * time.Second

// allKinds is the `resources` line with every source.
const allKinds = "DNSEndpoint Ingress Service HTTPRoute GRPCRoute TLSRoute"

// server is one coredns process with a k8scrd stanza.
type server struct {
	*harness.CoreDNS
	ReadyURL string
}

// startSources starts coredns for zones with `localtargets` and k8scrd
// reading kubeconfig with the extra stanza lines, plus `ready`. With wait it
// waits for `ready` (k8scrd's first sync); otherwise for the DNS socket.
func startSources(t testing.TB, zones, kubeconfig string, stanza []string, wait bool) *server {
	t.Helper()
	ip := harness.NewIP(t)
	ready := harness.HostPort(t, ip)
	corefile := fmt.Sprintf(`%s {
    bind %s
    localtargets
    k8scrd {
        kubeconfig %s
        %s
    }
    ready %s
}
`, zones, ip, kubeconfig, strings.Join(stanza, "\n        "), ready)
	s := &server{ReadyURL: "http://" + ready + "/ready"}
	var opts []harness.Option
	if wait {
		opts = append(opts, harness.WithReadyURL(s.ReadyURL), harness.WithStartTimeout(time.Minute))
	}
	s.CoreDNS = harness.StartCoreDNS(t, corefile, opts...)
	return s
}

// answer asks addr for name and qtype and says what a user sees: the
// records' data joined by commas ("CNAME x." for an alias), NODATA, or the
// rcode of a negative answer.
func answer(addr, name string, qtype uint16) string {
	r, err := harness.Ask(addr, name, qtype, harness.NoRD, harness.Timeout(500*time.Millisecond), harness.Attempts(2))
	if err != nil {
		return "error: " + err.Error()
	}
	if r.Rcode != dns.RcodeSuccess {
		return dns.RcodeToString[r.Rcode]
	}
	got := harness.Targets(r, qtype)
	if len(got) == 0 {
		if c := harness.Targets(r, dns.TypeCNAME); len(c) > 0 {
			return "CNAME " + strings.Join(c, ",")
		}
		return "NODATA"
	}
	return strings.Join(got, ",")
}

// expectA waits until name A at addr answers want (see answer) and
// returns how long it took.
func expectA(t testing.TB, addr, name, want string) time.Duration {
	t.Helper()
	return expect(t, addr, name, dns.TypeA, want, propagation)
}

func expect(t testing.TB, addr, name string, qtype uint16, want string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	testkit.Eventually(t, within, name+" "+dns.TypeToString[qtype], func() (bool, string) {
		got := answer(addr, name, qtype)
		return got == want, fmt.Sprintf("%s %s @%s = %s, want %s", name, dns.TypeToString[qtype], addr, got, want)
	})
	return time.Since(start)
}

// join is the answer form of addresses: sorted, comma separated.
func join(addrs ...string) string {
	s := slices.Clone(addrs)
	slices.Sort(s)
	return strings.Join(s, ",")
}

// cluster is the API server and the typed clients the tests write with.
type cluster struct {
	k  *harness.Kube
	cs kubernetes.Interface
}

func newCluster(t testing.TB) *cluster {
	t.Helper()
	k := harness.SharedKube(t)
	return &cluster{k: k, cs: k.Clientset()}
}

var gatewayAPI struct {
	mu        sync.Mutex
	installed bool
}

// installGatewayAPI installs the Gateway API CRDs once per test process.
func (c *cluster) installGatewayAPI(t testing.TB) {
	t.Helper()
	gatewayAPI.mu.Lock()
	defer gatewayAPI.mu.Unlock()
	if !gatewayAPI.installed {
		c.k.InstallGatewayAPI(t)
		gatewayAPI.installed = true
	}
}

// ---- Services and EndpointSlices

// backend creates a ClusterIP Service ns/name on port 80 (a backend of an
// Ingress or a route).
func (c *cluster) backend(t testing.TB, ns, name string) {
	t.Helper()
	_, err := c.cs.CoreV1().Services(ns).Create(harness.Context(t), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
			Selector: map[string]string{"app": name},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Service %s/%s: %v", ns, name, err)
	}
}

// ep is one endpoint of an EndpointSlice: an address and its conditions
// (nil: unset, as the controller leaves them for some endpoints).
type ep struct {
	addr        string
	ready       *bool
	terminating *bool
}

func ready(addr string) ep   { return ep{addr: addr, ready: new(true), terminating: new(false)} }
func unready(addr string) ep { return ep{addr: addr, ready: new(false), terminating: new(false)} }

// slice creates or replaces EndpointSlice ns/name of Service svc, labelled
// as the EndpointSlice controller labels its slices.
func (c *cluster) slice(t testing.TB, ns, svc, name string, eps ...ep) {
	t.Helper()
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"kubernetes.io/service-name":             svc,
			"endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: new("http"), Port: new(int32(8080)), Protocol: new(corev1.ProtocolTCP)}},
	}
	for _, e := range eps {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{e.addr},
			Conditions: discoveryv1.EndpointConditions{Ready: e.ready, Serving: e.ready, Terminating: e.terminating},
		})
	}
	c.k.PutEndpointSlice(t, ns, es)
}

// ---- Ingresses and IngressClasses

// ingress is the part of an Ingress's spec the tests vary.
type ingress struct {
	class          string            // spec.ingressClassName ("": unset)
	annotations    map[string]string // e.g. the legacy kubernetes.io/ingress.class
	rules          []rule
	tls            [][]string // spec.tls[].hosts
	defaultBackend string     // a Service name ("": none)
}

// rule is one spec.rules[] entry: a host routed to a Service.
type rule struct{ host, service string }

func backendOf(svc string) *networkingv1.IngressBackend {
	return &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
		Name: svc, Port: networkingv1.ServiceBackendPort{Number: 80},
	}}
}

// createIngress creates Ingress ns/name.
func (c *cluster) createIngress(t testing.TB, ns, name string, in ingress) {
	t.Helper()
	obj := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: in.annotations}}
	if in.class != "" {
		obj.Spec.IngressClassName = new(in.class)
	}
	if in.defaultBackend != "" {
		obj.Spec.DefaultBackend = backendOf(in.defaultBackend)
	}
	for _, r := range in.rules {
		obj.Spec.Rules = append(obj.Spec.Rules, networkingv1.IngressRule{
			Host: r.host,
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{
					Path: "/", PathType: new(networkingv1.PathTypePrefix), Backend: *backendOf(r.service),
				}},
			}},
		})
	}
	for _, hosts := range in.tls {
		obj.Spec.TLS = append(obj.Spec.TLS, networkingv1.IngressTLS{Hosts: hosts, SecretName: "tls"})
	}
	if _, err := c.cs.NetworkingV1().Ingresses(ns).Create(harness.Context(t), obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Ingress %s/%s: %v", ns, name, err)
	}
}

// ingressStatus sets an Ingress's status.loadBalancer.ingress through the
// status subresource, as an ingress controller does (see lbStatus).
func (c *cluster) ingressStatus(t testing.TB, ns, name string, entries ...string) {
	t.Helper()
	var ing []networkingv1.IngressLoadBalancerIngress
	for _, e := range entries {
		if _, err := netip.ParseAddr(e); err == nil {
			ing = append(ing, networkingv1.IngressLoadBalancerIngress{IP: e})
		} else {
			ing = append(ing, networkingv1.IngressLoadBalancerIngress{Hostname: e})
		}
	}
	api := c.cs.NetworkingV1().Ingresses(ns)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := api.Get(harness.Context(t), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Status.LoadBalancer.Ingress = ing
		_, err = api.UpdateStatus(harness.Context(t), cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("status of Ingress %s/%s: %v", ns, name, err)
	}
}

// ingressClass creates or updates IngressClass name, marked the default
// class or not; it is deleted when the test ends.
func (c *cluster) ingressClass(t testing.TB, name string, isDefault bool) {
	t.Helper()
	ic := &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
			"ingressclass.kubernetes.io/is-default-class": fmt.Sprint(isDefault),
		}},
		Spec: networkingv1.IngressClassSpec{Controller: "example.com/" + name},
	}
	api := c.cs.NetworkingV1().IngressClasses()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := api.Get(harness.Context(t), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = api.Create(harness.Context(t), ic, metav1.CreateOptions{})
			if err == nil {
				t.Cleanup(func() { api.Delete(harness.Context(t), name, metav1.DeleteOptions{}) })
			}
			return err
		}
		if err != nil {
			return err
		}
		ic.ResourceVersion = cur.ResourceVersion
		_, err = api.Update(harness.Context(t), ic, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("IngressClass %s: %v", name, err)
	}
}

// ---- Gateway API (through the dynamic client: one code path for every route kind)

const gatewayGroup = "gateway.networking.k8s.io"

var gatewayGVR = schema.GroupVersionResource{Group: gatewayGroup, Version: "v1", Resource: "gateways"}

func routeGVR(kind string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: gatewayGroup, Version: "v1", Resource: strings.ToLower(kind) + "s"}
}

// listener is one Gateway listener.
type listener struct {
	name, protocol, hostname string
	port                     int64
}

// gateway creates Gateway ns/name of class with listeners and sets its
// status.addresses through the status subresource.
func (c *cluster) gateway(t testing.TB, ns, name, class string, ls []listener, addrs ...string) {
	t.Helper()
	var lss []any
	for _, l := range ls {
		m := map[string]any{"name": l.name, "protocol": l.protocol, "port": l.port}
		if l.hostname != "" {
			m["hostname"] = l.hostname
		}
		if l.protocol == "TLS" {
			m["tls"] = map[string]any{"mode": "Passthrough"}
		}
		lss = append(lss, m)
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gatewayGroup + "/v1", "kind": "Gateway",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"gatewayClassName": class, "listeners": lss},
	}}
	ri := c.k.Dynamic().Resource(gatewayGVR).Namespace(ns)
	got, err := ri.Create(harness.Context(t), obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Gateway %s/%s: %v", ns, name, err)
	}
	var as []any
	for _, a := range addrs {
		as = append(as, map[string]any{"type": "IPAddress", "value": a})
	}
	unstructured.SetNestedSlice(got.Object, as, "status", "addresses")
	if _, err := ri.UpdateStatus(harness.Context(t), got, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("status of Gateway %s/%s: %v", ns, name, err)
	}
}

// route is the part of a route's spec the tests vary.
type route struct {
	gateway, section string // the parentRef (section "": every listener)
	hostnames        []string
	backend          string // a Service of the same namespace, port 80
}

func (r route) spec() map[string]any {
	parent := map[string]any{"name": r.gateway}
	if r.section != "" {
		parent["sectionName"] = r.section
	}
	spec := map[string]any{
		"parentRefs": []any{parent},
		"rules":      []any{map[string]any{"backendRefs": []any{map[string]any{"name": r.backend, "port": int64(80)}}}},
	}
	if len(r.hostnames) > 0 {
		var hs []any
		for _, h := range r.hostnames {
			hs = append(hs, h)
		}
		spec["hostnames"] = hs
	}
	return spec
}

// createRoute creates a route of kind (HTTPRoute, GRPCRoute, TLSRoute).
func (c *cluster) createRoute(t testing.TB, kind, ns, name string, r route) {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gatewayGroup + "/v1", "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     r.spec(),
	}}
	if _, err := c.k.Dynamic().Resource(routeGVR(kind)).Namespace(ns).Create(harness.Context(t), obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create %s %s/%s: %v", kind, ns, name, err)
	}
}

// updateRoute replaces a route's spec (which moves metadata.generation on)
// and returns the new generation.
func (c *cluster) updateRoute(t testing.TB, kind, ns, name string, r route) int64 {
	t.Helper()
	ri := c.k.Dynamic().Resource(routeGVR(kind)).Namespace(ns)
	var gen int64
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := ri.Get(harness.Context(t), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Object["spec"] = r.spec()
		got, err := ri.Update(harness.Context(t), cur, metav1.UpdateOptions{})
		if err == nil {
			gen = got.GetGeneration()
		}
		return err
	})
	if err != nil {
		t.Fatalf("update %s %s/%s: %v", kind, ns, name, err)
	}
	return gen
}

// routeStatus writes the route's status as a Gateway controller does: one
// parent, gateway (its parentRef copied from the spec), whose Accepted condition is accepted, observed at
// generation (0: the route's current generation).
func (c *cluster) routeStatus(t testing.TB, kind, ns, name, gateway string, accepted bool, generation int64) {
	t.Helper()
	ri := c.k.Dynamic().Resource(routeGVR(kind)).Namespace(ns)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := ri.Get(harness.Context(t), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		gen := generation
		if gen == 0 {
			gen = cur.GetGeneration()
		}
		status, reason := "True", "Accepted"
		if !accepted {
			status, reason = "False", "NotAllowedByListeners"
		}
		now := time.Now().UTC().Format(time.RFC3339)
		// The controller writes the parentRef as the spec has it (sectionName too).
		ref := map[string]any{"group": gatewayGroup, "kind": "Gateway", "name": gateway}
		refs, _, _ := unstructured.NestedSlice(cur.Object, "spec", "parentRefs")
		for _, r := range refs {
			if m, ok := r.(map[string]any); ok && m["name"] == gateway {
				for k, v := range m {
					ref[k] = v
				}
				break
			}
		}
		cur.Object["status"] = map[string]any{"parents": []any{map[string]any{
			"parentRef":      ref,
			"controllerName": "example.com/fleetdns-test",
			"conditions": []any{
				map[string]any{"type": "Accepted", "status": status, "reason": reason, "message": "", "observedGeneration": gen, "lastTransitionTime": now},
				map[string]any{"type": "ResolvedRefs", "status": "True", "reason": "ResolvedRefs", "message": "", "observedGeneration": gen, "lastTransitionTime": now},
			},
		}}}
		_, err = ri.UpdateStatus(harness.Context(t), cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("status of %s %s/%s: %v", kind, ns, name, err)
	}
}
