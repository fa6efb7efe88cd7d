package chart

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/test/harness"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// helmBin is $FLEETDNS_HELM, else the helm that scripts/test-deps.sh links
// beside kubectl.
func helmBin(t *testing.T) string {
	t.Helper()
	if h := os.Getenv("FLEETDNS_HELM"); h != "" {
		return h
	}
	h := filepath.Join(harness.KubeBin(t), "helm")
	if _, err := os.Stat(h); err != nil {
		harness.Missing(t, "helm: not in %s and FLEETDNS_HELM unset (scripts/test-deps.sh builds it)", filepath.Dir(h))
	}
	return h
}

// helm runs helm with its state (cache, config, data) in a folder of the
// test's own, so that nothing from the user's helm is read or written.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(helmBin(t), args...)
	cmd.Dir = harness.ModuleRoot(t)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
		"KUBECONFIG=/nonexistent", // every command that talks to a cluster names one
	)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), err
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("helm %s: no answer in 2 minutes:\n%s", strings.Join(args, " "), out.String())
		return "", nil
	}
}

func mustHelm(t *testing.T, args ...string) string {
	t.Helper()
	out, err := helm(t, args...)
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// shape is one way users install the chart.
type shape struct {
	name      string
	namespace string
	args      []string // values flags
}

var shapes = []shape{
	{"kubeSystem", "kube-system", nil},
	{"gslb", "fleetdns", []string{"--set", "mode=gslb"}},
	{"k8gb", "k8gb", []string{"-f", "charts/fleetdns/values-k8gb.yaml"}},
}

// render is `helm template` of the chart as release name in namespace ns.
func render(t *testing.T, release, ns string, args ...string) []*unstructured.Unstructured {
	t.Helper()
	out := mustHelm(t, append([]string{"template", release, "charts/fleetdns", "--namespace", ns}, args...)...)
	objs, err := harness.DecodeYAML(out)
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	if len(objs) == 0 {
		t.Fatalf("helm template rendered nothing:\n%s", out)
	}
	return objs
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && (name == "" || o.GetName() == name) {
			return o
		}
	}
	return nil
}

func mustFind(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	o := find(objs, kind, name)
	if o == nil {
		t.Fatalf("no %s %q rendered; have %v", kind, name, harness.KindsOf(objs))
	}
	return o
}

// str reads a string at a path of fields.
func str(o *unstructured.Unstructured, path ...string) string {
	s, _, _ := unstructured.NestedFieldNoCopy(o.Object, path...)
	switch v := s.(type) {
	case string:
		return v
	case nil:
		return ""
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}

// withPlugin writes a values file whose `key` servers (kubeSystem.servers or
// gslb.servers, copied from values.yaml: helm replaces lists whole, so
// --set cannot change one plugin) have plugin `name`'s field set to value,
// and returns the flags that pass it.
func withPlugin(t *testing.T, key, name, field, value string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(harness.ModuleRoot(t), "charts/fleetdns/values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var vals map[string]any
	if err := yaml.Unmarshal(b, &vals); err != nil {
		t.Fatal(err)
	}
	servers := vals[key].(map[string]any)["servers"].([]any)
	found := false
	for _, p := range servers[0].(map[string]any)["plugins"].([]any) {
		if m := p.(map[string]any); m["name"] == name {
			m[field], found = value, true
		}
	}
	if !found {
		t.Fatalf("values.yaml %s.servers has no plugin %s", key, name)
	}
	out, err := yaml.Marshal(map[string]any{key: map[string]any{"servers": servers}})
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(f, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"-f", f}
}
