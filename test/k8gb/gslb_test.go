package k8gb_test

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
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const (
	zone        = "cloud.example.org."
	propagation = 10 * time.Second
)

// site is one cluster: its namespace of the package's API server (its
// coredns reads only that one: a store of its own, as a cluster of its own
// would have), its coredns (gslb, localtargets, k8scrd resources Gslb) and
// its load balancer address (a loopback address: a target in answers, never
// contacted).
type site struct {
	tag string
	ns  string
	k   *harness.Kube
	ip  string // coredns's address
	lb  string // the Ingress's and Service's status address
	dns *harness.CoreDNS
}

// corefile is a site's GSLB block with static peers (tag -> address).
func (s *site) corefile(kubeconfig string, peers map[string]string) string {
	var p strings.Builder
	for _, tag := range slices.Sorted(func(yield func(string) bool) {
		for k := range peers {
			if !yield(k) {
				return
			}
		}
	}) {
		fmt.Fprintf(&p, "        peer %s %s:53\n", tag, peers[tag])
	}
	return fmt.Sprintf(`%[1]s:53 {
    bind %[2]s
    localtargets
    gslb %[1]s {
        geotag %[3]s
%[4]s        strategy roundRobin
        geo cidr 198.18.1.0/24 eu
        geo cidr 198.18.2.0/24 us
        timeout 300ms
        refresh 200ms
        ttl 5
    }
    k8scrd %[1]s {
        kubeconfig %[5]s
        namespaces %[6]s
        resources Gslb
    }
    errors
}
`, zone, s.ip, s.tag, p.String(), kubeconfig, s.ns)
}

// world holds the objects every Gslb test reads in the site's namespace:
// Service app with a ready EndpointSlice, Ingress shop routing
// shop.<zone> to it, and LoadBalancer Service lb, both at the site's lb.
func (s *site) world(t *testing.T) {
	t.Helper()
	ns := s.ns
	cs := s.k.Clientset()
	ctx := harness.Context(t)
	s.k.EnsureNamespace(t, ns)
	mk := func(name string, typ corev1.ServiceType) {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}}, Spec: corev1.ServiceSpec{
			Type: typ, Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
			Selector: map[string]string{"app": name},
		}}
		if typ == corev1.ServiceTypeLoadBalancer {
			svc.Spec.AllocateLoadBalancerNodePorts = new(false)
		}
		got, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("Service %s/%s: %v", ns, name, err)
		}
		if typ == corev1.ServiceTypeLoadBalancer {
			got.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: s.lb, IPMode: new(corev1.LoadBalancerIPModeVIP)}}
			if _, err := cs.CoreV1().Services(ns).UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		s.slice(t, ns, name, true)
	}
	mk("app", corev1.ServiceTypeClusterIP)
	mk("lb", corev1.ServiceTypeLoadBalancer)
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"app": "shop"}}, Spec: networkingv1.IngressSpec{
		Rules: []networkingv1.IngressRule{{Host: "shop." + strings.TrimSuffix(zone, "."), IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: new(networkingv1.PathTypePrefix), Backend: networkingv1.IngressBackend{
				Service: &networkingv1.IngressServiceBackend{Name: "app", Port: networkingv1.ServiceBackendPort{Number: 80}}}}},
		}}}},
	}}
	got, err := cs.NetworkingV1().Ingresses(ns).Create(ctx, ing, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: s.lb}}
	if _, err := cs.NetworkingV1().Ingresses(ns).UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// slice writes Service ns/svc's EndpointSlice with one endpoint, ready or not,
// as the EndpointSlice controller labels it (the address is data).
func (s *site) slice(t *testing.T, ns, svc string, ready bool) {
	t.Helper()
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: svc + "-1", Labels: map[string]string{
			"kubernetes.io/service-name": svc, "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"198.18.0.10"},
			Conditions: discoveryv1.EndpointConditions{Ready: new(ready), Serving: new(ready), Terminating: new(false)}}},
	}
	s.k.PutEndpointSlice(t, ns, es)
}

