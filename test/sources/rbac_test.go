package sources_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fleetdns/fleetdns/test/harness"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// sourceRules are the rules DESIGN.md allows k8scrd with every source:
// read-only access to exactly the kinds, the objects a derivation reads
// (IngressClasses, Services, EndpointSlices, Gateways), the CRDs (to notice
// kinds installed later), and create on Events, its one write.
var sourceRules = []rbacv1.PolicyRule{
	{APIGroups: []string{"externaldns.k8s.io"}, Resources: []string{"dnsendpoints"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingresses", "ingressclasses"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{"gateway.networking.k8s.io"}, Resources: []string{"gateways", "httproutes", "grpcroutes", "tlsroutes"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}},
}

// shippedSourceRules returns the rules of the shipped ClusterRole that
// grants the sources (the one of deploy/rbac that names ingresses), and its
// name; nil when deploy/rbac has none yet.
func shippedSourceRules(t *testing.T) ([]rbacv1.PolicyRule, string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(harness.ModuleRoot(t), "deploy", "rbac", "*.yaml"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := harness.DecodeYAML(string(b))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, o := range objs {
			if o.GetKind() != "ClusterRole" {
				continue
			}
			var cr rbacv1.ClusterRole
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &cr); err != nil {
				t.Fatalf("%s: ClusterRole %s: %v", f, o.GetName(), err)
			}
			for _, r := range cr.Rules {
				if slices.Contains(r.Resources, "ingresses") {
					return cr.Rules, filepath.Base(f) + " ClusterRole " + cr.Name
				}
			}
		}
	}
	return nil, ""
}

// TestServiceAccountReadsEverySource runs coredns with every source under a
// ServiceAccount token (TokenRequest API) whose ClusterRole is the shipped
// one for the sources (or, until deploy/rbac has one, exactly DESIGN.md's
// list): every kind is served, health is read, and no call is forbidden.
func TestServiceAccountReadsEverySource(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.installGatewayAPI(t)
	rules, from := shippedSourceRules(t)
	if rules == nil {
		rules, from = sourceRules, "DESIGN.md's list (deploy/rbac has no ClusterRole for the sources)"
	}
	t.Logf("rules: %s", from)
	net := harness.NewNetNS(t, 8)
	ns := c.k.NewNamespace(t, "rbac")
	c.k.ServiceAccountWithRules(t, ns, "fleetdns", rules)
	kubeconfig := c.k.TokenKubeconfig(t, ns, "fleetdns")

	c.k.CreateDNSEndpoint(t, ns, "dep", nil, harness.Endpoint{DNSName: "dep.rbac.example.org", RecordType: "A", Targets: []string{net.Addr(0)}})
	c.backend(t, ns, "web")
	c.slice(t, ns, "web", "web-1", ready(net.Addr(7)))
	c.createIngress(t, ns, "ing", ingress{class: "rbac-test", rules: []rule{{"ing.rbac.example.org", "web"}}})
	c.ingressStatus(t, ns, "ing", net.Addr(1))
	c.loadBalancer(t, ns, "lb", "lb.rbac.example.org")
	c.lbStatus(t, ns, "lb", net.Addr(2))
	c.gateway(t, ns, "gw", "rbac-test", []listener{
		{name: "http", protocol: "HTTP", port: 80},
		{name: "tls", protocol: "TLS", port: 443, hostname: "tls.rbac.example.org"},
	}, net.Addr(3))
	for _, r := range []struct{ kind, host, section string }{
		{"HTTPRoute", "http.rbac.example.org", "http"},
		{"GRPCRoute", "grpc.rbac.example.org", "http"},
		{"TLSRoute", "tls.rbac.example.org", "tls"},
	} {
		name := strings.ToLower(r.kind)
		c.createRoute(t, r.kind, ns, name, route{gateway: "gw", section: r.section, hostnames: []string{r.host}, backend: "web"})
		c.routeStatus(t, r.kind, ns, name, "gw", true, 0)
	}

	srv := startSources(t, "rbac.example.org", kubeconfig, []string{
		"resources " + allKinds,
		"ingress_class rbac-test",
		"gateway_class rbac-test",
	}, true)
	expectA(t, srv.Addr, "dep.rbac.example.org", net.Addr(0))
	expectA(t, srv.Addr, "ing.rbac.example.org", net.Addr(1))
	expectA(t, srv.Addr, "lb.rbac.example.org", net.Addr(2))
	expectA(t, srv.Addr, "http.rbac.example.org", net.Addr(3))
	expectA(t, srv.Addr, "grpc.rbac.example.org", net.Addr(3))
	expectA(t, srv.Addr, "tls.rbac.example.org", net.Addr(3))
	// EndpointSlices are read: the Ingress's backend is ready, the Service's is not.
	expectA(t, srv.Addr, "localtargets-ing.rbac.example.org", net.Addr(1))
	expectA(t, srv.Addr, "localtargets-http.rbac.example.org", net.Addr(3))
	expectA(t, srv.Addr, "localtargets-lb.rbac.example.org", "NODATA")
	// A change after the first sync reaches it through the watches.
	c.slice(t, ns, "lb", "lb-1", ready(net.Addr(6)))
	expectA(t, srv.Addr, "localtargets-lb.rbac.example.org", net.Addr(2))
	if l := strings.ToLower(srv.Log()); strings.Contains(l, "forbidden") {
		t.Errorf("the role is not enough, the log shows a forbidden call:\n%s", srv.Log())
	}
}
