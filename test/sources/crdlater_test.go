package sources_test

import (
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/test/harness"
	"github.com/miekg/dns"
)

// TestGatewayAPIInstalledLater starts coredns with the Gateway API kinds
// among its resources before their CRDs exist: it serves what exists (a
// DNSEndpoint), and once the CRDs are installed and established, routes are
// served without a restart, within a minute (docs/architecture.md, "Sources").
//
// It is the one test of the package that does not run in parallel: the
// others install the CRDs, and a parallel test runs only after every
// sequential one has finished.
func TestGatewayAPIInstalledLater(t *testing.T) {
	c := newCluster(t)
	gatewayAPI.mu.Lock()
	defer gatewayAPI.mu.Unlock()
	if c.k.GatewayAPIInstalled(t) {
		c.k.UninstallGatewayAPI(t)
	}
	gatewayAPI.installed = false
	net := harness.NewNetNS(t, 2)
	ns := c.k.NewNamespace(t, "late")

	srv := startSources(t, "late.example.org", c.k.Kubeconfig, []string{"resources DNSEndpoint HTTPRoute GRPCRoute TLSRoute"}, true)
	c.k.CreateDNSEndpoint(t, ns, "dep", nil, harness.Endpoint{DNSName: "dep.late.example.org", RecordType: "A", Targets: []string{net.Addr(0)}})
	expectA(t, srv.Addr, "dep.late.example.org", net.Addr(0))

	established := c.k.InstallGatewayAPI(t)
	gatewayAPI.installed = true
	c.gateway(t, ns, "gw", "fleet", []listener{
		{name: "http", protocol: "HTTP", port: 80},
		{name: "tls", protocol: "TLS", port: 443, hostname: "tls.late.example.org"},
	}, net.Addr(1))
	c.backend(t, ns, "web")
	c.createRoute(t, "HTTPRoute", ns, "web", route{gateway: "gw", section: "http", hostnames: []string{"www.late.example.org"}, backend: "web"})
	c.routeStatus(t, "HTTPRoute", ns, "web", "gw", true, 0)
	c.createRoute(t, "TLSRoute", ns, "tls", route{gateway: "gw", section: "tls", hostnames: []string{"tls.late.example.org"}, backend: "web"})
	c.routeStatus(t, "TLSRoute", ns, "tls", "gw", true, 0)

	// A minute from establishment, plus what the polls cost.
	deadline := time.Minute + 5*time.Second - time.Since(established)
	expect(t, srv.Addr, "www.late.example.org", dns.TypeA, net.Addr(1), deadline)
	expect(t, srv.Addr, "tls.late.example.org", dns.TypeA, net.Addr(1), time.Minute+5*time.Second-time.Since(established))
	t.Logf("routes served %v after the CRDs were established", time.Since(established).Round(10*time.Millisecond))
	if !srv.Running() {
		t.Fatal("coredns exited")
	}
	expectA(t, srv.Addr, "dep.late.example.org", net.Addr(0))
}
