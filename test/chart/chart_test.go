package chart

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/fleetdns/fleetdns/test/harness"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestChartLints runs helm lint --strict on each shape: no error, no warning.
func TestChartLints(t *testing.T) {
	for _, s := range shapes {
		t.Run(s.name, func(t *testing.T) {
			out := mustHelm(t, append([]string{"lint", "--strict", "charts/fleetdns", "--namespace", s.namespace}, s.args...)...)
			if !strings.Contains(out, "1 chart(s) linted, 0 chart(s) failed") {
				t.Fatalf("helm lint:\n%s", out)
			}
		})
	}
	// A mode the chart does not know is an error, not a silent default.
	out, err := helm(t, "template", "x", "charts/fleetdns", "--set", "mode=gsbl")
	if err == nil || !strings.Contains(out, `mode: "gsbl" is neither kubeSystem nor gslb`) {
		t.Errorf("helm template --set mode=gsbl: err %v, want the chart to refuse it:\n%s", err, out)
	}
}

var reHashedName = regexp.MustCompile(`^(.+)-[0-9a-f]{10}$`)

// TestKubeSystemShape checks what the takeover needs of the rendered
// kube-system objects.
func TestKubeSystemShape(t *testing.T) {
	objs := render(t, "fleetdns", "kube-system")
	d := mustFind(t, objs, "Deployment", "coredns")
	for path, want := range map[string]string{
		"spec.selector.matchLabels":                       `{"k8s-app":"kube-dns"}`, // the stock Deployment's, immutable
		"spec.strategy.rollingUpdate.maxUnavailable":      "0",
		"spec.strategy.rollingUpdate.maxSurge":            "1",
		"spec.replicas":                                   "2",
		"spec.template.spec.priorityClassName":            "system-cluster-critical",
		"spec.template.spec.serviceAccountName":           "coredns",
		"spec.template.spec.dnsPolicy":                    "Default",
		"spec.template.spec.securityContext.runAsNonRoot": "true",
		"spec.template.spec.securityContext.runAsUser":    "65532",
		"spec.template.spec.securityContext.sysctls":      `[{"name":"net.ipv4.ip_unprivileged_port_start","value":"53"}]`,
	} {
		if got := str(d, strings.Split(path, ".")...); got != want {
			t.Errorf("Deployment %s = %s, want %s", path, got, want)
		}
	}
	c := container(t, d)
	for path, want := range map[string]string{
		// Nothing added (port 53 through the sysctl), and add: [] explicit,
		// so that a takeover does not keep stock CoreDNS's NET_BIND_SERVICE.
		"securityContext.capabilities":             `{"add":[],"drop":["ALL"]}`,
		"securityContext.readOnlyRootFilesystem":   "true",
		"securityContext.allowPrivilegeEscalation": "false",
		"securityContext.runAsNonRoot":             "true",
		"securityContext.runAsUser":                "65532",
		"ports":                                    `[{"containerPort":53,"name":"dns","protocol":"UDP"},{"containerPort":53,"name":"dns-tcp","protocol":"TCP"},{"containerPort":9153,"name":"metrics","protocol":"TCP"}]`,
	} {
		if got := str(c, strings.Split(path, ".")...); got != want {
			t.Errorf("container %s = %s, want %s", path, got, want)
		}
	}
	// Spread across nodes and zones, each constraint selecting these pods.
	tsc, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "topologySpreadConstraints")
	var keys []string
	for _, x := range tsc {
		m := x.(map[string]any)
		keys = append(keys, m["topologyKey"].(string))
		if sel := fmt.Sprint(m["labelSelector"]); sel != "map[matchLabels:map[k8s-app:kube-dns]]" {
			t.Errorf("topologySpreadConstraint %v selects %s, want the pods' k8s-app: kube-dns", m["topologyKey"], sel)
		}
	}
	if !slices.Equal(keys, []string{"kubernetes.io/hostname", "topology.kubernetes.io/zone"}) {
		t.Errorf("topologySpreadConstraints keys %v", keys)
	}
	pdb := mustFind(t, objs, "PodDisruptionBudget", "coredns")
	if got := str(pdb, "spec"); got != `{"maxUnavailable":1,"selector":{"matchLabels":{"k8s-app":"kube-dns"}}}` {
		t.Errorf("PodDisruptionBudget spec %s", got)
	}
	// The Corefile is a ConfigMap of its own, never the stock coredns.
	cm := mustFind(t, objs, "ConfigMap", "")
	if m := reHashedName.FindStringSubmatch(cm.GetName()); m == nil || m[1] != "coredns" {
		t.Errorf("ConfigMap %q, want coredns-<hash>", cm.GetName())
	}
	if got := configMapOf(t, d); got != cm.GetName() {
		t.Errorf("Deployment mounts ConfigMap %q, rendered %q", got, cm.GetName())
	}
	svc := mustFind(t, objs, "Service", "kube-dns")
	if got := str(svc, "spec", "ports"); got != `[{"name":"dns","port":53,"protocol":"UDP","targetPort":53},{"name":"dns-tcp","port":53,"protocol":"TCP","targetPort":53},{"name":"metrics","port":9153,"protocol":"TCP","targetPort":9153}]` {
		t.Errorf("Service kube-dns ports %s", got)
	}
	if got := str(svc, "spec", "clusterIP"); got != "" {
		t.Errorf("Service kube-dns sets clusterIP %q: taking over, it must keep the one kubelet's clusterDNS names", got)
	}
}

