package hostile_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"
	"github.com/miekg/dns"
)

var gslbCRDOnce sync.Once

// installGslbCRD installs the Gslb CRD (k8gb.io) that fleetdns ships.
func installGslbCRD(t *testing.T, k *harness.Kube) {
	gslbCRDOnce.Do(func() {
		b, err := os.ReadFile(filepath.Join(harness.ModuleRoot(t), "deploy/crd/gslbs.k8gb.io.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		k.Apply(t, string(b))
		k.WaitCRDEstablished(t, "gslbs.k8gb.io")
	})
}

// TestHostileExposedHostnamesAreBounded is issue 24's findings 1 and 2: a
// tenant's Gslb lists 1,000 names in k8gb.io/exposed-hostnames, each
// answered by the tenant's own DNS with 4,000 A records, and 63 more
// Gslbs list 16 names each (1,008 more: the resolver's 1,000-name cap is
// full with the tenant's names). Then another team's LoadBalancer Service
// gets an ELB-style status host name.
//
// Finding 1: the heap (go_memstats_heap_inuse_bytes, from the process's
// /metrics) grows by less than 48 MiB and VmRSS stays under 170 MiB (the
// shipped replicas' memory limit); the Gslb's host answers 64 addresses
// (the per-name cap), not 4,000. Finding 2: the other team's status host
// name is resolved within 30 s.
func TestHostileExposedHostnamesAreBounded(t *testing.T) {
	k := harness.SharedKube(t)
	installGslbCRD(t, k)
	evil := k.NewNamespace(t, "evil")
	team := k.NewNamespace(t, "team")

	ip := harness.NewIP(t)
	own := newOwnDNS("evil.test", 4000)
	own.set("elb-1.team.test", "198.19.0.7")
	resolver := listenDNS(t, harness.NewIP(t), own)

	metrics := harness.HostPort(t, ip)
	ready := harness.HostPort(t, ip)
	cd := harness.StartCoreDNS(t, fmt.Sprintf(`example.org {
    bind %s
    prometheus %s
    ready %s
    k8scrd {
        kubeconfig %s
        resources Service Gslb
        namespaces %s %s
        resolver %s
    }
}
`, ip, metrics, ready, k.Kubeconfig, evil, team, resolver), harness.WithReadyURL("http://"+ready+"/ready"), harness.WithStartTimeout(time.Minute))
	baseHeap := heapInuse(t, metrics)

	// The tenant: a LoadBalancer Service that declares nothing, and Gslbs over it.
	k.LoadBalancer(t, evil, "lb", "")
	gslb := func(name, host string, names []string) {
		k.Apply(t, fmt.Sprintf(`apiVersion: k8gb.io/v1beta1
kind: Gslb
metadata:
  name: %s
  namespace: %s
  annotations:
    k8gb.io/hostname: %s
    k8gb.io/exposed-hostnames: %s
spec:
  resourceRef: {apiVersion: v1, kind: Service, name: lb}
  strategy: {type: roundRobin}
`, name, evil, host, strings.Join(names, ",")))
	}
	var big []string
	for i := range 1000 {
		big = append(big, fmt.Sprintf("n%04d.evil.test", i))
	}
	gslb("big", "big.example.org", big)
	for g := range 63 {
		var names []string
		for i := range 16 {
			names = append(names, fmt.Sprintf("m%02d-%02d.evil.test", g, i))
		}
		gslb(fmt.Sprintf("g%02d", g), fmt.Sprintf("g%02d.example.org", g), names)
	}
	// Until the resolver has looked up as many names as it resolves.
	testkit.Within(120*time.Second, func() bool {
		return metric(t, metrics, "coredns_k8scrd_resolver_lookups_total") >= 1000
	})

	// Finding 2: another team's load balancer, its status written after.
	k.LoadBalancer(t, team, "web", "web.example.org")
	k.LoadBalancerStatus(t, team, "web", "elb-1.team.test")
	if note, ok := testkit.Within(30*time.Second, func() (bool, string) {
		r, err := harness.Ask(cd.Addr, "web.example.org.", dns.TypeA, harness.NoRD, harness.Timeout(2*time.Second))
		if err != nil {
			return false, err.Error()
		}
		got := harness.Targets(r, dns.TypeA)
		return strings.Join(got, ",") == "198.19.0.7", fmt.Sprintf("web.example.org A = %v (%s), want 198.19.0.7; resolver names %v, skipped by cap %v",
			got, dns.RcodeToString[r.Rcode], metric(t, metrics, "coredns_k8scrd_resolver_names"), metric(t, metrics, "coredns_k8scrd_resolver_skipped_names", "reason", "cap"))
	}); !ok {
		t.Errorf("finding 2: another team's status host name not resolved within 30 s while a tenant's names fill the cap: %s", note)
	}

	// Finding 1: the tenant's host carries at most the per-name cap.
	var n int
	testkit.Within(60*time.Second, func() bool {
		r, err := harness.Ask(cd.Addr, "big.example.org.", dns.TypeA, harness.NoRD, harness.TCP, harness.Timeout(10*time.Second))
		if err != nil {
			return false
		}
		n = len(harness.Targets(r, dns.TypeA))
		return n > 0
	})
	if n == 0 || n > 64 {
		t.Errorf("finding 1: big.example.org A has %d addresses, want 1 to 64 (the cap per name and family)", n)
	}
	heap, rss := memory(t, metrics, cd)
	t.Logf("heap in use %s at start, %s after; VmRSS %s; resolver names %v, truncated %v, skipped (object) %v",
		fmtMiB(baseHeap), fmtMiB(heap), fmtMiB(rss),
		metric(t, metrics, "coredns_k8scrd_resolver_names"), metric(t, metrics, "coredns_k8scrd_resolver_truncated_names"),
		metric(t, metrics, "coredns_k8scrd_resolver_skipped_names", "reason", "object"))
	if grew := heap - baseHeap; grew > 48*mib {
		t.Errorf("finding 1: the heap grew by %s with the tenant's names, want under 48 MiB", fmtMiB(grew))
	}
	if rss > 170*mib {
		t.Errorf("finding 1: VmRSS %s, want under 170 MiB (the replicas' limit)", fmtMiB(rss))
	}
}
