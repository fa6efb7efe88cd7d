// Package harness holds what every fleetdns end-to-end test needs: the built
// coredns binary, real processes started from a Corefile with their logs
// captured, loopback addresses that do not collide between test packages
// running in parallel, DNS queries over real sockets (miekg/dns and the real
// dig/kdig), and a real kube-apiserver + etcd.
//
// A part that is not installed (the binary, the Kubernetes binaries, a Debian
// tool) skips the test, unless FLEETDNS_REQUIRE_ALL=1, where it fails it.
//
//	func TestAnswers(t *testing.T) {
//		ip := harness.NewIP(t)
//		srv := harness.StartCoreDNS(t, fmt.Sprintf(`example.org:53 {
//		    bind %s
//		    file db.example.org
//		}`, ip), harness.WithFile("db.example.org", zone))
//		m := harness.Exchange(t, srv.Addr, "www.example.org.", dns.TypeA)
//		...
//	}
//
// A real Kubernetes API server, one per test package:
//
//	func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }
//
//	func TestServes(t *testing.T) {
//		k := harness.SharedKube(t)            // kube-apiserver + etcd, CRD installed
//		ns := k.NewNamespace(t, "serves")     // deleted at the end
//		k.CreateDNSEndpoint(t, ns, "www", nil, harness.Endpoint{
//			DNSName: "www.example.org", RecordType: "A", Targets: []string{"192.0.2.1"}})
//		// k.Kubeconfig is an admin kubeconfig; for RBAC tests:
//		k.ServiceAccountWithRules(t, ns, "fleetdns", harness.DNSEndpointReaderRules)
//		kubeconfig := k.TokenKubeconfig(t, ns, "fleetdns")
//		...
//	}
//
// k.Apply / TryApply server-side apply any multi-document manifest (DryRun
// for dry-run=server), k.Kubectl runs kubectl, and StopAPIServer,
// StartAPIServer, StopEtcd, StartEtcd (or a private StartKube(t)) make
// faults. StartNSD runs Debian's nsd as a reference authoritative server;
// StartKnot and StartKnotWith (keys, ACLs) run knotd, StartBIND named (with
// TSIG keys and update policies: a parent that takes RFC 2136 UPDATEs).
package harness