// TestGSLBAndK8gbShapes checks the GSLB server and the k8gb replacement.
func TestGSLBAndK8gbShapes(t *testing.T) {
	t.Run("gslb", func(t *testing.T) {
		objs := render(t, "fleetdns", "fleetdns", "--set", "mode=gslb", "--set", "gslb.geotag=us")
		d := mustFind(t, objs, "Deployment", "fleetdns-gslb")
		if got := str(container(t, d), "env"); got != `[{"name":"FLEETDNS_GEOTAG","value":"us"},{"name":"FLEETDNS_PARENT_NS","value":"192.0.2.53"}]` {
			t.Errorf("env %s", got)
		}
		if got := str(d, "spec", "template", "spec", "priorityClassName"); got != "" {
			t.Errorf("gslb priorityClassName %q, want none", got)
		}
		svc := mustFind(t, objs, "Service", "fleetdns-gslb")
		if got := str(svc, "spec", "type") + " " + str(svc, "spec", "externalTrafficPolicy"); got != "LoadBalancer Local" {
			t.Errorf("Service type, externalTrafficPolicy: %s", got)
		}
		if got := str(svc, "spec", "ports"); strings.Contains(got, "9153") {
			t.Errorf("the GSLB LoadBalancer exposes metrics: %s", got)
		}
		if find(objs, "ServiceMonitor", "") != nil || find(objs, "Service", "fleetdns-gslb-metrics") != nil {
			t.Errorf("monitoring rendered without being enabled")
		}
	})
	t.Run("gslb with a ServiceMonitor", func(t *testing.T) {
		objs := render(t, "fleetdns", "fleetdns", "--set", "mode=gslb", "--set", "prometheus.monitor.enabled=true")
		ms := mustFind(t, objs, "Service", "fleetdns-gslb-metrics")
		sm := mustFind(t, objs, "ServiceMonitor", "fleetdns-gslb")
		sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
		if len(sel) == 0 {
			t.Fatal("ServiceMonitor selects nothing")
		}
		// The monitor finds the metrics Service and only it.
		for _, o := range objs {
			if o.GetKind() != "Service" {
				continue
			}
			matches := true
			for k, v := range sel {
				matches = matches && o.GetLabels()[k] == v
			}
			if matches != (o.GetName() == ms.GetName()) {
				t.Errorf("ServiceMonitor selector %v matches Service %s: %v", sel, o.GetName(), matches)
			}
		}
		if got := str(ms, "spec", "ports"); got != `[{"name":"metrics","port":9153,"protocol":"TCP","targetPort":9153}]` {
			t.Errorf("metrics Service ports %s", got)
		}
		if got := str(sm, "spec", "endpoints"); got != `[{"port":"metrics"}]` {
			t.Errorf("ServiceMonitor endpoints %s", got)
		}
	})
	t.Run("k8gb", func(t *testing.T) {
		objs := render(t, "k8gb-fleetdns", "k8gb", "-f", "charts/fleetdns/values-k8gb.yaml")
		svc := mustFind(t, objs, "Service", "k8gb-coredns")
		// k8gb's operator finds its CoreDNS Service by this label.
		if got := svc.GetLabels()["app.kubernetes.io/name"]; got != "coredns" {
			t.Errorf("Service label app.kubernetes.io/name = %q, want coredns", got)
		}
		if got := str(svc, "spec", "ports"); got != `[{"name":"dns","port":53,"protocol":"UDP","targetPort":5353},{"name":"dns-tcp","port":53,"protocol":"TCP","targetPort":5353}]` {
			t.Errorf("Service ports %s", got)
		}
		d := mustFind(t, objs, "Deployment", "k8gb-coredns")
		if got := str(d, "spec", "template", "spec", "serviceAccountName"); got != "coredns" {
			t.Errorf("serviceAccountName %q", got)
		}
		if got := str(d, "spec", "template", "spec", "securityContext", "sysctls"); got != "" {
			t.Errorf("port 5353 needs no sysctl, got %s", got)
		}
		if got := str(container(t, d), "securityContext", "capabilities"); got != `{"drop":["ALL"]}` {
			t.Errorf("capabilities %s", got)
		}
		cm := mustFind(t, objs, "ConfigMap", "")
		if cf := cm.Object["data"].(map[string]any)["Corefile"].(string); !strings.Contains(cf, "cloud.example.com:5353 {") || !strings.Contains(cf, "labels k8gb.io/dnstype=local") ||
			!strings.Contains(cf, "namespaces shop") || !strings.Contains(cf, "tenancy strict") || !strings.Contains(cf, "bufsize 1232") || !strings.Contains(cf, "rrl {") {
			t.Errorf("Corefile (want named namespaces, tenancy strict, bufsize and rrl; issue 24 finding 9):\n%s", cf)
		}
		// The namespaces line: dnsendpoints read where the Gslbs are, bound there.
		if crb := find(objs, "ClusterRoleBinding", "fleetdns:k8gb-coredns"); crb != nil {
			t.Errorf("a ClusterRoleBinding for a k8scrd block that names its namespaces")
		}
		rb := mustFind(t, objs, "RoleBinding", "fleetdns:k8gb-coredns")
		if got := rb.GetNamespace() + " " + str(rb, "subjects"); got != `shop [{"kind":"ServiceAccount","name":"coredns","namespace":"k8gb"}]` {
			t.Errorf("RoleBinding %s", got)
		}
		if got := rulesOf(t, mustFind(t, objs, "ClusterRole", "fleetdns:k8gb-coredns")); got != "externaldns.k8s.io/dnsendpoints:get,list,watch; /events:create" {
			t.Errorf("ClusterRole rules %s", got)
		}
	})
}