// gslb applies a Gslb (k8gb.io) in ns named name with the spec's YAML body.
func (s *site) gslb(t *testing.T, ns, name, annotations, spec string) {
	t.Helper()
	s.k.Apply(t, fmt.Sprintf("apiVersion: k8gb.io/v1beta1\nkind: Gslb\nmetadata:\n  name: %s\n  namespace: %s\n  annotations: {%s}\nspec:\n%s", name, ns, annotations, spec))
}

// answer is what a client sees for name A at addr: the addresses sorted
// and comma separated, NODATA, or the rcode.
func answer(addr, name string, opts ...harness.QueryOption) string {
	r, err := harness.Ask(addr+":53", name, dns.TypeA, append([]harness.QueryOption{harness.Timeout(time.Second), harness.Attempts(2)}, opts...)...)
	if err != nil {
		return "error: " + err.Error()
	}
	if r.Rcode != dns.RcodeSuccess {
		return dns.RcodeToString[r.Rcode]
	}
	got := harness.Targets(r, dns.TypeA)
	if len(got) == 0 {
		return "NODATA"
	}
	slices.Sort(got)
	return strings.Join(got, ",")
}

func join(a ...string) string {
	s := slices.Clone(a)
	slices.Sort(s)
	return strings.Join(s, ",")
}

func expect(t *testing.T, addr, name, want string, opts ...harness.QueryOption) {
	t.Helper()
	testkit.Eventually(t, propagation, name+"@"+addr, func() (bool, string) {
		got := answer(addr, name, opts...)
		return got == want, fmt.Sprintf("%s A @%s = %s, want %s", name, addr, got, want)
	})
}

// twoSites starts eu and us, each in a namespace of its own (prefix-eu,
// prefix-us) of the package's API server, with the world there and a
// coredns that reads only that namespace and peers with the other. Two
// namespaces read by two processes are two independent stores, as two
// clusters' API servers would be; a second API server would cost half a
// minute of the package's run.
func twoSites(t *testing.T, prefix string) (eu, us *site) {
	t.Helper()
	k := harness.SharedKube(t)
	installGslbCRDs(t, k)
	eu = &site{tag: "eu", ns: prefix + "-eu", k: k, ip: harness.NewIP(t), lb: harness.NewIP(t)}
	us = &site{tag: "us", ns: prefix + "-us", k: k, ip: harness.NewIP(t), lb: harness.NewIP(t)}
	for _, s := range []*site{eu, us} {
		s.world(t)
	}
	eu.dns = harness.StartCoreDNS(t, eu.corefile(eu.k.Kubeconfig, map[string]string{"us": us.ip}))
	us.dns = harness.StartCoreDNS(t, us.corefile(us.k.Kubeconfig, map[string]string{"eu": eu.ip}))
	return eu, us
}

