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
		t.Fatalf("no %s %q rendered; have %v", kind, name, kindsOf(objs))
	}
	return o
}

func kindsOf(objs []*unstructured.Unstructured) []string {
	var ks []string
	for _, o := range objs {
		ks = append(ks, o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName())
	}
	return ks
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
