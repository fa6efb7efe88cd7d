package chart

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/fleetdns/fleetdns/test/harness"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// byDesign is where the chart differs from the kustomize tree on purpose: a
// path prefix of the defaulted objects, and the word of docs/helm.md's
// table that explains it. Every entry must be a real difference (so the list
// cannot go stale) and every difference must have an entry.
type byDesign struct{ path, doc string }

// deploy/kube-system renders what the chart's kubeSystem shape renders.
var kubeSystemDiffs = []byDesign{}

var gslbDiffs = []byDesign{
	{"Deployment.spec.selector", "app.kubernetes.io/instance"},
	{"Deployment.spec.template.spec.topologySpreadConstraints", "app.kubernetes.io/instance"},
	{"Service.spec.selector", "app.kubernetes.io/instance"},
}

// TestChartMatchesKustomize renders deploy/kube-system and deploy/gslb with
// kubectl kustomize and the chart's two shapes with helm template, and
// compares what a cluster would run: the same Corefile, the same
// permissions for the ServiceAccount, and the Deployment and Service as the
// API server defaults them (server-side dry run) modulo names, labels and
// the differences docs/helm.md lists.
func TestChartMatchesKustomize(t *testing.T) {
	k := harness.SharedKube(t)
	root := harness.ModuleRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs/helm.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, dir, ns string
		args          []string
		diffs         []byDesign
		chartOnly     []string // kinds the chart adds
		kustomizeOnly []string // kinds of the kustomize tree the chart leaves to helm
	}{
		{"kubeSystem", "deploy/kube-system", "kube-system", nil, kubeSystemDiffs, nil, nil},
		{"gslb", "deploy/gslb", "fleetdns", []string{"--set", "mode=gslb"}, gslbDiffs, nil, []string{"Namespace"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			kz := k.Kustomize(t, c.dir)
			ch := render(t, "fleetdns", c.ns, c.args...)

			// Kinds.
			kinds := func(objs []*unstructured.Unstructured) map[string]bool {
				m := map[string]bool{}
				for _, o := range objs {
					m[o.GetKind()] = true
				}
				return m
			}
			kk, ck := kinds(kz), kinds(ch)
			for kind := range ck {
				if !kk[kind] && !slices.Contains(c.chartOnly, kind) && !isRBAC(kind) {
					t.Errorf("the chart renders a %s that %s has not", kind, c.dir)
				}
			}
			for kind := range kk {
				if !ck[kind] && !slices.Contains(c.kustomizeOnly, kind) && !isRBAC(kind) {
					t.Errorf("%s has a %s that the chart does not render", c.dir, kind)
				}
			}
			for _, kind := range append(slices.Clone(c.chartOnly), c.kustomizeOnly...) {
				if !strings.Contains(string(doc), kind) {
					t.Errorf("docs/helm.md does not say why only one of them has a %s", kind)
				}
			}

			kd, cd := mustFind(t, kz, "Deployment", ""), mustFind(t, ch, "Deployment", "")

			// The Corefile each Deployment mounts.
			kc := corefileOf(t, kz, configMapOf(t, kd))
			cc := corefileOf(t, ch, configMapOf(t, cd))
			if a, b := harness.NormCorefile(kc), harness.NormCorefile(cc); a != b {
				t.Errorf("Corefiles differ:\n--- %s\n%s\n--- chart\n%s", c.dir, a, b)
			}

			// Permissions of the ServiceAccount each Deployment runs as.
			kg := grantsOf(t, kz, str(kd, "spec", "template", "spec", "serviceAccountName"), c.ns)
			cg := grantsOf(t, ch, str(cd, "spec", "template", "spec", "serviceAccountName"), c.ns)
			if !slices.Equal(kg, cg) {
				t.Errorf("permissions differ:\n--- %s\n%s\n--- chart\n%s", c.dir, strings.Join(kg, "\n"), strings.Join(cg, "\n"))
			}
			t.Logf("%d permissions, the same", len(kg))

			// Deployment and Service, defaulted by the API server.
			k.EnsureNamespace(t, "compare")
			envFromToEnv(t, kz, kd)
			var diffs []string
			for _, kind := range []string{"Deployment", "Service"} {
				a := defaulted(t, k, mustFind(t, kz, kind, ""))
				b := defaulted(t, k, mustFind(t, ch, kind, ""))
				diff(kind, a, b, &diffs)
			}
			used := map[string]bool{}
			for _, d := range diffs {
				ok := false
				for _, w := range c.diffs {
					if strings.HasPrefix(d, w.path) {
						ok, used[w.path] = true, true
					}
				}
				if !ok {
					t.Errorf("differs from %s: %s", c.dir, d)
				}
			}
			for _, w := range c.diffs {
				if !used[w.path] {
					t.Errorf("listed as a difference by design, but the same: %s", w.path)
				}
				if !strings.Contains(string(doc), w.doc) {
					t.Errorf("docs/helm.md does not explain %s (no %q)", w.path, w.doc)
				}
			}
			t.Logf("%d differences, each by design", len(diffs))
		})
	}
}

func isRBAC(kind string) bool {
	switch kind {
	case "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding":
		return true
	}
	return false
}

func corefileOf(t *testing.T, objs []*unstructured.Unstructured, name string) string {
	t.Helper()
	cm := mustFind(t, objs, "ConfigMap", name)
	s, _, _ := unstructured.NestedString(cm.Object, "data", "Corefile")
	return s
}