// Gslbs over an Ingress and a Service, in two clusters with stores of
// their own: failover, roundRobin, geoip and weighted answers; the
// primary's endpoints become unready and recover.
func TestGslbStrategiesAcrossTwoClusters(t *testing.T) {
	eu, us := twoSites(t, "shop")
	both := join(eu.lb, us.lb)
	host := func(h string) string { return h + "." + zone }
	for _, s := range []*site{eu, us} {
		ns := s.ns
		s.gslb(t, ns, "shop", "", "  resourceRef: {apiVersion: networking.k8s.io/v1, kind: Ingress, name: shop}\n  strategy: {type: failover, primaryGeoTag: eu, dnsTtlSeconds: 5}\n")
		s.gslb(t, ns, "rr", `k8gb.io/hostname: rr.`+strings.TrimSuffix(zone, "."), "  resourceRef: {apiVersion: v1, kind: Service, matchLabels: {app: lb}}\n  strategy: {type: roundRobin}\n")
		s.gslb(t, ns, "geo", `k8gb.io/hostname: geo.`+strings.TrimSuffix(zone, "."), "  resourceRef: {apiVersion: v1, kind: Service, name: lb}\n  strategy: {type: geoip}\n")
		s.gslb(t, ns, "w", `k8gb.io/hostname: w.`+strings.TrimSuffix(zone, "."), "  resourceRef: {apiVersion: v1, kind: Service, name: lb}\n  strategy: {type: roundRobin, weight: {eu: 0, us: 1}}\n")
	}
	start := time.Now()
	for _, s := range []*site{eu, us} {
		expect(t, s.ip, host("shop"), eu.lb)
		expect(t, s.ip, "localtargets-shop."+zone, s.lb)
		expect(t, s.ip, host("rr"), both)
		expect(t, s.ip, host("geo"), eu.lb, harness.ECS("198.18.1.0/24"))
		expect(t, s.ip, host("geo"), us.lb, harness.ECS("198.18.2.0/24"))
		expect(t, s.ip, host("w"), us.lb)
	}
	t.Logf("every answer right %v after the Gslbs were written", time.Since(start).Round(time.Millisecond))

	// The primary's backend loses its endpoints: both clusters fail over.
	eu.slice(t, eu.ns, "app", false)
	start = time.Now()
	for _, s := range []*site{eu, us} {
		expect(t, s.ip, host("shop"), us.lb)
	}
	expect(t, eu.ip, "localtargets-shop."+zone, "NODATA")
	t.Logf("failover %v after the primary's EndpointSlice became unready", time.Since(start).Round(time.Millisecond))
	eu.slice(t, eu.ns, "app", true)
	start = time.Now()
	for _, s := range []*site{eu, us} {
		expect(t, s.ip, host("shop"), eu.lb)
	}
	t.Logf("recovery %v after it became ready again", time.Since(start).Round(time.Millisecond))
}

// k8gbRole is the RBAC that fleetdns ships for k8gb's chart: a ClusterRole
// of exactly the Gslb source's reads, bound to the chart's CoreDNS
// ServiceAccount, k8gb/coredns.
const k8gbRole = "deploy/rbac/k8gb.yaml"

// shippedK8gbRole applies deploy/rbac/k8gb.yaml as it is, with the
// ServiceAccount it binds, and returns a kubeconfig with that
// ServiceAccount's token.
func shippedK8gbRole(t *testing.T, k *harness.Kube) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(harness.ModuleRoot(t), k8gbRole))
	if err != nil {
		t.Fatal(err)
	}
	k.ServiceAccountWithRules(t, "k8gb", "coredns", nil)
	k.Apply(t, string(b))
	// Its one write is an Event; it changes nothing it reads.
	for _, c := range []struct {
		group, resource, verb string
		allowed               bool
	}{
		{"", "events", "create", true},
		{"k8gb.io", "gslbs", "watch", true},
		{"k8gb.absa.oss", "gslbs", "list", true},
		{"gateway.networking.k8s.io", "udproutes", "watch", true},
		{"apiextensions.k8s.io", "customresourcedefinitions", "watch", true},
		{"k8gb.io", "gslbs", "update", false},
		{"externaldns.k8s.io", "dnsendpoints", "delete", false},
		{"", "secrets", "get", false},
		{"", "configmaps", "list", false},
	} {
		allowed := func() bool {
			r, err := k.Clientset().AuthorizationV1().SubjectAccessReviews().Create(harness.Context(t), &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: "system:serviceaccount:k8gb:coredns", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:k8gb"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "shop", Group: c.group, Resource: c.resource, Verb: c.verb},
			}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return r.Status.Allowed
		}
		// The API server's RBAC authorizer reads the just-applied role
		// through its informers: a grant may take a moment to show.
		got := allowed()
		for deadline := time.Now().Add(10 * time.Second); c.allowed && !got && time.Now().Before(deadline); got = allowed() {
			time.Sleep(100 * time.Millisecond)
		}
		if got != c.allowed {
			t.Errorf("%s: %s %s.%s allowed=%v, want %v", k8gbRole, c.verb, c.resource, c.group, got, c.allowed)
		}
	}
	return k.TokenKubeconfig(t, "k8gb", "coredns")
}