// TestServersAsValues: the Corefile, ports and RBAC of servers set by the
// user, in the CoreDNS chart's format.
func TestServersAsValues(t *testing.T) {
	f := filepath.Join(t.TempDir(), "servers.yaml")
	if err := os.WriteFile(f, []byte(`mode: gslb
servers:
  - zones: [{zone: a.example.}, {zone: b.example., use_tcp: true}]
    port: 53
    plugins:
      - {name: errors}
      - name: k8scrd
        parameters: a.example. b.example.
        configBlock: |-
          namespaces team-a   # the team's own
  - zones: [{zone: c.example., scheme: tls://}]
    port: 853
    plugins: [{name: prometheus, parameters: 0.0.0.0:9253}, {name: k8scrd, parameters: c.example.}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	objs := render(t, "dns", "dns", "-f", f)
	cf, _, _ := unstructured.NestedString(mustFind(t, objs, "ConfigMap", "").Object, "data", "Corefile")
	if want := "a.example.:53 b.example.:53 {\n    errors\n    k8scrd a.example. b.example. {\n        namespaces team-a   # the team's own\n    }\n}\ntls://c.example.:853 {\n    prometheus 0.0.0.0:9253\n    k8scrd c.example.\n}\n"; cf != want {
		t.Errorf("Corefile:\n%s\nwant:\n%s", cf, want)
	}
	// TLS is TCP only; the metrics port is the prometheus plugin's.
	if got := str(mustFind(t, objs, "Service", "dns-fleetdns-gslb"), "spec", "ports"); got != `[{"name":"dns","port":53,"protocol":"UDP","targetPort":53},{"name":"dns-tcp","port":53,"protocol":"TCP","targetPort":53},{"name":"dns-tcp-853","port":853,"protocol":"TCP","targetPort":853}]` {
		t.Errorf("Service ports %s", got)
	}
	if got := str(container(t, mustFind(t, objs, "Deployment", "")), "ports"); !strings.HasSuffix(got, `{"containerPort":9253,"name":"metrics","protocol":"TCP"}]`) {
		t.Errorf("container ports %s", got)
	}
	// One k8scrd reads team-a, the other every namespace: the grant is
	// cluster-wide, and no RoleBinding is needed beside it.
	if find(objs, "ClusterRoleBinding", "fleetdns:dns-fleetdns-gslb") == nil {
		t.Errorf("a k8scrd without namespaces needs a ClusterRoleBinding; have %v", harness.KindsOf(objs))
	}
	if rb := find(objs, "RoleBinding", ""); rb != nil {
		t.Errorf("RoleBinding %s/%s beside the cluster-wide grant", rb.GetNamespace(), rb.GetName())
	}
}

// TestConfigMapNameFollowsCorefile: a new Corefile is a new ConfigMap (and
// so a rollout); anything else keeps the name.
func TestConfigMapNameFollowsCorefile(t *testing.T) {
	name := func(args ...string) string {
		objs := render(t, "fleetdns", "kube-system", args...)
		cm := mustFind(t, objs, "ConfigMap", "")
		if got := configMapOf(t, mustFind(t, objs, "Deployment", "coredns")); got != cm.GetName() {
			t.Fatalf("Deployment mounts %q, rendered %q", got, cm.GetName())
		}
		return cm.GetName()
	}
	base := name()
	if again := name(); again != base {
		t.Errorf("the same values render ConfigMap %q, then %q", base, again)
	}
	if other := name("--set", "replicaCount=3", "--set", "image.tag=0.1.1"); other != base {
		t.Errorf("replicaCount and image changed the ConfigMap name: %q -> %q", base, other)
	}
	changed := name(withPlugin(t, "kubeSystem", "k8scrd", "parameters", "apps.internal corp.internal")...)
	if changed == base {
		t.Errorf("a new k8scrd zone kept ConfigMap %q", base)
	}
	t.Logf("ConfigMap %s -> %s", base, changed)
}

// TestRBACFollowsCorefile: the rules are what the k8scrd block reads.
func TestRBACFollowsCorefile(t *testing.T) {
	objs := render(t, "fleetdns", "fleetdns", append([]string{"--set", "mode=gslb"},
		withPlugin(t, "gslb", "k8scrd", "configBlock", "resources DNSEndpoint Ingress Service HTTPRoute GRPCRoute TLSRoute  # every kind\nnamespaces fleetdns\ntenancy strict")...)...)
	want := "/services:get,list,watch; discovery.k8s.io/endpointslices:get,list,watch; externaldns.k8s.io/dnsendpoints:get,list,watch; " +
		"gateway.networking.k8s.io/gateways,httproutes,grpcroutes,tlsroutes:get,list,watch; networking.k8s.io/ingresses:get,list,watch; /events:create"
	if got := rulesOf(t, mustFind(t, objs, "ClusterRole", "fleetdns:fleetdns-gslb")); got != want {
		t.Errorf("ClusterRole fleetdns:fleetdns-gslb:\n got %s\nwant %s", got, want)
	}
	if got := rulesOf(t, mustFind(t, objs, "ClusterRole", "fleetdns:fleetdns-gslb:cluster")); got != "apiextensions.k8s.io/customresourcedefinitions:get,list,watch; networking.k8s.io/ingressclasses:get,list,watch" {
		t.Errorf("ClusterRole fleetdns:fleetdns-gslb:cluster: %s", got)
	}
	rb := mustFind(t, objs, "RoleBinding", "fleetdns:fleetdns-gslb")
	if rb.GetNamespace() != "fleetdns" || find(objs, "ClusterRoleBinding", "fleetdns:fleetdns-gslb") != nil {
		t.Errorf("the namespaced rules must be bound in namespace fleetdns only (RoleBinding in %q)", rb.GetNamespace())
	}

	// DNSEndpoints only, in two namespaces: no cluster-scoped reads.
	objs = render(t, "fleetdns", "fleetdns", append([]string{"--set", "mode=gslb"},
		withPlugin(t, "gslb", "k8scrd", "configBlock", "namespaces fleetdns shop\ntenancy strict")...)...)
	if got := rulesOf(t, mustFind(t, objs, "ClusterRole", "fleetdns:fleetdns-gslb")); got != "externaldns.k8s.io/dnsendpoints:get,list,watch; /events:create" {
		t.Errorf("DNSEndpoint only: %s", got)
	}
	if find(objs, "ClusterRole", "fleetdns:fleetdns-gslb:cluster") != nil {
		t.Errorf("DNSEndpoint only: a cluster-scoped ClusterRole was rendered")
	}
	var nss []string
	for _, o := range objs {
		if o.GetKind() == "RoleBinding" {
			nss = append(nss, o.GetNamespace())
		}
	}
	if !slices.Equal(nss, []string{"fleetdns", "shop"}) {
		t.Errorf("RoleBindings in %v, want [fleetdns shop]", nss)
	}

	// kube-system: the stock ClusterRole keeps the kubernetes plugin's
	// rules, and the DNSEndpoint rules are fleetdns's own.
	objs = render(t, "fleetdns", "kube-system")
	if got := rulesOf(t, mustFind(t, objs, "ClusterRole", "system:coredns")); got != "/services,namespaces:list,watch; discovery.k8s.io/endpointslices:list,watch" {
		t.Errorf("system:coredns: %s", got)
	}
	if got := rulesOf(t, mustFind(t, objs, "ClusterRole", "fleetdns:k8scrd")); got != "externaldns.k8s.io/dnsendpoints:get,list,watch; /events:create" {
		t.Errorf("fleetdns:k8scrd: %s", got)
	}
	if rb := mustFind(t, objs, "RoleBinding", "fleetdns:k8scrd"); rb.GetNamespace() != "default" {
		t.Errorf("RoleBinding fleetdns:k8scrd in %q, want default (the Corefile's namespaces)", rb.GetNamespace())
	}
}

// TestRenderedObjectsApply applies each shape's objects server-side to the
// API server, as helm would create them, and the ServiceMonitor against the
// prometheus-operator's CRD.
func TestRenderedObjectsApply(t *testing.T) {
	k := harness.SharedKube(t)
	installServiceMonitorCRD(t, k)
	monitored := shape{"gslb with a ServiceMonitor", "fleetdns-monitored", []string{"--set", "mode=gslb", "--set", "prometheus.monitor.enabled=true",
		"--set", "prometheus.monitor.interval=30s", "--set", "prometheus.monitor.honorLabels=true"}}
	for _, s := range append(shapes[1:], monitored) { // kube-system: TestKubeSystemTakeoverWithHelm installs it
		t.Run(s.name, func(t *testing.T) {
			objs := render(t, "fleetdns", s.namespace, s.args...)
			k.EnsureNamespace(t, s.namespace)
			for _, o := range objs {
				if o.GetKind() == "RoleBinding" {
					k.EnsureNamespace(t, o.GetNamespace())
				}
			}
			out, err := k.KubectlStdin(harness.EncodeYAML(t, objs...), "apply", "--server-side", "--field-manager=helm", "-f", "-")
			if err != nil {
				t.Fatalf("kubectl apply --server-side: %v\n%s", err, out)
			}
			if n := strings.Count(out, "serverside-applied"); n != len(objs) {
				t.Fatalf("%d of %d objects applied:\n%s", n, len(objs), out)
			}
			if want := slices.Contains(s.args, "prometheus.monitor.enabled=true"); want != strings.Contains(out, "servicemonitor.monitoring.coreos.com/") {
				t.Errorf("ServiceMonitor applied: %v, want %v:\n%s", !want, want, out)
			}
		})
	}
}

func container(t *testing.T, d *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if len(cs) != 1 {
		t.Fatalf("Deployment %s has %d containers", d.GetName(), len(cs))
	}
	return &unstructured.Unstructured{Object: cs[0].(map[string]any)}
}

// configMapOf is the ConfigMap the Deployment mounts at /etc/coredns.
func configMapOf(t *testing.T, d *unstructured.Unstructured) string {
	t.Helper()
	vs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "volumes")
	for _, v := range vs {
		m := v.(map[string]any)
		if m["name"] == "config-volume" {
			return m["configMap"].(map[string]any)["name"].(string)
		}
	}
	t.Fatalf("Deployment %s has no config-volume", d.GetName())
	return ""
}

// rulesOf writes a (Cluster)Role's rules as "group/resources:verbs; ...".
func rulesOf(t *testing.T, o *unstructured.Unstructured) string {
	t.Helper()
	var r rbacv1.ClusterRole
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r); err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, rule := range r.Rules {
		parts = append(parts, strings.Join(rule.APIGroups, ",")+"/"+strings.Join(rule.Resources, ",")+":"+strings.Join(rule.Verbs, ","))
	}
	return strings.Join(parts, "; ")
}
