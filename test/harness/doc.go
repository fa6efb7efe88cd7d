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
package harness