// A fleetdns cluster serving Gslbs, under the token of k8gb's CoreDNS
// ServiceAccount with the role fleetdns ships (deploy/rbac/k8gb.yaml), and a peer that answers as k8gb's
// CoreDNS does (a stock `file` zone: localtargets- records of its own
// targets, and the host answered with the set k8gb's operator computes)
// agree on every answer's target set. The operator's frozen DNSEndpoint
// for a Gslb (labelled k8gb.io/dnstype, controlled by the Gslb) never
// beats the live source.
func TestGslbAgreesWithK8gbPeer(t *testing.T) {
	ns := "agree"
	eu := &site{tag: "eu", ns: ns, k: harness.SharedKube(t), ip: harness.NewIP(t), lb: harness.NewIP(t)}
	installGslbCRDs(t, eu.k)
	eu.world(t)
	k8gbIP, k8gbLB, frozen := harness.NewIP(t), harness.NewIP(t), harness.NewIP(t)
	for _, g := range []struct{ name, strategy string }{
		{"kshop", "{type: roundRobin}"},
		{"kfo", "{type: failover, primaryGeoTag: eu}"},
		{"kfous", "{type: failover, primaryGeoTag: us}"},
	} {
		eu.gslb(t, ns, g.name, "k8gb.io/hostname: "+g.name+"."+strings.TrimSuffix(zone, "."),
			"  resourceRef: {apiVersion: v1, kind: Service, name: lb}\n  strategy: "+g.strategy+"\n")
	}
	// The operator's DNSEndpoint of Gslb shop, frozen when it stopped.
	got, err := eu.k.Dynamic().Resource(gslbGVR("k8gb.io")).Namespace(ns).Get(harness.Context(t), "kshop", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dep := harness.DNSEndpointObject(ns, "kshop", map[string]string{"k8gb.io/dnstype": "local"},
		harness.Endpoint{DNSName: "kshop." + strings.TrimSuffix(zone, "."), RecordType: "A", Targets: []string{frozen}},
		harness.Endpoint{DNSName: "localtargets-kshop." + strings.TrimSuffix(zone, "."), RecordType: "A", Targets: []string{frozen}})
	dep.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "k8gb.io/v1beta1", Kind: "Gslb", Name: "kshop", UID: got.GetUID(), Controller: new(true)}})
	eu.k.Create(t, dep)

	kubeconfig := shippedK8gbRole(t, eu.k)
	corefile := strings.Replace(eu.corefile(kubeconfig, map[string]string{"us": k8gbIP}), "resources Gslb", "resources DNSEndpoint Gslb", 1)
	eu.dns = harness.StartCoreDNS(t, corefile)

	// k8gb's CoreDNS in cluster us: what its operator writes after reading
	// eu's localtargets- (roundRobin: both; failover to eu: eu's; to us: its own).
	zoneFile := fmt.Sprintf(`$ORIGIN %[1]s
@ 30 IN SOA ns.%[1]s hostmaster.%[1]s 1 7200 1800 86400 30
@ 30 IN NS ns.%[1]s
ns 30 IN A %[2]s
localtargets-kshop 30 IN A %[3]s
localtargets-kfo 30 IN A %[3]s
localtargets-kfous 30 IN A %[3]s
kshop 30 IN A %[3]s
kshop 30 IN A %[4]s
kfo 30 IN A %[4]s
kfous 30 IN A %[3]s
`, zone, k8gbIP, k8gbLB, eu.lb)
	zonePath := filepath.Join(t.TempDir(), "zone.db")
	if err := os.WriteFile(zonePath, []byte(zoneFile), 0o644); err != nil {
		t.Fatal(err)
	}
	harness.StartCoreDNS(t, fmt.Sprintf("%s:53 {\n    bind %s\n    file %s\n}\n", zone, k8gbIP, zonePath))
	for _, h := range []string{"kshop", "kfo", "kfous"} {
		want := answer(k8gbIP, h+"."+zone)
		expect(t, eu.ip, h+"."+zone, want)
		t.Logf("%s: fleetdns and k8gb answer %s", h, want)
	}
	expect(t, eu.ip, "localtargets-kshop."+zone, eu.lb)
	if got := answer(eu.ip, "kshop."+zone); strings.Contains(got, frozen) {
		t.Errorf("the operator's frozen DNSEndpoint is served: %s", got)
	}
}
