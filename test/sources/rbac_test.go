package sources_test

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fleetdns/fleetdns/test/harness"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// sourceRules are the rules docs/architecture.md ("Sources") allows k8scrd
// with every source: read-only access to exactly the kinds, the objects a derivation reads
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

// shippedRBAC is the shipped RBAC of the GSLB servers, whose Corefile reads
// the sources: deploy/gslb/rbac.yaml, once it grants them (a rule naming
// ingresses). It returns the manifest, the ServiceAccount's namespace and
// name; "" when it does not grant the sources yet.
func shippedRBAC(t *testing.T) (manifest, ns, name string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(harness.ModuleRoot(t), "deploy", "gslb", "rbac.yaml"))
	if err != nil {
		return "", "", ""
	}
	objs, err := harness.DecodeYAML(string(b))
	if err != nil {
		t.Fatalf("deploy/gslb/rbac.yaml: %v", err)
	}
	grants := false
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceAccount":
			ns, name = o.GetNamespace(), o.GetName()
		case "Role", "ClusterRole":
			var r rbacv1.ClusterRole
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r); err != nil {
				t.Fatalf("deploy/gslb/rbac.yaml: %s %s: %v", o.GetKind(), o.GetName(), err)
			}
			for _, rule := range r.Rules {
				grants = grants || slices.Contains(rule.Resources, "ingresses")
			}
		}
	}
	if !grants || name == "" {
		return "", "", ""
	}
	return string(b), ns, name
}

// TestServiceAccountReadsEverySource runs coredns with every source under a
// ServiceAccount token (TokenRequest API) with only the permissions
// docs/architecture.md ("Sources") allows: every kind is served, health is read, and no call is forbidden.
// Once with a ClusterRole of exactly that list, once with the shipped
// deploy/gslb/rbac.yaml (namespaced Role and a ClusterRole for the
// cluster-scoped kinds) and the Corefile's `namespaces` line it goes with.
func TestServiceAccountReadsEverySource(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.installGatewayAPI(t)
	net := harness.NewNetNS(t, 16)

	t.Run("design", func(t *testing.T) {
		t.Parallel()
		ns := c.k.NewNamespace(t, "rbac")
		c.k.ServiceAccountWithRules(t, ns, "fleetdns", sourceRules)
		proveSources(t, c, ns, c.k.TokenKubeconfig(t, ns, "fleetdns"), "rbac.example.org", nil, net.Addrs[:8])
	})
	t.Run("shipped", func(t *testing.T) {
		t.Parallel()
		manifest, ns, sa := shippedRBAC(t)
		if manifest == "" {
			t.Skip("deploy/gslb/rbac.yaml does not grant the sources yet")
		}
		c.k.EnsureNamespace(t, ns)
		c.k.Apply(t, manifest)
		proveSources(t, c, ns, c.k.TokenKubeconfig(t, ns, sa), "shipped.example.org", []string{"namespaces " + ns}, net.Addrs[8:])
	})
}

// proveSources creates one object of every kind in ns with hosts under
// zone, starts coredns with kubeconfig, and checks that each is served and
// its health read, with no forbidden call in the log.
func proveSources(t *testing.T, c *cluster, ns, kubeconfig, zone string, stanza []string, addrs []netip.Addr) {
	a := func(i int) string { return addrs[i].String() }
	h := func(label string) string { return label + "." + zone }
	p := ns + "-" // names unique in a namespace another run may share
	c.k.CreateDNSEndpoint(t, ns, p+"dep", nil, harness.Endpoint{DNSName: h("dep"), RecordType: "A", Targets: []string{a(0)}})
	c.backend(t, ns, p+"web")
	c.slice(t, ns, p+"web", p+"web-1", ready(a(7)))
	c.createIngress(t, ns, p+"ing", ingress{class: "rbac-test", rules: []rule{{h("ing"), p + "web"}}})
	c.ingressStatus(t, ns, p+"ing", a(1))
	c.k.LoadBalancer(t, ns, p+"lb", h("lb"))
	c.k.LoadBalancerStatus(t, ns, p+"lb", a(2))
	c.gateway(t, ns, p+"gw", "rbac-test", []listener{
		{name: "http", protocol: "HTTP", port: 80},
		{name: "tls", protocol: "TLS", port: 443, hostname: h("tls")},
	}, a(3))
	for _, r := range []struct{ kind, host, section string }{
		{"HTTPRoute", h("http"), "http"},
		{"GRPCRoute", h("grpc"), "http"},
		{"TLSRoute", h("tls"), "tls"},
	} {
		name := p + strings.ToLower(r.kind)
		c.createRoute(t, r.kind, ns, name, route{gateway: p + "gw", section: r.section, hostnames: []string{r.host}, backend: p + "web"})
		c.routeStatus(t, r.kind, ns, name, p+"gw", true, 0)
	}

	srv := startSources(t, zone, kubeconfig, append([]string{
		"resources " + allKinds,
		"ingress_class rbac-test",
		"gateway_class rbac-test",
	}, stanza...), true)
	expectA(t, srv.Addr, h("dep"), a(0))
	expectA(t, srv.Addr, h("ing"), a(1))
	expectA(t, srv.Addr, h("lb"), a(2))
	expectA(t, srv.Addr, h("http"), a(3))
	expectA(t, srv.Addr, h("grpc"), a(3))
	expectA(t, srv.Addr, h("tls"), a(3))
	// EndpointSlices are read: the Ingress's backend is ready, the Service's is not.
	expectA(t, srv.Addr, "localtargets-"+h("ing"), a(1))
	expectA(t, srv.Addr, "localtargets-"+h("http"), a(3))
	expectA(t, srv.Addr, "localtargets-"+h("lb"), "NODATA")
	// A change after the first sync reaches it through the watches.
	c.slice(t, ns, p+"lb", p+"lb-1", ready(a(6)))
	expectA(t, srv.Addr, "localtargets-"+h("lb"), a(2))
	if f := harness.Forbidden(srv.Log()); len(f) > 0 {
		t.Errorf("the role is not enough, the log shows a forbidden call:\n%s", srv.Log())
	}
}
