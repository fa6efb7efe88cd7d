package monitoring

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/test/harness"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// operatorVersion is the prometheus-operator release whose CRDs the objects
// are validated against, read from the Go module cache (the module is not a
// dependency of fleetdns: go mod download fetches it, and
// scripts/test-deps.sh does so ahead of the tests, so this works offline).
const operatorVersion = "v0.94.0"

const operatorModule = "github.com/prometheus-operator/prometheus-operator"

// operatorCRDs are the CRDs deploy/monitoring uses (ServiceMonitor for the
// chart's, which the Helm values may turn on).
var operatorCRDs = []string{"podmonitors", "servicemonitors", "prometheusrules"}

// operatorDir returns the module's folder in the module cache.
func operatorDir(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		harness.Missing(t, "go is not on PATH: it reads the prometheus-operator CRDs from the module cache")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "mod", "download", "-json", operatorModule+"@"+operatorVersion)
	cmd.Dir = t.TempDir() // outside the fleetdns module: go.mod stays as it is
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOTOOLCHAIN=local")
	out, err := cmd.Output()
	var info struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &info); jerr != nil || info.Dir == "" {
		harness.Missing(t, "go mod download %s@%s (scripts/test-deps.sh downloads it): %v %s %s", operatorModule, operatorVersion, err, info.Error, out)
	}
	return info.Dir
}

// TestDepsDownloadTheOperatorVersion: scripts/test-deps.sh puts the same
// release into the module cache, so that the tests need no network.
func TestDepsDownloadTheOperatorVersion(t *testing.T) {
	if want := "PROMETHEUS_OPERATOR_VERSION:-" + operatorVersion + "}"; !strings.Contains(string(readFile(t, "scripts/test-deps.sh")), want) {
		t.Errorf("scripts/test-deps.sh does not download prometheus-operator %s (no %q)", operatorVersion, want)
	}
}

// installOperatorCRDs applies the CRDs server-side and waits until they are
// served.
func installOperatorCRDs(t *testing.T, k *harness.Kube) {
	t.Helper()
	dir := filepath.Join(operatorDir(t), "example", "prometheus-operator-crd")
	for _, c := range operatorCRDs {
		k.Kubectl(t, "apply", "--server-side", "-f", filepath.Join(dir, "monitoring.coreos.com_"+c+".yaml"))
	}
	for _, c := range operatorCRDs {
		k.WaitCRDEstablished(t, c+".monitoring.coreos.com")
	}
}

// render runs kubectl kustomize on a folder of the repository.
func render(t *testing.T, rel string) []*unstructured.Unstructured {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := harness.Run(ctx, filepath.Join(harness.KubeBin(t), "kubectl"), "kustomize", filepath.Join(harness.ModuleRoot(t), rel))
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", rel, err, out)
	}
	objs, err := harness.DecodeYAML(out)
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v", rel, err)
	}
	return objs
}

func find(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// TestObjectsApplyAgainstOperatorCRDs applies deploy/monitoring and
// deploy/monitoring/gslb as the README says, server-side, against the
// operator's CRDs: their schemas validate every field (kubectl's default
// --validate=strict refuses unknown ones, which the misspelled PodMonitor
// shows). The dashboard ConfigMap carries dashboard.json as it is.
func TestObjectsApplyAgainstOperatorCRDs(t *testing.T) {
	k := harness.SharedKube(t)
	installOperatorCRDs(t, k)
	root := harness.ModuleRoot(t)

	out := k.Kubectl(t, "apply", "--server-side", "-k", filepath.Join(root, "deploy/monitoring"))
	for _, want := range []string{
		"podmonitor.monitoring.coreos.com/fleetdns-kube-system serverside-applied",
		"prometheusrule.monitoring.coreos.com/fleetdns serverside-applied",
		"configmap/fleetdns-dashboard serverside-applied",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl apply -k deploy/monitoring: no %q in:\n%s", want, out)
		}
	}
	// deploy/gslb creates namespace fleetdns; apply its Namespace as that would.
	k.Kubectl(t, "apply", "--server-side", "-f", filepath.Join(root, "deploy/gslb/namespace.yaml"))
	out = k.Kubectl(t, "apply", "--server-side", "-k", filepath.Join(root, "deploy/monitoring/gslb"))
	if want := "podmonitor.monitoring.coreos.com/fleetdns-gslb serverside-applied"; !strings.Contains(out, want) {
		t.Errorf("kubectl apply -k deploy/monitoring/gslb: no %q in:\n%s", want, out)
	}

	got := k.Kubectl(t, "-n", "kube-system", "get", "configmap", "fleetdns-dashboard", "-o", "jsonpath={.data.fleetdns\\.json}")
	if got != string(readFile(t, dashboardFile)) {
		t.Errorf("ConfigMap fleetdns-dashboard's fleetdns.json differs from %s", dashboardFile)
	}
	if n := k.Kubectl(t, "-n", "kube-system", "get", "prometheusrule", "fleetdns", "-o", "jsonpath={.spec.groups[*].rules[*].alert}"); len(strings.Fields(n)) != len(alerts(loadRules(t))) {
		t.Errorf("stored PrometheusRule has alerts %q, want the %d of %s", n, len(alerts(loadRules(t))), ruleFile)
	}

	bad := `apiVersion: monitoring.coreos.com/v1
kind: PodMonitor
metadata:
  name: misspelled
  namespace: kube-system
spec:
  selector: {matchLabels: {k8s-app: kube-dns}}
  podMetricEndpoints:
    - port: metrics
`
	out, err := k.KubectlStdin(bad, "apply", "--server-side", "--dry-run=server", "-f", "-")
	if err == nil || !strings.Contains(out, "podMetricEndpoints") {
		t.Errorf("a PodMonitor with the misspelled field podMetricEndpoints was accepted (schema not enforced?): %v\n%s", err, out)
	}
}

