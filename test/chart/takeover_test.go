package chart

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/fleetdns/fleetdns/test/harness"
)

// TestKubeSystemTakeoverWithHelm installs the chart over a stock (kubeadm)
// CoreDNS as docs/helm.md says, upgrades it with a new Corefile, and checks
// what users would see: the stock ConfigMap untouched (so a rollout undo to
// the stock ReplicaSet runs the stock Corefile), each Corefile version kept,
// the kube-dns address kept, the PodDisruptionBudget, and the DNSEndpoint
// grant surviving kubeadm's re-creation of system:coredns.
func TestKubeSystemTakeoverWithHelm(t *testing.T) {
	k := harness.SharedKube(t)
	stock, err := os.ReadFile("testdata/stock-coredns.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := k.KubectlStdin(string(stock), "create", "--field-manager=kubeadm", "-f", "-"); err != nil {
		t.Fatalf("creating stock CoreDNS: %v\n%s", err, out)
	}
	stockCorefile := k.Kubectl(t, "-n", "kube-system", "get", "configmap", "coredns", "-o", "jsonpath={.data.Corefile}")

	kc := "--kubeconfig=" + k.Kubeconfig
	t.Run("install without --take-ownership is refused", func(t *testing.T) {
		out, err := helm(t, "install", "fleetdns", "charts/fleetdns", "-n", "kube-system", kc)
		if err == nil || !strings.Contains(out, "exists and cannot be imported into the current release") {
			t.Fatalf("want helm to refuse the stock objects without --take-ownership (docs/helm.md uses it), got %v:\n%s", err, out)
		}
	})

	mustHelm(t, "install", "fleetdns", "charts/fleetdns", "-n", "kube-system", "--take-ownership", kc)
	get := func(args ...string) string {
		return k.Kubectl(t, append([]string{"-n", "kube-system", "get"}, args...)...)
	}

	first := get("deploy", "coredns", "-o", "jsonpath={.spec.template.spec.volumes[0].configMap.name}")
	if !strings.HasPrefix(first, "coredns-") {
		t.Fatalf("Deployment coredns mounts %q after the install, want coredns-<hash>", first)
	}
	for jp, want := range map[string]string{
		"{.spec.template.spec.containers[0].image}":                        "ghcr.io/fleetdns/fleetdns:0.1.0",
		"{.spec.strategy.rollingUpdate.maxUnavailable}":                    "0",
		"{.spec.strategy.rollingUpdate.maxSurge}":                          "1",
		"{.spec.template.spec.priorityClassName}":                          "system-cluster-critical",
		"{.spec.template.spec.securityContext.sysctls[0].name}":            "net.ipv4.ip_unprivileged_port_start",
		"{.spec.template.spec.containers[0].securityContext.capabilities}": `{"drop":["ALL"]}`,
		"{.spec.selector.matchLabels}":                                     `{"k8s-app":"kube-dns"}`,
	} {
		if got := get("deploy", "coredns", "-o", "jsonpath="+jp); got != want {
			t.Errorf("Deployment coredns %s = %s, want %s", jp, got, want)
		}
	}
	// Helm's 3-way merge keeps the live fields that the chart does not
	// name: the Deployment and Service must be exactly the rendered ones
	// (as the API server defaults them), with nothing of stock CoreDNS's
	// left (its NET_BIND_SERVICE, its pod anti-affinity).
	rendered := render(t, "fleetdns", "kube-system")
	k.EnsureNamespace(t, "compare")
	for _, kind := range []string{"Deployment", "Service"} {
		want := defaulted(t, k, mustFind(t, rendered, kind, ""))
		o := mustFind(t, rendered, kind, "")
		var live map[string]any
		if err := json.Unmarshal([]byte(get(strings.ToLower(kind), o.GetName(), "-o", "json")), &live); err != nil {
			t.Fatal(err)
		}
		var diffs []string
		diff(kind, normalize(live), want, &diffs)
		for _, d := range diffs {
			t.Errorf("after helm install --take-ownership, differs from the chart: %s", d)
		}
	}
	if ip := get("svc", "kube-dns", "-o", "jsonpath={.spec.clusterIP}"); ip != "10.96.0.10" {
		t.Errorf("kube-dns clusterIP %q after the takeover, want the stock 10.96.0.10", ip)
	}
	if got := get("pdb", "coredns", "-o", "jsonpath={.spec.maxUnavailable} {.spec.selector.matchLabels}"); got != `1 {"k8s-app":"kube-dns"}` {
		t.Errorf("PodDisruptionBudget coredns: %s", got)
	}
	if got := get("configmap", "coredns", "-o", "jsonpath={.data.Corefile}"); got != stockCorefile {
		t.Errorf("the stock ConfigMap coredns changed:\n%s", got)
	}

	const sa = "system:serviceaccount:kube-system:coredns"
	canI := func(verb, res, ns string) string {
		out, _ := k.TryKubectl("auth", "can-i", verb, res, "-n", ns, "--as="+sa)
		return strings.TrimSpace(out)
	}
	grants := func(t *testing.T) {
		t.Helper()
		for _, c := range []struct{ verb, res, ns, want string }{
			{"list", "dnsendpoints.externaldns.k8s.io", "default", "yes"},
			{"watch", "dnsendpoints.externaldns.k8s.io", "default", "yes"},
			{"create", "events", "default", "yes"},
			{"list", "services", "kube-system", "yes"},
			{"list", "endpointslices.discovery.k8s.io", "kube-system", "yes"},
			{"list", "dnsendpoints.externaldns.k8s.io", "kube-system", "no"},
			{"create", "dnsendpoints.externaldns.k8s.io", "default", "no"},
			{"get", "secrets", "default", "no"},
		} {
			if got := canI(c.verb, c.res, c.ns); got != c.want {
				t.Errorf("can-i %s %s -n %s --as=%s: %q, want %q", c.verb, c.res, c.ns, sa, got, c.want)
			}
		}
	}
	t.Run("grants", grants)

	t.Run("kubeadm re-creating system:coredns keeps the dnsendpoints grant", func(t *testing.T) {
		k.Kubectl(t, "delete", "clusterrole", "system:coredns")
		var cr string
		for _, doc := range strings.Split(string(stock), "\n---\n") {
			if strings.Contains("\n"+doc, "\nkind: ClusterRole\n") {
				cr = doc
			}
		}
		if out, err := k.KubectlStdin(cr, "create", "--field-manager=kubeadm", "-f", "-"); err != nil {
			t.Fatalf("re-creating system:coredns: %v\n%s", err, out)
		}
		grants(t)
	})

	t.Run("upgrade with a new Corefile", func(t *testing.T) {
		mustHelm(t, append([]string{"upgrade", "fleetdns", "charts/fleetdns", "-n", "kube-system", kc},
			withPlugin(t, "kubeSystem", "k8scrd", "parameters", "apps.internal corp.internal")...)...)
		second := get("deploy", "coredns", "-o", "jsonpath={.spec.template.spec.volumes[0].configMap.name}")
		if second == first || !strings.HasPrefix(second, "coredns-") {
			t.Fatalf("after a Corefile change the Deployment mounts %q (before: %q)", second, first)
		}
		if cf := get("configmap", second, "-o", "jsonpath={.data.Corefile}"); !strings.Contains(cf, "k8scrd apps.internal corp.internal {") {
			t.Errorf("ConfigMap %s:\n%s", second, cf)
		}
		// The previous version stays for the ReplicaSet that mounts it, and
		// the stock one for the stock ReplicaSet.
		if cf := get("configmap", first, "-o", "jsonpath={.data.Corefile}"); !strings.Contains(cf, "k8scrd apps.internal {") {
			t.Errorf("the previous ConfigMap %s is gone or changed:\n%s", first, cf)
		}
		if got := get("configmap", "coredns", "-o", "jsonpath={.data.Corefile}"); got != stockCorefile {
			t.Errorf("the stock ConfigMap coredns changed on upgrade")
		}
		if got := get("configmap", second, "-o", "jsonpath={.immutable}"); got != "true" {
			t.Errorf("ConfigMap %s immutable = %q", second, got)
		}
	})

	t.Run("uninstall leaves the cluster DNS", func(t *testing.T) {
		mustHelm(t, "uninstall", "fleetdns", "-n", "kube-system", kc)
		for _, o := range []string{"deploy/coredns", "svc/kube-dns", "serviceaccount/coredns", "configmap/coredns", "configmap/" + first} {
			if _, err := k.TryKubectl("-n", "kube-system", "get", o); err != nil {
				t.Errorf("%s is gone after helm uninstall", o)
			}
		}
		if _, err := k.TryKubectl("get", "clusterrole", "system:coredns"); err != nil {
			t.Errorf("system:coredns is gone after helm uninstall")
		}
		for _, o := range []string{"pdb/coredns", "clusterrole/fleetdns:k8scrd"} {
			if out, err := k.TryKubectl("-n", "kube-system", "get", o); err == nil {
				t.Errorf("%s is still there after helm uninstall:\n%s", o, out)
			}
		}
	})
}