// grantsOf lists what the ServiceAccount may do, one "namespace group/resource
// verb" a line (namespace * for every namespace), from the rendered RBAC.
func grantsOf(t *testing.T, objs []*unstructured.Unstructured, sa, ns string) []string {
	t.Helper()
	rules := map[string][]rbacv1.PolicyRule{} // Kind/namespace/name -> rules
	for _, o := range objs {
		if o.GetKind() == "Role" || o.GetKind() == "ClusterRole" {
			var r rbacv1.ClusterRole
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r); err != nil {
				t.Fatal(err)
			}
			rules[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = r.Rules
		}
	}
	set := map[string]bool{}
	for _, o := range objs {
		if o.GetKind() != "RoleBinding" && o.GetKind() != "ClusterRoleBinding" {
			continue
		}
		var b rbacv1.RoleBinding
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &b); err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool {
			return s.Kind == "ServiceAccount" && s.Name == sa && s.Namespace == ns
		}) {
			continue
		}
		where := o.GetNamespace()
		if where == "" {
			where = "*"
		}
		ref := b.RoleRef.Kind + "/" + map[bool]string{true: o.GetNamespace(), false: ""}[b.RoleRef.Kind == "Role"] + "/" + b.RoleRef.Name
		rs, ok := rules[ref]
		if !ok {
			t.Errorf("%s %s binds %s, which is not rendered", o.GetKind(), o.GetName(), ref)
		}
		for _, r := range rs {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						set[fmt.Sprintf("%s %s/%s %s", where, g, res, v)] = true
					}
				}
			}
		}
	}
	var out []string
	for g := range set {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}

// envFromToEnv turns the kustomize Deployment's envFrom (the generated
// fleetdns-cluster ConfigMap) into the env list the chart writes.
func envFromToEnv(t *testing.T, objs []*unstructured.Unstructured, d *unstructured.Unstructured) {
	t.Helper()
	cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	c := cs[0].(map[string]any)
	ef, _ := c["envFrom"].([]any)
	if len(ef) == 0 {
		return
	}
	var env []any
	for _, e := range ef {
		name := e.(map[string]any)["configMapRef"].(map[string]any)["name"].(string)
		data, _, _ := unstructured.NestedStringMap(mustFind(t, objs, "ConfigMap", name).Object, "data")
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			env = append(env, map[string]any{"name": k, "value": data[k]})
		}
	}
	delete(c, "envFrom")
	c["env"] = env
	if err := unstructured.SetNestedSlice(d.Object, cs, "spec", "template", "spec", "containers"); err != nil {
		t.Fatal(err)
	}
}

// defaulted is the object as the API server would store it (server-side
// dry run in namespace compare, under one name), without metadata (labels,
// annotations), the pod template's labels, the ConfigMap's name and the
// allocated cluster IPs. The selectors stay.
func defaulted(t *testing.T, k *harness.Kube, o *unstructured.Unstructured) map[string]any {
	t.Helper()
	o = o.DeepCopy()
	o.SetNamespace("compare")
	o.SetName("compare")
	out, err := k.KubectlStdin(harness.EncodeYAML(t, o), "apply", "--server-side", "--dry-run=server", "--field-manager=compare", "-o", "json", "-f", "-")
	if err != nil {
		t.Fatalf("dry-run %s: %v\n%s", o.GetKind(), err, out)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("dry-run %s: %v\n%s", o.GetKind(), err, out)
	}
	return normalize(m)
}

// normalize strips what defaulted's comparison leaves out.
func normalize(m map[string]any) map[string]any {
	delete(m, "metadata")
	delete(m, "status")
	unstructured.RemoveNestedField(m, "spec", "template", "metadata", "labels")
	if spec, ok := m["spec"].(map[string]any); ok {
		delete(spec, "clusterIP")
		delete(spec, "clusterIPs")
	}
	if vs, ok, _ := unstructured.NestedSlice(m, "spec", "template", "spec", "volumes"); ok {
		for _, v := range vs {
			if v := v.(map[string]any); v["name"] == "config-volume" {
				v["configMap"].(map[string]any)["name"] = "COREFILE"
			}
		}
		_ = unstructured.SetNestedSlice(m, vs, "spec", "template", "spec", "volumes")
	}
	return m
}

// diff appends the paths at which a and b differ; lists of named items
// (containers, ports, volumes, env) are matched by name.
func diff(path string, a, b any, out *[]string) {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			break
		}
		keys := map[string]bool{}
		for k := range av {
			keys[k] = true
		}
		for k := range bv {
			keys[k] = true
		}
		for k := range keys {
			diff(path+"."+k, av[k], bv[k], out)
		}
		return
	case []any:
		bv, ok := b.([]any)
		if !ok {
			break
		}
		an, bn := named(av), named(bv)
		if an != nil && bn != nil {
			keys := map[string]bool{}
			for k := range an {
				keys[k] = true
			}
			for k := range bn {
				keys[k] = true
			}
			for k := range keys {
				diff(path+"["+k+"]", an[k], bn[k], out)
			}
			return
		}
	}
	if !reflect.DeepEqual(a, b) {
		*out = append(*out, fmt.Sprintf("%s: %s | chart: %s", path, js(a), js(b)))
	}
}

func named(l []any) map[string]any {
	m := map[string]any{}
	for _, x := range l {
		o, ok := x.(map[string]any)
		if !ok {
			return nil
		}
		n, ok := o["name"].(string)
		if !ok {
			return nil
		}
		if p, ok := o["protocol"].(string); ok {
			n += "/" + p
		}
		m[n] = o
	}
	return m
}

func js(v any) string {
	if v == nil {
		return "(none)"
	}
	b, _ := json.Marshal(v)
	return string(b)
}