// TestPodMonitorsSelectTheShippedPods checks each PodMonitor against the
// Deployment it is for, as rendered from deploy/: its namespace selection,
// label selector and port name select that Deployment's pods, and the port
// is the one the Corefile's prometheus plugin listens on.
func TestPodMonitorsSelectTheShippedPods(t *testing.T) {
	for _, c := range []struct{ monitoring, deploy, deployment string }{
		{"deploy/monitoring", "deploy/kube-system", "coredns"},
		{"deploy/monitoring/gslb", "deploy/gslb", "fleetdns-gslb"},
	} {
		t.Run(strings.ReplaceAll(c.deploy, "/", "_"), func(t *testing.T) {
			pms := find(render(t, c.monitoring), "PodMonitor")
			if len(pms) != 1 {
				t.Fatalf("%s renders %d PodMonitors, want 1", c.monitoring, len(pms))
			}
			pm := pms[0]
			objs := render(t, c.deploy)
			var dep *unstructured.Unstructured
			for _, d := range find(objs, "Deployment") {
				if d.GetName() == c.deployment {
					dep = d
				}
			}
			if dep == nil {
				t.Fatalf("%s renders no Deployment %s", c.deploy, c.deployment)
			}
			ns := dep.GetNamespace()
			names, _, _ := unstructured.NestedStringSlice(pm.Object, "spec", "namespaceSelector", "matchNames")
			if !slices.Contains(names, ns) {
				t.Errorf("PodMonitor %s selects namespaces %v, not %s where Deployment %s runs", pm.GetName(), names, ns, c.deployment)
			}
			sel, _, _ := unstructured.NestedStringMap(pm.Object, "spec", "selector", "matchLabels")
			podLabels, _, _ := unstructured.NestedStringMap(dep.Object, "spec", "template", "metadata", "labels")
			if len(sel) == 0 {
				t.Errorf("PodMonitor %s has no matchLabels", pm.GetName())
			}
			for key, v := range sel {
				if podLabels[key] != v {
					t.Errorf("PodMonitor %s selects %s=%s; the pods of %s have labels %v", pm.GetName(), key, v, c.deployment, podLabels)
				}
			}
			ports := map[string]string{} // name -> containerPort
			containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
			for _, ct := range containers {
				ps, _, _ := unstructured.NestedSlice(ct.(map[string]any), "ports")
				for _, p := range ps {
					pm := p.(map[string]any)
					name, _ := pm["name"].(string)
					ports[name] = fmt.Sprint(pm["containerPort"]) // int64 or float64, as decoded
				}
			}
			eps, _, _ := unstructured.NestedSlice(pm.Object, "spec", "podMetricsEndpoints")
			if len(eps) == 0 {
				t.Fatalf("PodMonitor %s has no podMetricsEndpoints", pm.GetName())
			}
			corefile := ""
			for _, cm := range find(objs, "ConfigMap") {
				if s, ok, _ := unstructured.NestedString(cm.Object, "data", "Corefile"); ok {
					corefile += s
				}
			}
			for _, ep := range eps {
				name, _ := ep.(map[string]any)["port"].(string)
				port, ok := ports[name]
				if !ok {
					t.Errorf("PodMonitor %s scrapes port %q; the containers of %s name only %v", pm.GetName(), name, c.deployment, ports)
					continue
				}
				if want := "prometheus :" + port; !strings.Contains(corefile, want) {
					t.Errorf("port %s is %s, but the Corefile of %s has no %q", name, port, c.deploy, want)
				}
			}
		})
	}
}
