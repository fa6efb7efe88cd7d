package k8gb_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/fleetdns/fleetdns/test/harness"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The CRD files fleetdns ships for k8gb's two groups.
var gslbCRDs = map[string]string{
	"gslbs.k8gb.io":       "deploy/crd/gslbs.k8gb.io.yaml",
	"gslbs.k8gb.absa.oss": "deploy/crd/gslbs.k8gb.absa.oss.yaml",
}

var crdsOnce sync.Map // *harness.Kube -> struct{}

// installGslbCRDs installs both Gslb CRDs on k, once per API server.
func installGslbCRDs(t testing.TB, k *harness.Kube) {
	t.Helper()
	if _, done := crdsOnce.Load(k); done {
		return
	}
	root := harness.ModuleRoot(t)
	for name, path := range gslbCRDs {
		b, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			t.Fatal(err)
		}
		k.Apply(t, string(b))
		k.WaitCRDEstablished(t, name)
	}
	crdsOnce.Store(k, struct{}{})
}

func gslbGVR(group string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: group, Version: "v1beta1", Resource: "gslbs"}
}

// Every Gslb of k8gb's documented examples is accepted by the CRDs, and
// what k8scrd reads comes back as written; a Gslb k8gb's CRD refuses (no
// strategy, a negative TTL) is refused too.
func TestCRDsAcceptK8gbExamples(t *testing.T) {
	k := harness.SharedKube(t)
	installGslbCRDs(t, k)
	files, err := filepath.Glob("testdata/k8gb-examples/*.yaml")
	if err != nil || len(files) < 5 {
		t.Fatalf("examples: %v (%d files)", err, len(files))
	}
	gslbs := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := harness.DecodeYAML(string(b))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, o := range objs {
			if o.GetKind() != "Gslb" {
				continue // the examples' Ingresses and Services
			}
			gslbs++
			ns := o.GetNamespace()
			if ns == "" {
				ns = "default"
			}
			k.EnsureNamespace(t, ns)
			if _, err := k.TryApply(harness.Context(t), harness.EncodeYAML(t, o)); err != nil {
				t.Errorf("%s: Gslb %s/%s refused: %v", f, ns, o.GetName(), err)
				continue
			}
			group := strings.Split(o.GetAPIVersion(), "/")[0]
			got, err := k.Dynamic().Resource(gslbGVR(group)).Namespace(ns).Get(harness.Context(t), o.GetName(), metav1.GetOptions{})
			if err != nil {
				t.Errorf("%s: get %s/%s: %v", f, ns, o.GetName(), err)
				continue
			}
			for _, field := range [][]string{{"spec", "strategy"}, {"spec", "resourceRef"}, {"spec", "ingress"}} {
				want, _, _ := unstructured.NestedFieldNoCopy(o.Object, field...)
				have, _, _ := unstructured.NestedFieldNoCopy(got.Object, field...)
				if !equalJSON(want, have) {
					t.Errorf("%s: %s/%s %s stored as %v, written %v", f, ns, o.GetName(), strings.Join(field, "."), have, want)
				}
			}
		}
	}
	if gslbs < 7 {
		t.Errorf("%d Gslbs in the examples, want 7", gslbs)
	}
	for _, bad := range []string{
		"apiVersion: k8gb.io/v1beta1\nkind: Gslb\nmetadata: {name: nostrategy, namespace: default}\nspec:\n  resourceRef: {apiVersion: v1, kind: Service, name: x}\n",
		"apiVersion: k8gb.io/v1beta1\nkind: Gslb\nmetadata: {name: badttl, namespace: default}\nspec:\n  strategy: {type: roundRobin, dnsTtlSeconds: -1}\n",
		"apiVersion: k8gb.io/v1beta1\nkind: Gslb\nmetadata: {name: badpolicy, namespace: default}\nspec:\n  strategy: {type: roundRobin}\n  serviceHealthPolicy: Most\n",
	} {
		if _, err := k.TryApply(harness.Context(t), bad); err == nil {
			t.Errorf("accepted, want refused:\n%s", bad)
		}
	}
}

func equalJSON(a, b any) bool {
	return strings.TrimSpace(toJSON(a)) == strings.TrimSpace(toJSON(b))
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
