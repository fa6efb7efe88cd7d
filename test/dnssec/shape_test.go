package dnssec_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/test/harness"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// helmTemplate renders the chart (helm template, its state in a folder of
// the test's own) and returns the objects.
func helmTemplate(t *testing.T, args ...string) []*unstructured.Unstructured {
	t.Helper()
	h := os.Getenv("FLEETDNS_HELM")
	if h == "" {
		h = filepath.Join(harness.KubeBin(t), "helm")
	}
	if _, err := os.Stat(h); err != nil {
		harness.Missing(t, "helm: not in %s and FLEETDNS_HELM unset (scripts/test-deps.sh builds it)", filepath.Dir(h))
	}
	home := t.TempDir()
	cmd := exec.Command(h, append([]string{"template", "fleetdns", "charts/fleetdns", "--namespace", "fleetdns"}, args...)...)
	cmd.Dir = harness.ModuleRoot(t)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(home, "c"), "HELM_CONFIG_HOME="+filepath.Join(home, "f"),
		"HELM_DATA_HOME="+filepath.Join(home, "d"), "KUBECONFIG=/nonexistent")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm template: %v\n%s", err, out.String())
	}
	objs, err := harness.DecodeYAML(out.String())
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// chartCorefile is the Corefile of the chart's gslb mode with
// gslb.dnssec.keySecret set.
func chartCorefile(t *testing.T, objs []*unstructured.Unstructured) string {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" {
			if cf, ok, _ := unstructured.NestedString(o.Object, "data", "Corefile"); ok {
				return cf
			}
		}
	}
	t.Fatal("the chart rendered no Corefile")
	return ""
}

// componentObjects renders deploy/gslb with the dnssec component, as a
// cluster's kustomization would add it.
func componentObjects(t *testing.T, k *harness.Kube) []*unstructured.Unstructured {
	t.Helper()
	root := harness.ModuleRoot(t)
	dir := filepath.Join(t.TempDir(), "overlay")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	base, _ := filepath.Rel(dir, filepath.Join(root, "deploy/gslb"))
	comp, _ := filepath.Rel(dir, filepath.Join(root, "deploy/gslb/dnssec"))
	kz := "resources:\n  - " + base + "\ncomponents:\n  - " + comp + "\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kz), 0o644); err != nil {
		t.Fatal(err)
	}
	objs, err := harness.DecodeYAML(k.Kubectl(t, "kustomize", dir))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// TestSignedShapes: deploy/gslb's dnssec component and the chart's
// gslb.dnssec.keySecret render the same signed Corefile (deploy/gslb's,
// with a dnssec block in front of localtargets), and both mount the key
// Secret read-only where that block reads the keys. The rendered
// Deployments are accepted by the API server (server-side dry run).
func TestSignedShapes(t *testing.T) {
	k := harness.SharedKube(t)
	kz := componentObjects(t, k)
	ch := helmTemplate(t, "--set", "mode=gslb", "--set", "gslb.dnssec.keySecret=fleetdns-dnssec-keys")

	var kcf string
	for _, o := range kz {
		if o.GetKind() == "ConfigMap" && o.GetName() == "fleetdns-gslb" {
			kcf, _, _ = unstructured.NestedString(o.Object, "data", "Corefile")
		}
	}
	unsigned := harness.ShippedCorefile(t, "deploy/gslb/configmap.yaml", "fleetdns-gslb")
	want := strings.Replace(harness.NormCorefile(unsigned), "\nlocaltargets gslb.example.com\n",
		"\ndnssec gslb.example.com {\nkey file /etc/fleetdns/dnssec/ksk /etc/fleetdns/dnssec/zsk\ncache_capacity 10000\n}\nlocaltargets gslb.example.com\n", 1)
	if got := harness.NormCorefile(kcf); got != want {
		t.Errorf("deploy/gslb/dnssec's Corefile is not deploy/gslb's with the dnssec block:\n%s\n--- want\n%s", got, want)
	}
	if got := harness.NormCorefile(chartCorefile(t, ch)); got != want {
		t.Errorf("the chart's signed Corefile differs from deploy/gslb/dnssec's:\n%s\n--- want\n%s", got, want)
	}
	if strings.Contains(chartCorefile(t, helmTemplate(t, "--set", "mode=gslb")), "dnssec") {
		t.Error("the chart signs without gslb.dnssec.keySecret")
	}

	k.EnsureNamespace(t, "fleetdns")
	for name, objs := range map[string][]*unstructured.Unstructured{"deploy/gslb/dnssec": kz, "chart": ch} {
		var d *unstructured.Unstructured
		for _, o := range objs {
			if o.GetKind() == "Deployment" {
				d = o
			}
		}
		if d == nil {
			t.Fatalf("%s: no Deployment", name)
		}
		out, err := k.KubectlStdin(harness.EncodeYAML(t, d), "apply", "--server-side", "--dry-run=server", "-o", "jsonpath={.spec.template.spec.volumes[?(@.name=='dnssec-keys')].secret.secretName} {.spec.template.spec.containers[0].volumeMounts[?(@.name=='dnssec-keys')]}", "-f", "-")
		if err != nil {
			t.Fatalf("%s: the API server refuses the Deployment: %v\n%s", name, err, out)
		}
		if !strings.HasPrefix(out, "fleetdns-dnssec-keys ") || !strings.Contains(out, `"mountPath":"/etc/fleetdns/dnssec"`) || !strings.Contains(out, `"readOnly":true`) {
			t.Errorf("%s: the key Secret is not mounted read-only at /etc/fleetdns/dnssec: %s", name, out)
		}
	}
}
