package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"
	"github.com/miekg/dns"
)

// TestK8gbGuideCorefilesServeOperatorObjects runs the two Corefiles of
// docs/replace-k8gb.md against DNSEndpoints shaped as the k8gb operator
// writes them: step 1 serves them as written (and only them); step 2, with
// localtargets and gslb in front, still serves them as written and assembles
// a host declared by a DNSEndpoint of the user's own.
func TestK8gbGuideCorefilesServeOperatorObjects(t *testing.T) {
	k := harness.SharedKube(t)
	root := harness.ModuleRoot(t)
	var steps []string
	for _, b := range fencedBlocks(t, filepath.Join(root, "docs/replace-k8gb.md")) {
		if strings.HasPrefix(strings.TrimSpace(b), "cloud.example.com:5353 {") {
			steps = append(steps, b)
		}
	}
	if len(steps) != 2 {
		t.Fatalf("docs/replace-k8gb.md: want the Corefiles of step 1 and step 2, found %d", len(steps))
	}

	// What the k8gb operator writes for a Gslb "app" (its labels), and one
	// object that is not the operator's.
	k.EnsureNamespace(t, "shop")
	k.ServiceAccountWithRules(t, "k8gb", "k8gb-coredns", harness.DNSEndpointReaderRules)
	k.Apply(t, `apiVersion: externaldns.k8s.io/v1alpha1
kind: DNSEndpoint
metadata: {name: app, namespace: shop, labels: {k8gb.io/dnstype: local}}
spec:
  endpoints:
  - {dnsName: app.cloud.example.com, recordType: A, recordTTL: 30, targets: [10.0.0.1, 10.0.0.2], labels: {strategy: roundRobin}}
  - {dnsName: localtargets-app.cloud.example.com, recordType: A, recordTTL: 30, targets: [10.0.0.1]}
---
apiVersion: externaldns.k8s.io/v1alpha1
kind: DNSEndpoint
metadata: {name: app2-gslb, namespace: shop}
spec:
  endpoints:
  - dnsName: app2.cloud.example.com
    recordType: A
    targets: [10.0.0.7]
    providerSpecific:
    - {name: gslb/strategy, value: failover}
`)
	t.Cleanup(func() {
		k.DeleteDNSEndpoint(t, "shop", "app")
		k.DeleteDNSEndpoint(t, "shop", "app2-gslb")
	})

	run := func(t *testing.T, corefile, serviceAccount string) string {
		ip := harness.NewIP(t)
		const ports = "fixed ports on every interface would collide with the other tests on this machine"
		subs := []harness.Substitution{
			{Old: "cloud.example.com:5353 {", New: "cloud.example.com:5353 {\n    bind " + ip, Why: "each test listens on a loopback address of its own"},
			{Old: "\n    health\n", New: "\n    health " + fmtAddr(ip, harness.FreePort(t, ip)) + "\n", Why: ports},
			{Old: "\n    ready\n", New: "\n    ready " + fmtAddr(ip, harness.FreePort(t, ip)) + "\n", Why: ports},
			{Old: "prometheus 0.0.0.0:9153", New: "prometheus " + fmtAddr(ip, harness.FreePort(t, ip)), Why: ports},
		}
		if strings.Contains(corefile, "peers_from_ns 192.0.2.53") {
			// A parent server that does not answer: no peers are found, and
			// the last good (empty) set is kept.
			subs = append(subs, harness.Substitution{Old: "peers_from_ns 192.0.2.53", New: "peers_from_ns " + harness.NewIP(t), Why: "the parent zone's server cannot exist on the test machine: a silent loopback address stands in"})
		}
		cf := harness.Substitute(t, corefile, subs...)
		p := startInCluster(t, k, "k8gb", serviceAccount, cf)
		addr := ip + ":5353"
		if err := waitDNS(p, addr, 60*time.Second); err != nil {
			t.Fatalf("did not start: %v\n%s", err, p.Log())
		}
		return addr
	}
	answers := func(addr, name string) []string {
		var got []string
		testkit.Within(15*time.Second, func() bool {
			r := harness.Exchange(t, addr, name, dns.TypeA, harness.NoRD, harness.Timeout(5*time.Second))
			got = harness.Targets(r, dns.TypeA)
			return len(got) > 0
		})
		return got
	}

	t.Run("step 1: the operator's objects as written, nothing else", func(t *testing.T) {
		addr := run(t, steps[0], "k8gb-coredns")
		if got := strings.Join(answers(addr, "app.cloud.example.com."), " "); got != "10.0.0.1 10.0.0.2" {
			t.Errorf("app.cloud.example.com A = %q, want the operator's 10.0.0.1 10.0.0.2", got)
		}
		if got := strings.Join(answers(addr, "localtargets-app.cloud.example.com."), " "); got != "10.0.0.1" {
			t.Errorf("localtargets-app.cloud.example.com A = %q, want the operator's 10.0.0.1", got)
		}
		r := harness.Exchange(t, addr, "app2.cloud.example.com.", dns.TypeA, harness.NoRD)
		if r.Rcode != dns.RcodeNameError {
			t.Errorf("app2 (not labelled by k8gb) under labels k8gb.io/dnstype=local: rcode %s %v, want NXDOMAIN", dns.RcodeToString[r.Rcode], r.Answer)
		}
	})

	t.Run("step 2: operator objects still as written, own hosts assembled", func(t *testing.T) {
		// Step 2 reads Gslbs: the guide applies deploy/rbac/k8gb.yaml for the
		// chart's ServiceAccount (k8gb/coredns, which keeps the chart's own
		// dnsendpoints rule), and the Gslb CRDs exist where k8gb ran.
		k.ServiceAccountWithRules(t, "k8gb", "coredns", harness.DNSEndpointReaderRules)
		for _, f := range []string{"deploy/crd/gslbs.k8gb.io.yaml", "deploy/crd/gslbs.k8gb.absa.oss.yaml", "deploy/rbac/k8gb.yaml"} {
			b, err := os.ReadFile(filepath.Join(root, f))
			if err != nil {
				t.Fatal(err)
			}
			k.Apply(t, string(b))
		}
		// Issue 24, finding 9: a tenant's k8gb-labelled TXT at another
		// team's host never turns it verbatim (localtargets-app2 below).
		k.EnsureNamespace(t, "evil")
		k.Apply(t, "apiVersion: externaldns.k8s.io/v1alpha1\nkind: DNSEndpoint\nmetadata: {name: claim, namespace: evil, labels: {k8gb.io/dnstype: local}}\nspec:\n  endpoints:\n  - {dnsName: app2.cloud.example.com, recordType: TXT, targets: [x]}\n")
		t.Cleanup(func() { k.DeleteDNSEndpoint(t, "evil", "claim") })
		addr := run(t, steps[1], "coredns")
		if got := strings.Join(answers(addr, "app.cloud.example.com."), " "); got != "10.0.0.1 10.0.0.2" {
			t.Errorf("app.cloud.example.com A = %q, want the operator's 10.0.0.1 10.0.0.2, as written", got)
		}
		if got := strings.Join(answers(addr, "app2.cloud.example.com."), " "); got != "10.0.0.7" {
			t.Errorf("app2.cloud.example.com A = %q, want this cluster's 10.0.0.7 (no peers in the delegation)", got)
		}
		if got := strings.Join(answers(addr, "localtargets-app2.cloud.example.com."), " "); got != "10.0.0.7" {
			t.Errorf("localtargets-app2.cloud.example.com A = %q, want 10.0.0.7 (what peers are told)", got)
		}
	})
}
