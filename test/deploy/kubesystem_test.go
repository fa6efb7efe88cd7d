package deploy

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"
	"github.com/miekg/dns"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestKubeSystemDropInReplacesStock takes over a stock (kubeadm) CoreDNS
// installation with deploy/kube-system exactly as docs/kube-system.md says,
// proves the shipped RBAC against the API server's authorizer (also after
// kubeadm re-creates system:coredns), runs the shipped Corefile with a token
// of the shipped ServiceAccount and queries it, shows the error an operator
// sees when the dnsendpoints rule is missing, and goes back to stock as the
// guide's way back says.
func TestKubeSystemDropInReplacesStock(t *testing.T) {
	k := harness.SharedKube(t)
	root := harness.ModuleRoot(t)

	// The cluster as kubeadm left it. The test API server runs no
	// controllers, so the stock Deployment stands for the installation and
	// starts nothing.
	stock, err := os.ReadFile("testdata/stock-coredns.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := k.KubectlStdin(string(stock), "create", "--field-manager=kubeadm", "-f", "-"); err != nil {
		t.Fatalf("creating stock CoreDNS: %v\n%s", err, out)
	}

	// The guide's first step: keep the stock objects for the way back,
	// without the version fields (its `sed`), so that they replace what the
	// takeover changed.
	noVersion := regexp.MustCompile(`(?m)^\s*(resourceVersion|uid):.*\n`)
	saved := noVersion.ReplaceAllString(k.Kubectl(t, "-n", "kube-system", "get", "deployment/coredns", "configmap/coredns", "-o", "yaml"), "")
	savedRBAC := noVersion.ReplaceAllString(k.Kubectl(t, "get", "clusterrole/system:coredns", "clusterrolebinding/system:coredns", "-o", "yaml"), "")

	objs := k.Kustomize(t, "deploy/kube-system")
	var stored []*unstructured.Unstructured
	var deployment *unstructured.Unstructured
	cmName := ""
	for _, o := range objs {
		if !wouldStartPods(o) {
			stored = append(stored, o)
		} else if o.GetKind() == "Deployment" {
			deployment = o
		}
		if o.GetKind() == "ConfigMap" {
			cmName = o.GetName()
		}
	}
	if !strings.HasPrefix(cmName, "coredns-") {
		t.Fatalf("deploy/kube-system renders ConfigMap %q, want the versioned coredns-<hash>", cmName)
	}

	t.Run("plain server-side apply reports the conflict with kubeadm's fields", func(t *testing.T) {
		out, err := k.KubectlStdin(harness.EncodeYAML(t, stored...), "apply", "--server-side", "-f", "-")
		if err == nil || !strings.Contains(out, "conflict") {
			t.Fatalf("want a field-manager conflict without --force-conflicts (docs/kube-system.md says to use it), got err %v:\n%s", err, out)
		}
	})

	t.Run("apply with --force-conflicts takes the objects over", func(t *testing.T) {
		applyAsUsers(t, k, objs, "--force-conflicts")
		// The Deployment for real too: the stock one is already stored
		// (this API server runs no controllers, so neither starts a pod),
		// and what server-side apply leaves of kubeadm's fields is what a
		// cluster would run.
		kubectlApply(t, k, []*unstructured.Unstructured{deployment}, "--force-conflicts")
		// The Service keeps the address kubelet's clusterDNS points at.
		if ip := k.Kubectl(t, "-n", "kube-system", "get", "svc", "kube-dns", "-o", "jsonpath={.spec.clusterIP}"); ip != "10.96.0.10" {
			t.Errorf("kube-dns Service clusterIP = %q after the takeover, want the stock 10.96.0.10", ip)
		}
		// The Deployment runs fleetdns on the versioned ConfigMap, rolls
		// with maxUnavailable 0, and nothing of stock's capabilities is left.
		for path, want := range map[string]string{
			"{.spec.template.spec.containers[0].image}":                                             "ghcr.io/fleetdns/fleetdns:0.1.0",
			"{.spec.template.spec.volumes[?(@.name=='config-volume')].configMap.name}":              cmName,
			"{.spec.strategy.rollingUpdate.maxUnavailable} {.spec.strategy.rollingUpdate.maxSurge}": "0 1",
			"{.spec.template.spec.containers[0].securityContext.capabilities}":                      `{"drop":["ALL"]}`,
			"{.spec.template.spec.securityContext.sysctls}":                                         `[{"name":"net.ipv4.ip_unprivileged_port_start","value":"53"}]`,
		} {
			if got := k.Kubectl(t, "-n", "kube-system", "get", "deployment", "coredns", "-o", "jsonpath="+path); got != want {
				t.Errorf("live Deployment coredns %s = %s, want %s", path, got, want)
			}
		}
		if got := k.Kubectl(t, "-n", "kube-system", "get", "pdb", "coredns", "-o", "jsonpath={.spec.maxUnavailable} {.spec.selector.matchLabels}"); got != `1 {"k8s-app":"kube-dns"}` {
			t.Errorf("PodDisruptionBudget coredns: %s", got)
		}
		// fleetdns's Corefile is the versioned ConfigMap; the stock one is
		// left as kubeadm wrote it, for rollout undo and the way back.
		cm := k.Kubectl(t, "-n", "kube-system", "get", "configmap", cmName, "-o", "jsonpath={.data.Corefile}")
		if !strings.Contains(cm, "k8scrd apps.internal") || strings.Contains(cm, "forward . /etc/resolv.conf") {
			t.Errorf("ConfigMap %s is not fleetdns's Corefile:\n%s", cmName, cm)
		}
		if stockCM := k.Kubectl(t, "-n", "kube-system", "get", "configmap", "coredns", "-o", "jsonpath={.data.Corefile}"); !strings.Contains(stockCM, "forward . /etc/resolv.conf") || strings.Contains(stockCM, "k8scrd") {
			t.Errorf("the takeover changed the stock ConfigMap coredns:\n%s", stockCM)
		}
		var cr rbacv1.ClusterRole
		if err := json.Unmarshal([]byte(k.Kubectl(t, "get", "clusterrole", "system:coredns", "-o", "json")), &cr); err != nil {
			t.Fatal(err)
		}
		if got, want := rulesString(cr.Rules), rulesString(shippedClusterRole(t, root).Rules); got != want {
			t.Errorf("ClusterRole system:coredns after apply:\n%s\nwant the shipped rules:\n%s", got, want)
		}
	})

	t.Run("the ServiceAccount may read what it serves and nothing more", func(t *testing.T) {
		const sa = "system:serviceaccount:kube-system:coredns"
		for _, c := range []struct {
			verb, resource string
			want           string
		}{
			{"list", "services", "yes"}, {"watch", "services", "yes"},
			{"list", "namespaces", "yes"}, {"watch", "namespaces", "yes"},
			{"list", "endpointslices.discovery.k8s.io", "yes"}, {"watch", "endpointslices.discovery.k8s.io", "yes"},
			// DNSEndpoints only in the namespaces the Corefile reads (below).
			{"list", "dnsendpoints.externaldns.k8s.io", "no"},
			{"create", "dnsendpoints.externaldns.k8s.io", "no"}, {"update", "dnsendpoints.externaldns.k8s.io", "no"}, {"delete", "dnsendpoints.externaldns.k8s.io", "no"},
			{"create", "events", "no"},
			{"get", "services", "no"}, {"list", "pods", "no"}, {"list", "endpoints", "no"},
			{"list", "secrets", "no"}, {"get", "configmaps", "no"}, {"list", "nodes", "no"},
		} {
			out, _ := k.TryKubectl("auth", "can-i", c.verb, c.resource, "--all-namespaces", "--as="+sa)
			if got := strings.TrimSpace(out); got != c.want {
				t.Errorf("kubectl auth can-i %s %s --as=%s: %q, want %q", c.verb, c.resource, sa, got, c.want)
			}
		}
		// In namespace default (the Corefile's namespaces): read what it
		// serves, create Events (its one write), nothing else.
		for _, c := range []struct {
			verb, resource string
			want           string
		}{
			{"get", "dnsendpoints.externaldns.k8s.io", "yes"}, {"list", "dnsendpoints.externaldns.k8s.io", "yes"}, {"watch", "dnsendpoints.externaldns.k8s.io", "yes"},
			{"create", "events", "yes"},
			{"create", "dnsendpoints.externaldns.k8s.io", "no"}, {"update", "dnsendpoints.externaldns.k8s.io", "no"}, {"patch", "dnsendpoints.externaldns.k8s.io", "no"},
			{"delete", "dnsendpoints.externaldns.k8s.io", "no"}, {"update", "events", "no"}, {"patch", "events", "no"}, {"delete", "events", "no"},
			{"create", "configmaps", "no"}, {"create", "pods", "no"}, {"list", "secrets", "no"},
		} {
			out, _ := k.TryKubectl("auth", "can-i", c.verb, c.resource, "-n", "default", "--as="+sa)
			if got := strings.TrimSpace(out); got != c.want {
				t.Errorf("kubectl auth can-i %s %s -n default --as=%s: %q, want %q", c.verb, c.resource, sa, got, c.want)
			}
		}
	})

	t.Run("kubeadm re-creating system:coredns leaves the dnsendpoints grant", func(t *testing.T) {
		// kubeadm's CoreDNS addon phase (upgrade apply, init phase addon
		// coredns) writes its own system:coredns ClusterRole and binding.
		var kubeadmRBAC []*unstructured.Unstructured
		stockObjs, err := harness.DecodeYAML(string(stock))
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range stockObjs {
			if o.GetName() == "system:coredns" {
				kubeadmRBAC = append(kubeadmRBAC, o)
			}
		}
		if len(kubeadmRBAC) != 2 {
			t.Fatalf("testdata/stock-coredns.yaml: %d system:coredns objects, want the ClusterRole and its binding", len(kubeadmRBAC))
		}
		k.Kubectl(t, "delete", "clusterrole/system:coredns", "clusterrolebinding/system:coredns")
		if out, err := k.KubectlStdin(harness.EncodeYAML(t, kubeadmRBAC...), "create", "--field-manager=kubeadm", "-f", "-"); err != nil {
			t.Fatalf("re-creating system:coredns as kubeadm does: %v\n%s", err, out)
		}
		t.Cleanup(func() {
			k.Kubectl(t, "apply", "--server-side", "--force-conflicts", "-f", filepath.Join(root, "deploy/rbac/rbac.yaml"))
		})
		const sa = "system:serviceaccount:kube-system:coredns"
		for _, c := range []struct{ verb, resource, want string }{
			{"list", "dnsendpoints.externaldns.k8s.io", "yes"}, {"watch", "dnsendpoints.externaldns.k8s.io", "yes"},
			{"create", "events", "yes"}, {"list", "services", "yes"}, {"list", "endpointslices.discovery.k8s.io", "yes"},
		} {
			out, _ := k.TryKubectl("auth", "can-i", c.verb, c.resource, "-n", "default", "--as="+sa)
			if got := strings.TrimSpace(out); got != c.want {
				t.Errorf("after kubeadm's system:coredns: kubectl auth can-i %s %s -n default --as=%s: %q, want %q", c.verb, c.resource, sa, got, c.want)
			}
		}
	})

	// The kube-dns ConfigMap of a cluster migrating from kube-dns, and the
	// upstreams its stub domain and the node's resolv.conf name.
	stub := &upstream{zone: ".", answer: "192.0.2.53", ips: []string{harness.NewIP(t)}}
	node := &upstream{zone: ".", answer: "192.0.2.1", ips: []string{harness.NewIP(t)}}
	startUpstreams(t, stub, node)
	kubeDNS := `{"acme.local": ["` + stub.ips[0] + `"]}`
	applyKubeDNSConfigMap(t, k, kubeDNS)

	shippedBytes, err := os.ReadFile(filepath.Join(root, "deploy/kube-system/Corefile"))
	if err != nil {
		t.Fatal(err)
	}
	shipped := string(shippedBytes)
	if live := k.Kubectl(t, "-n", "kube-system", "get", "configmap", cmName, "-o", "jsonpath={.data.Corefile}"); strings.TrimSpace(live) != strings.TrimSpace(shipped) {
		t.Fatalf("the API server's ConfigMap %s differs from deploy/kube-system/Corefile", cmName)
	}
	mustLines(t, shipped, "kubernetes cluster.local in-addr.arpa ip6.arpa {", "pods insecure", "fallthrough in-addr.arpa ip6.arpa", "k8scrd apps.internal {")
	noDirective(t, shipped, "forward", "kubeconfig")

	run := func(t *testing.T) (p *harness.Process, dnsAddr, readyURL, metricsURL string) {
		t.Helper()
		ip := harness.NewIP(t)
		hp, rp, mp := harness.FreePort(t, ip), harness.FreePort(t, ip), harness.FreePort(t, ip)
		dir := t.TempDir()
		kubednsDir := filepath.Join(dir, "kube-dns")
		k.ConfigMapFolder(t, "kube-system", "kube-dns", kubednsDir)
		resolv := filepath.Join(dir, "resolv.conf")
		if err := os.WriteFile(resolv, []byte("nameserver "+node.ips[0]+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		const ports = "fixed ports on every interface would collide with the other tests on this machine"
		cf := harness.Substitute(t, shipped,
			harness.Substitution{Old: ".:53 {", New: ".:53 {\n    bind " + ip, Why: "port 53 on every interface is shared on the test machine: each test listens on a loopback address of its own"},
			harness.Substitution{Old: "health {", New: "health " + fmtAddr(ip, hp) + " {", Why: ports},
			harness.Substitution{Old: "\n    ready\n", New: "\n    ready " + fmtAddr(ip, rp) + "\n", Why: ports},
			harness.Substitution{Old: "prometheus :9153", New: "prometheus " + fmtAddr(ip, mp), Why: ports},
			harness.Substitution{Old: "kubedns /etc/kube-dns", New: "kubedns " + kubednsDir, Why: "the pod's mount of ConfigMap kube-dns: the same ConfigMap's files, written from the API server"},
			harness.Substitution{Old: "resolv /etc/resolv.conf", New: "resolv " + resolv, Why: "the node's resolvers cannot be reached from the test machine: a real upstream on loopback stands in"},
		)
		p = startInCluster(t, k, "kube-system", "coredns", cf)
		return p, ip + ":53", "http://" + fmtAddr(ip, rp) + "/ready", "http://" + fmtAddr(ip, mp) + "/metrics"
	}

	t.Run("the shipped Corefile runs with the shipped ServiceAccount and answers", func(t *testing.T) {
		p, addr, readyURL, metricsURL := run(t)
		if err := waitHTTP(p, readyURL, 60*time.Second); err != nil {
			t.Fatalf("never ready: %v\n%s", err, p.Log())
		}
		k.Kubectl(t, "apply", "--server-side", "-f", filepath.Join(root, "test/deploy/testdata/db-apps-internal.yaml"))
		t.Cleanup(func() { k.TryKubectl("-n", "default", "delete", "dnsendpoint", "db", "--ignore-not-found") })

		for _, c := range []struct {
			name  string
			qtype uint16
			want  string
			why   string
		}{
			{"kubernetes.default.svc.cluster.local.", dns.TypeA, "10.96.0.1", "the kubernetes plugin, stock"},
			{"kube-dns.kube-system.svc.cluster.local.", dns.TypeA, "10.96.0.10", "the kubernetes plugin, stock"},
			{"10.0.96.10.in-addr.arpa.", dns.TypePTR, "kube-dns.kube-system.svc.cluster.local.", "reverse zone, stock"},
			{"db.apps.internal.", dns.TypeA, "10.1.2.3", "k8scrd: a DNSEndpoint"},
			{"host.acme.local.", dns.TypeA, "192.0.2.53", "splitdns: the kube-dns ConfigMap's stubDomains"},
			{"www.example.org.", dns.TypeA, "192.0.2.1", "splitdns: the node's resolv.conf as the catch-all"},
		} {
			var got []string
			var r *dns.Msg
			// A DNSEndpoint appears within a second; leave room for a loaded machine.
			testkit.Within(10*time.Second, func() bool {
				r = harness.Exchange(t, addr, c.name, c.qtype, harness.Timeout(5*time.Second))
				got = harness.Targets(r, c.qtype)
				return len(got) == 1 && got[0] == c.want
			})
			if len(got) != 1 || got[0] != c.want {
				t.Errorf("%s %s: rcode %s, answer %v; want %s (%s)", c.name, dns.TypeToString[c.qtype], dns.RcodeToString[r.Rcode], got, c.want, c.why)
			}
		}
		r := harness.Exchange(t, addr, "db.apps.internal.", dns.TypeA, harness.NoRD)
		if !r.Authoritative {
			t.Errorf("db.apps.internal: AA not set; k8scrd answers authoritatively")
		}
		r = harness.Exchange(t, addr, "nothere.apps.internal.", dns.TypeA)
		if r.Rcode != dns.RcodeNameError || len(r.Ns) == 0 || r.Ns[0].Header().Rrtype != dns.TypeSOA {
			t.Errorf("nothere.apps.internal: rcode %s, authority %v; want NXDOMAIN with the zone's SOA", dns.RcodeToString[r.Rcode], r.Ns)
		}

		body := harness.HTTPBody(t, metricsURL)
		for _, m := range []string{"coredns_k8scrd_", "coredns_splitdns_", "coredns_dns_requests_total"} {
			if !strings.Contains(body, m) {
				t.Errorf("metrics on the prometheus port lack %s", m)
			}
		}
		if strings.Contains(p.Log(), "orbidden") {
			t.Errorf("permission errors with the shipped ClusterRole:\n%s", p.Log())
		}
		p.Stop()
	})

	t.Run("without the dnsendpoints rule the log says which permission is missing", func(t *testing.T) {
		// The DNSEndpoint rules are fleetdns's own ClusterRole
		// fleetdns:k8scrd, granted in namespace default (the Corefile's
		// namespaces) by a RoleBinding; not system:coredns.
		for _, r := range shippedClusterRole(t, root).Rules {
			if slices.Contains(r.APIGroups, "externaldns.k8s.io") {
				t.Fatalf("the shipped ClusterRole system:coredns holds a dnsendpoints rule: %v", r)
			}
		}
		k.Kubectl(t, "-n", "default", "delete", "rolebinding", "fleetdns:k8scrd")
		t.Cleanup(func() { k.Kubectl(t, "apply", "--server-side", "-f", filepath.Join(root, "deploy/rbac/rbac.yaml")) })

		p, addr, readyURL, _ := run(t)
		if !p.WaitLog("Forbidden", 60*time.Second) {
			t.Fatalf("no permission error in the log within 60s:\n%s", p.Log())
		}
		var line string
		for _, l := range strings.Split(p.Log(), "\n") {
			if strings.Contains(l, "Forbidden") && strings.Contains(l, "dnsendpoints") {
				line = l
				break
			}
		}
		if line == "" || !strings.Contains(line, "system:serviceaccount:kube-system:coredns") || !strings.Contains(line, "list") {
			t.Errorf("the permission error does not name the resource, the verb and the identity:\n%s", p.Log())
		}
		t.Logf("the operator sees: %s", line)
		// k8scrd waits a bounded time for its first sync before the server
		// starts listening, as the kubernetes plugin does.
		if err := waitDNS(p, addr, 30*time.Second); err != nil {
			t.Fatalf("the server did not start despite the missing permission: %v\n%s", err, p.Log())
		}

		// The rest of the cluster DNS keeps serving; the k8scrd zone is
		// SERVFAIL (never an NXDOMAIN that resolvers would cache) and the
		// pod is not ready, so a rollout with broken RBAC stops.
		r := harness.Exchange(t, addr, "kubernetes.default.svc.cluster.local.", dns.TypeA, harness.Timeout(5*time.Second))
		if got := harness.Targets(r, dns.TypeA); len(got) != 1 || got[0] != "10.96.0.1" {
			t.Errorf("cluster.local with broken k8scrd RBAC: rcode %s answer %v, want 10.96.0.1", dns.RcodeToString[r.Rcode], got)
		}
		r = harness.Exchange(t, addr, "db.apps.internal.", dns.TypeA, harness.Timeout(5*time.Second))
		if r.Rcode != dns.RcodeServerFailure {
			t.Errorf("apps.internal before k8scrd could sync: rcode %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
		}
		if code := httpStatus(readyURL); code == http.StatusOK {
			t.Errorf("%s answers 200 although k8scrd cannot read DNSEndpoints", readyURL)
		}
	})

	t.Run("the way back: stock RBAC, Corefile and image, then fleetdns's extras", func(t *testing.T) {
		// docs/kube-system.md's order: kubeadm's RBAC first (a superset of
		// what fleetdns reads, so the running pods lose nothing), then the
		// saved ConfigMap and Deployment (the stock image and the stock
		// Corefile arrive in the same rollout), and only after that rollout
		// fleetdns's own objects.
		for _, saved := range []string{savedRBAC, saved} {
			if out, err := k.KubectlStdin(saved, "replace", "-f", "-"); err != nil {
				t.Fatalf("kubectl replace with the saved stock objects: %v\n%s", err, out)
			}
		}
		// The whole stock pod template: the stock image needs its
		// NET_BIND_SERVICE back (its binary carries the file capability).
		for path, want := range map[string]string{
			"{.spec.template.spec.containers[0].image}":                                "registry.k8s.io/coredns/coredns:v1.12.0",
			"{.spec.template.spec.volumes[?(@.name=='config-volume')].configMap.name}": "coredns",
			"{.spec.template.spec.containers[0].securityContext.capabilities}":         `{"add":["NET_BIND_SERVICE"],"drop":["ALL"]}`,
			"{.spec.template.spec.securityContext}":                                    "{}",
			"{.spec.strategy.rollingUpdate.maxUnavailable}":                            "1",
		} {
			if got := k.Kubectl(t, "-n", "kube-system", "get", "deployment", "coredns", "-o", "jsonpath="+path); got != want {
				t.Errorf("after the way back, Deployment coredns %s = %s, want %s", path, got, want)
			}
		}
		if cm := k.Kubectl(t, "-n", "kube-system", "get", "configmap", "coredns", "-o", "jsonpath={.data.Corefile}"); !strings.Contains(cm, "forward . /etc/resolv.conf") {
			t.Errorf("after the way back, ConfigMap coredns is not the stock Corefile:\n%s", cm)
		}
		if out, _ := k.TryKubectl("auth", "can-i", "list", "pods", "--all-namespaces", "--as=system:serviceaccount:kube-system:coredns"); strings.TrimSpace(out) != "yes" {
			t.Errorf("after the way back, kubeadm's system:coredns does not grant list pods: %q", out)
		}
		k.Kubectl(t, "-n", "kube-system", "delete", "pdb/coredns", "configmap/"+cmName)
		k.Kubectl(t, "delete", "clusterrole/fleetdns:k8scrd")
		k.Kubectl(t, "-n", "default", "delete", "rolebinding/fleetdns:k8scrd")
		if out, _ := k.TryKubectl("auth", "can-i", "list", "dnsendpoints.externaldns.k8s.io", "-n", "default", "--as=system:serviceaccount:kube-system:coredns"); strings.TrimSpace(out) != "no" {
			t.Errorf("after removing fleetdns's extras the ServiceAccount may still list dnsendpoints: %q", out)
		}
	})
}

func shippedClusterRole(t *testing.T, root string) *rbacv1.ClusterRole {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "deploy/rbac/rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := harness.DecodeYAML(string(b))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == "ClusterRole" && o.GetName() == "system:coredns" {
			var cr rbacv1.ClusterRole
			j, _ := o.MarshalJSON()
			if err := json.Unmarshal(j, &cr); err != nil {
				t.Fatal(err)
			}
			return &cr
		}
	}
	t.Fatal("deploy/rbac/rbac.yaml has no ClusterRole system:coredns")
	return nil
}

func rulesString(rules []rbacv1.PolicyRule) string {
	var b strings.Builder
	for _, r := range rules {
		b.WriteString(r.String() + "\n")
	}
	return b.String()
}

func applyKubeDNSConfigMap(t *testing.T, k *harness.Kube, stubDomains string) {
	t.Helper()
	cm := map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "kube-dns", "namespace": "kube-system"},
		"data":     map[string]any{"stubDomains": stubDomains},
	}
	j, _ := json.Marshal(cm)
	if out, err := k.KubectlStdin(string(j), "apply", "--server-side", "-f", "-"); err != nil {
		t.Fatalf("apply ConfigMap kube-dns: %v\n%s", err, out)
	}
}

func waitHTTP(p *harness.Process, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		if !p.Running() {
			return p.ExitErr()
		}
		code := httpStatus(url)
		if code == http.StatusOK {
			return nil
		}
		last = &httpError{url, code}
		time.Sleep(100 * time.Millisecond)
	}
	return last
}

type httpError struct {
	url  string
	code int
}

func (e *httpError) Error() string { return e.url + ": status " + http.StatusText(e.code) }

func httpStatus(url string) int {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
