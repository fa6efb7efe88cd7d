package sources_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/test/harness"
	"github.com/miekg/dns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSources creates, through the API, the Ingresses, LoadBalancer
// Services, Gateways and routes of every row of the sources table of
// docs/architecture.md ("Sources") and checks each row's answers over real sockets. Two coredns processes
// share the API server and the objects: "all" serves every kind with no
// class filter (and `localtargets`, and a `resolver` that is a third coredns
// serving the load balancers' names), "filtered" keeps only the fleet
// IngressClass and GatewayClass. The subtests run in parallel; each owns its
// objects and host names.
func TestSources(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.installGatewayAPI(t)
	net := harness.NewNetNS(t, 24)
	ns := c.k.NewNamespace(t, "sources")
	// Cluster-scoped: the classes every Ingress of this test is judged by.
	// None is the default yet: the API server's DefaultIngressClass
	// admission writes the default class into an Ingress created without
	// one, and the ingress-class subtest needs one that stays without.
	c.ingressClass(t, "fleet", false)
	c.ingressClass(t, "other", false)

	// The upstream that resolves load balancers' host names: a coredns
	// from the same binary serving lb.upstream.test with `hosts`.
	up := harness.NewIP(t)
	harness.StartCoreDNS(t, fmt.Sprintf(`lb.upstream.test {
    bind %s
    hosts {
        %s lb1.lb.upstream.test
        ttl 5
    }
}
`, up, net.Addr(20)), harness.WithProbe("lb1.lb.upstream.test", dns.TypeA))

	all := startSources(t, "example.org", c.k.Kubeconfig, []string{
		"resources " + allKinds,
		"resolver " + up + ":53",
	}, true)
	filtered := startSources(t, "example.org", c.k.Kubeconfig, []string{
		"resources " + allKinds,
		"ingress_class fleet",
		"gateway_class fleet",
	}, true)

	t.Run("ingress", func(t *testing.T) {
		t.Parallel()
		c.backend(t, ns, "web")
		c.createIngress(t, ns, "web", ingress{rules: []rule{
			{"www.ing.example.org", "web"},
			{"api.ing.example.org", "web"},
			{"www.outside.test", "web"}, // outside every zone: ignored, no log line
		}})
		c.ingressStatus(t, ns, "web", net.Addr(0), net.Addr(1))
		want := join(net.Addr(0), net.Addr(1))
		expectA(t, all.Addr, "www.ing.example.org", want)
		expectA(t, all.Addr, "api.ing.example.org", want)
		if got := harness.DigShort(t, all.Addr, "www.ing.example.org", "A", "+norec"); strings.Join(got, ",") != want {
			t.Errorf("dig www.ing.example.org A = %v, want %s", got, want)
		}
		if got := answer(all.Addr, "nothing.ing.example.org", dns.TypeA); got != "NXDOMAIN" {
			t.Errorf("an undeclared host: %s, want NXDOMAIN", got)
		}
		if got := answer(all.Addr, "www.outside.test", dns.TypeA); got != "REFUSED" {
			t.Errorf("the host outside the zone: %s, want REFUSED (not served)", got)
		}
		if strings.Contains(all.Log(), "outside.test") {
			t.Errorf("the host outside the zone was logged:\n%s", all.Log())
		}
		// The Ingress's hosts follow its status: a new address replaces the old.
		c.ingressStatus(t, ns, "web", net.Addr(2))
		expectA(t, all.Addr, "www.ing.example.org", net.Addr(2))
	})

	t.Run("wildcard", func(t *testing.T) {
		t.Parallel()
		c.backend(t, ns, "shop")
		c.createIngress(t, ns, "shop", ingress{rules: []rule{{"*.shop.example.org", "shop"}}})
		c.ingressStatus(t, ns, "shop", net.Addr(3))
		expectA(t, all.Addr, "a.shop.example.org", net.Addr(3))
		expectA(t, all.Addr, "b.shop.example.org", net.Addr(3))
		if got := answer(all.Addr, "shop.example.org", dns.TypeA); got != "NODATA" {
			t.Errorf("the wildcard's parent: %s, want NODATA (an empty non-terminal)", got)
		}
	})

	t.Run("service", func(t *testing.T) {
		t.Parallel()
		// external-dns's comma list, with a space.
		c.k.LoadBalancer(t, ns, "lb", "lb1.svc.example.org, lb2.svc.example.org")
		c.k.LoadBalancerStatus(t, ns, "lb", net.Addr(4))
		expectA(t, all.Addr, "lb1.svc.example.org", net.Addr(4))
		expectA(t, all.Addr, "lb2.svc.example.org", net.Addr(4))
		// A Service is not an Ingress: the ingress_class filter leaves it alone.
		expectA(t, filtered.Addr, "lb1.svc.example.org", net.Addr(4))
		// The load balancer's readiness is its Service's endpoints.
		c.slice(t, ns, "lb", "lb-abcde", ready(net.Addr(10)))
		expectA(t, all.Addr, "localtargets-lb1.svc.example.org", net.Addr(4))
	})

	t.Run("pending", func(t *testing.T) {
		t.Parallel()
		// No status yet: the host is declared, it has no targets.
		c.k.LoadBalancer(t, ns, "pending", "pending.svc2.example.org")
		c.backend(t, ns, "pending-ing")
		c.createIngress(t, ns, "pending", ingress{rules: []rule{{"pending.ing2.example.org", "pending-ing"}}})
		expectA(t, all.Addr, "pending.svc2.example.org", "NODATA")
		expectA(t, all.Addr, "pending.ing2.example.org", "NODATA")
		if got := answer(all.Addr, "other.svc2.example.org", dns.TypeA); got != "NXDOMAIN" {
			t.Errorf("an undeclared host beside it: %s, want NXDOMAIN", got)
		}
		// Once the load balancer is provisioned, the address is served.
		c.k.LoadBalancerStatus(t, ns, "pending", net.Addr(5))
		expectA(t, all.Addr, "pending.svc2.example.org", net.Addr(5))
	})

	t.Run("tls-only", func(t *testing.T) {
		t.Parallel()
		c.backend(t, ns, "app")
		c.backend(t, ns, "fallback")
		c.createIngress(t, ns, "tls", ingress{
			rules:          []rule{{"app.tls.example.org", "app"}},
			tls:            [][]string{{"app.tls.example.org", "alt.tls.example.org"}},
			defaultBackend: "fallback",
		})
		c.createIngress(t, ns, "tls-nodefault", ingress{
			rules: []rule{{"other.tls.example.org", "app"}},
			tls:   [][]string{{"other.tls.example.org", "lonely.tls.example.org"}},
		})
		c.ingressStatus(t, ns, "tls", net.Addr(6))
		c.ingressStatus(t, ns, "tls-nodefault", net.Addr(7))
		c.slice(t, ns, "app", "app-1", ready(net.Addr(11)))
		c.slice(t, ns, "fallback", "fallback-1", ready(net.Addr(12)))
		expectA(t, all.Addr, "alt.tls.example.org", net.Addr(6))
		expectA(t, all.Addr, "other.tls.example.org", net.Addr(7))
		if got := answer(all.Addr, "lonely.tls.example.org", dns.TypeA); got != "NXDOMAIN" {
			t.Errorf("a TLS host without a rule or a default backend: %s, want NXDOMAIN (not served)", got)
		}
		// The TLS-only host's health is the default backend's.
		expectA(t, all.Addr, "localtargets-alt.tls.example.org", net.Addr(6))
		c.slice(t, ns, "fallback", "fallback-1", unready(net.Addr(12)))
		expectA(t, all.Addr, "localtargets-alt.tls.example.org", "NODATA")
		expectA(t, all.Addr, "localtargets-app.tls.example.org", net.Addr(6))
		expectA(t, all.Addr, "alt.tls.example.org", net.Addr(6))
	})

	t.Run("ingress-class", func(t *testing.T) {
		t.Parallel()
		c.backend(t, ns, "cls")
		for _, x := range []struct {
			name string
			in   ingress
		}{
			{"byname", ingress{class: "fleet"}},
			{"othername", ingress{class: "other"}},
			{"byannotation", ingress{annotations: map[string]string{"kubernetes.io/ingress.class": "fleet"}}},
			{"otherannotation", ingress{annotations: map[string]string{"kubernetes.io/ingress.class": "other"}}},
			{"bydefault", ingress{}},
		} {
			x.in.rules = []rule{{x.name + ".cls.example.org", "cls"}}
			c.createIngress(t, ns, "cls-"+x.name, x.in)
			c.ingressStatus(t, ns, "cls-"+x.name, net.Addr(8))
		}
		for _, host := range []string{"byname", "othername", "byannotation", "otherannotation", "bydefault"} {
			expectA(t, all.Addr, host+".cls.example.org", net.Addr(8)) // no filter: every class
		}
		expectA(t, filtered.Addr, "byname.cls.example.org", net.Addr(8))
		expectA(t, filtered.Addr, "byannotation.cls.example.org", net.Addr(8))
		for _, host := range []string{"othername", "otherannotation", "bydefault"} {
			if got := answer(filtered.Addr, host+".cls.example.org", dns.TypeA); got != "NXDOMAIN" {
				t.Errorf("ingress_class fleet, an Ingress not of class fleet: %s %s, want NXDOMAIN", host, got)
			}
		}
		// An Ingress without a class takes the default IngressClass's, when
		// one is marked later (admission only fills in new Ingresses) ...
		if ing, err := c.cs.NetworkingV1().Ingresses(ns).Get(harness.Context(t), "cls-bydefault", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		} else if ing.Spec.IngressClassName != nil {
			t.Fatalf("the Ingress without a class has ingressClassName %q", *ing.Spec.IngressClassName)
		}
		c.ingressClass(t, "fleet", true)
		expectA(t, filtered.Addr, "bydefault.cls.example.org", net.Addr(8))
		// ... and goes with it when the default moves.
		c.ingressClass(t, "fleet", false)
		c.ingressClass(t, "other", true)
		expectA(t, filtered.Addr, "bydefault.cls.example.org", "NXDOMAIN")
		expectA(t, filtered.Addr, "byname.cls.example.org", net.Addr(8))
	})

	t.Run("health", func(t *testing.T) {
		t.Parallel()
		for _, s := range []string{"h", "u", "t", "n"} {
			c.backend(t, ns, "health-"+s)
			c.createIngress(t, ns, "health-"+s, ingress{rules: []rule{{s + ".health.example.org", "health-" + s}}})
			c.ingressStatus(t, ns, "health-"+s, net.Addr(9))
		}
		c.slice(t, ns, "health-h", "health-h-1", ready(net.Addr(13)), unready(net.Addr(14)))
		// ready unset counts as ready (the API's rule) ...
		c.slice(t, ns, "health-u", "health-u-1", ep{addr: net.Addr(15)})
		// ... a terminating endpoint does not, even while it is still ready.
		c.slice(t, ns, "health-t", "health-t-1", ep{addr: net.Addr(16), ready: new(true), terminating: new(true)})
		// health-n has no EndpointSlice at all.
		expectA(t, all.Addr, "localtargets-h.health.example.org", net.Addr(9))
		expectA(t, all.Addr, "localtargets-u.health.example.org", net.Addr(9))
		expectA(t, all.Addr, "localtargets-t.health.example.org", "NODATA")
		expectA(t, all.Addr, "localtargets-n.health.example.org", "NODATA")
		for _, s := range []string{"t", "n"} {
			// Health withdraws targets from localtargets- only: the plain answer keeps the status address.
			expectA(t, all.Addr, s+".health.example.org", net.Addr(9))
		}

		// Every backend goes unready: localtargets- is NODATA within a second, the plain answer stays.
		c.slice(t, ns, "health-h", "health-h-1", unready(net.Addr(13)), unready(net.Addr(14)))
		took := expect(t, all.Addr, "localtargets-h.health.example.org", dns.TypeA, "NODATA", propagation)
		if got := answer(all.Addr, "h.health.example.org", dns.TypeA); got != net.Addr(9) {
			t.Errorf("the plain answer of an unready host: %s, want the status address %s", got, net.Addr(9))
		}
		t.Logf("unready reached localtargets- in %v", took)
		if took > time.Second+200*time.Millisecond {
			t.Errorf("unready took %v to reach localtargets-, want about a second at most", took)
		}
		// And back.
		c.slice(t, ns, "health-h", "health-h-1", unready(net.Addr(13)), ready(net.Addr(14)))
		took = expect(t, all.Addr, "localtargets-h.health.example.org", dns.TypeA, net.Addr(9), propagation)
		t.Logf("ready reached localtargets- in %v", took)
		if took > time.Second+200*time.Millisecond {
			t.Errorf("ready took %v to reach localtargets-, want about a second at most", took)
		}
		// A second slice of the same Service counts too.
		c.slice(t, ns, "health-n", "health-n-2", ready(net.Addr(17)))
		expectA(t, all.Addr, "localtargets-n.health.example.org", net.Addr(9))
	})

	t.Run("resolver", func(t *testing.T) {
		t.Parallel()
		c.backend(t, ns, "res")
		c.createIngress(t, ns, "res", ingress{rules: []rule{{"r.res.example.org", "res"}}})
		c.ingressStatus(t, ns, "res", "lb1.lb.upstream.test")
		c.slice(t, ns, "res", "res-1", ready(net.Addr(18)))
		// localtargets- carries addresses only: the name resolved by the upstream.
		expectA(t, all.Addr, "localtargets-r.res.example.org", net.Addr(20))
		// The plain zone's answer is the address, or an alias to the load balancer's name.
		got := answer(all.Addr, "r.res.example.org", dns.TypeA)
		if got != net.Addr(20) && !strings.HasPrefix(got, "CNAME lb1.lb.upstream.test.") {
			t.Errorf("r.res.example.org A = %s, want %s or a CNAME to lb1.lb.upstream.test.", got, net.Addr(20))
		}
	})

	t.Run("routes", func(t *testing.T) {
		t.Parallel()
		c.gateway(t, ns, "gw", "fleet", []listener{
			{name: "http", protocol: "HTTP", port: 80, hostname: "*.gw.example.org"},
			{name: "wild", protocol: "HTTP", port: 8080, hostname: "*.any.example.org"},
			{name: "tls", protocol: "TLS", port: 443, hostname: "*.gw.example.org"},
		}, net.Addr(21))
		c.gateway(t, ns, "gw-other", "other", []listener{
			{name: "http", protocol: "HTTP", port: 80},
		}, net.Addr(22))
		c.backend(t, ns, "route-web")
		c.slice(t, ns, "route-web", "route-web-1", ready(net.Addr(19)))

		type r struct {
			kind, name string
			route
			accepted *bool // nil: no status at all
		}
		for _, x := range []r{
			{"HTTPRoute", "web", route{gateway: "gw", hostnames: []string{"a.gw.example.org", "b.elsewhere.example.org"}, backend: "route-web"}, new(true)},
			{"HTTPRoute", "nohost", route{gateway: "gw", section: "wild", backend: "route-web"}, new(true)},
			{"HTTPRoute", "rejected", route{gateway: "gw", hostnames: []string{"rejected.gw.example.org"}, backend: "route-web"}, new(false)},
			{"HTTPRoute", "nostatus", route{gateway: "gw", hostnames: []string{"nostatus.gw.example.org"}, backend: "route-web"}, nil},
			{"GRPCRoute", "grpc", route{gateway: "gw", section: "http", hostnames: []string{"grpc.gw.example.org"}, backend: "route-web"}, new(true)},
			{"TLSRoute", "tls", route{gateway: "gw", section: "tls", hostnames: []string{"tls.gw.example.org"}, backend: "route-web"}, new(true)},
			{"HTTPRoute", "oc", route{gateway: "gw-other", hostnames: []string{"oc.gwo.example.org"}, backend: "route-web"}, new(true)},
			{"HTTPRoute", "stale", route{gateway: "gw", hostnames: []string{"stale.gw.example.org"}, backend: "route-web"}, new(true)},
		} {
			c.createRoute(t, x.kind, ns, x.name, x.route)
			if x.accepted != nil {
				c.routeStatus(t, x.kind, ns, x.name, x.gateway, *x.accepted, 0)
			}
		}
		gw := net.Addr(21)
		expectA(t, all.Addr, "a.gw.example.org", gw)
		expectA(t, all.Addr, "grpc.gw.example.org", gw)
		expectA(t, all.Addr, "tls.gw.example.org", gw)
		expectA(t, all.Addr, "stale.gw.example.org", gw)
		// No hostnames: the listener's, a wildcard.
		expectA(t, all.Addr, "x.any.example.org", gw)
		// A hostname that no listener's hostname matches is not the route's.
		if got := answer(all.Addr, "b.elsewhere.example.org", dns.TypeA); got != "NXDOMAIN" {
			t.Errorf("a route hostname outside the listener's: %s, want NXDOMAIN", got)
		}
		for _, h := range []string{"rejected.gw.example.org", "nostatus.gw.example.org"} {
			if got := answer(all.Addr, h, dns.TypeA); got != "NXDOMAIN" {
				t.Errorf("a route its parent did not accept: %s %s, want NXDOMAIN", h, got)
			}
		}
		// The route's health is its backendRefs' endpoints.
		expectA(t, all.Addr, "localtargets-a.gw.example.org", gw)
		// gateway_class: a route on a Gateway of another class.
		expectA(t, all.Addr, "oc.gwo.example.org", net.Addr(22))
		expectA(t, filtered.Addr, "a.gw.example.org", gw)
		if got := answer(filtered.Addr, "oc.gwo.example.org", dns.TypeA); got != "NXDOMAIN" {
			t.Errorf("gateway_class fleet, a route on a Gateway of class other: %s, want NXDOMAIN", got)
		}

		// Accepted is judged at the route's current generation: a spec
		// change that no controller has accepted yet declares nothing ...
		gen := c.updateRoute(t, "HTTPRoute", ns, "stale", route{gateway: "gw", hostnames: []string{"stale.gw.example.org", "stale2.gw.example.org"}, backend: "route-web"})
		if gen < 2 {
			t.Fatalf("generation %d after a spec change", gen)
		}
		expectA(t, all.Addr, "stale.gw.example.org", "NXDOMAIN")
		if got := answer(all.Addr, "stale2.gw.example.org", dns.TypeA); got != "NXDOMAIN" {
			t.Errorf("a hostname not yet accepted: %s, want NXDOMAIN", got)
		}
		// ... until the parent accepts the new generation.
		c.routeStatus(t, "HTTPRoute", ns, "stale", "gw", true, gen)
		expectA(t, all.Addr, "stale.gw.example.org", gw)
		expectA(t, all.Addr, "stale2.gw.example.org", gw)
		// An accepted route that is rejected later withdraws its hosts.
		c.routeStatus(t, "GRPCRoute", ns, "grpc", "gw", false, 0)
		expectA(t, all.Addr, "grpc.gw.example.org", "NXDOMAIN")
	})

	t.Cleanup(func() {
		for _, s := range []*server{all, filtered} {
			if len(harness.Forbidden(s.Log())) > 0 || strings.Contains(strings.ToLower(s.Log()), "panic") {
				t.Errorf("coredns log:\n%s", s.Log())
			}
		}
	})
}
