package k8scrd_test

import (
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/test/harness"
	"github.com/miekg/dns"
	rbacv1 "k8s.io/api/rbac/v1"
)

// TestServiceAccountWithReadOnlyRole runs coredns with a ServiceAccount
// token (TokenRequest API) whose ClusterRole allows only get, list and watch
// on dnsendpoints: it serves, and changes reach it.
func TestServiceAccountWithReadOnlyRole(t *testing.T) {
	k := harness.SharedKube(t)
	ns := k.NewNamespace(t, "rbac")
	k.CreateDNSEndpoint(t, ns, "www", nil, a("www.rbac.example", "192.0.2.1"))
	k.ServiceAccountWithRules(t, ns, "fleetdns", harness.DNSEndpointReaderRules)
	kubeconfig := k.TokenKubeconfig(t, ns, "fleetdns")

	srv := startK8sCRD(t, "rbac.example.", source{kubeconfig: kubeconfig}, nil, nil, true)
	waitA(t, srv.Addr, "www.rbac.example", "192.0.2.1", propagationBound)
	k.SetDNSEndpoints(t, ns, "www", a("www.rbac.example", "192.0.2.2"))
	waitA(t, srv.Addr, "www.rbac.example", "192.0.2.2", propagationBound)
	k.CreateDNSEndpoint(t, ns, "api", nil, a("api.rbac.example", "192.0.2.3"))
	waitA(t, srv.Addr, "api.rbac.example", "192.0.2.3", propagationBound)
	if f := harness.Forbidden(srv.Log()); len(f) > 0 {
		t.Errorf("the read-only role is not enough, the log shows a forbidden call:\n%s", srv.Log())
	}
}

// TestServiceAccountWithoutRoleIsNotReady is the control: the same token
// without the dnsendpoints rule (only an unrelated rule) is refused by RBAC;
// k8scrd says so in its log, stays unready and answers SERVFAIL, never an
// authoritative NXDOMAIN.
func TestServiceAccountWithoutRoleIsNotReady(t *testing.T) {
	k := harness.SharedKube(t)
	ns := k.NewNamespace(t, "norbac")
	k.CreateDNSEndpoint(t, ns, "www", nil, a("www.norbac.example", "192.0.2.1"))
	k.ServiceAccountWithRules(t, ns, "fleetdns", []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"},
	}})
	kubeconfig := k.TokenKubeconfig(t, ns, "fleetdns")

	srv := startK8sCRD(t, "norbac.example.", source{kubeconfig: kubeconfig}, nil, nil, false)
	if !srv.WaitLog("forbidden", 30*time.Second) {
		t.Errorf("no log line says the list was forbidden:\n%s", srv.Log())
	}
	r := harness.Exchange(t, srv.Addr, "www.norbac.example", dns.TypeA, harness.NoRD)
	if r.Rcode != dns.RcodeServerFailure {
		t.Errorf("without the permission to list: rcode %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}
	if ok, _ := httpStatus(srv.ReadyURL); ok {
		t.Errorf("ready without a first sync")
	}
}
