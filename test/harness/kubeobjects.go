package harness

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"
)

const sigterm = syscall.SIGTERM

// CRDPath is the DNSEndpoint CRD in the repository, relative to its root.
const CRDPath = "deploy/crd/dnsendpoints.externaldns.k8s.io.yaml"

// FieldManager is the server-side apply field manager of the tests.
const FieldManager = "fleetdns-test"

var (
	// DNSEndpointGVR is external-dns's DNSEndpoint resource.
	DNSEndpointGVR = schema.GroupVersionResource{Group: "externaldns.k8s.io", Version: "v1alpha1", Resource: "dnsendpoints"}
	crdGVR         = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func (k *Kube) clients() {
	k.clientOnce.Do(func() {
		k.dyn = dynamic.NewForConfigOrDie(k.Config)
		k.cs = kubernetes.NewForConfigOrDie(k.Config)
		dc := discovery.NewDiscoveryClientForConfigOrDie(k.Config)
		k.mapper = &mapper{cache: memory.NewMemCacheClient(dc)}
		k.mapper.rm = restmapper.NewDeferredDiscoveryRESTMapper(k.mapper.cache)
	})
}

// Dynamic is an admin dynamic client.
func (k *Kube) Dynamic() dynamic.Interface { k.clients(); return k.dyn }

// Clientset is an admin typed client.
func (k *Kube) Clientset() kubernetes.Interface { k.clients(); return k.cs }

type mapper struct {
	cache discovery.CachedDiscoveryInterface
	rm    *restmapper.DeferredDiscoveryRESTMapper
}

// resource maps a kind to its resource, refreshing discovery once when the
// kind is new (a CRD installed since the last look).
func (m *mapper) resource(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	mp, err := m.rm.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil && meta.IsNoMatchError(err) {
		m.rm.Reset()
		mp, err = m.rm.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	return mp, err
}

// installCRD applies the DNSEndpoint CRD, waits until it is Established, and
// then 2 s more: objects created in the first 2 s after that wait 2 s in the
// API server, which would distort propagation measurements.
func (k *Kube) installCRD(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	objs, err := k.apply(ctx, string(b), false)
	if err != nil {
		return fmt.Errorf("install %s: %w", path, err)
	}
	for _, o := range objs {
		if err := k.waitEstablished(ctx, o.GetName()); err != nil {
			return err
		}
	}
	time.Sleep(2 * time.Second)
	return nil
}

func (k *Kube) waitEstablished(ctx context.Context, name string) error {
	for {
		crd, err := k.Dynamic().Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			for _, c := range conds {
				cm, _ := c.(map[string]any)
				if cm["type"] == "Established" && cm["status"] == "True" {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CRD %s not Established: %v", name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// WaitCRDEstablished waits until the named CRD is Established (for tests that
// install CRDs of their own, e.g. from deploy/).
func (k *Kube) WaitCRDEstablished(t testing.TB, name string) {
	t.Helper()
	if err := k.waitEstablished(Context(t), name); err != nil {
		t.Fatal(err)
	}
}

// DecodeYAML splits a multi-document YAML or JSON manifest into objects
// (empty documents skipped).
func DecodeYAML(manifest string) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	var out []*unstructured.Unstructured
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, err
		}
		if len(obj) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: obj})
	}
}

// EncodeYAML writes objects as one multi-document YAML manifest, the
// reverse of DecodeYAML (for kubectl's stdin).
func EncodeYAML(t testing.TB, objs ...*unstructured.Unstructured) string {
	t.Helper()
	var b strings.Builder
	for _, o := range objs {
		y, err := yaml.Marshal(o.Object)
		if err != nil {
			t.Fatalf("%s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	return b.String()
}

// ApplyOption changes TryApply.
type ApplyOption func(*applyOptions)

type applyOptions struct{ dryRun bool }

// DryRun applies with dryRun=All (server-side validation and admission,
// nothing stored).
func DryRun(o *applyOptions) { o.dryRun = true }

// TryApply server-side applies every object of a multi-document manifest
// (namespaced objects without a namespace go to "default") and returns the
// objects as the server returned them, stopping at the first error.
func (k *Kube) TryApply(ctx context.Context, manifest string, opts ...ApplyOption) ([]*unstructured.Unstructured, error) {
	var o applyOptions
	for _, f := range opts {
		f(&o)
	}
	return k.apply(ctx, manifest, o.dryRun)
}

// Apply is TryApply that fails the test on an error.
func (k *Kube) Apply(t testing.TB, manifest string, opts ...ApplyOption) []*unstructured.Unstructured {
	t.Helper()
	objs, err := k.TryApply(Context(t), manifest, opts...)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	return objs
}

func (k *Kube) apply(ctx context.Context, manifest string, dryRun bool) ([]*unstructured.Unstructured, error) {
	objs, err := DecodeYAML(manifest)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, obj := range objs {
		got, err := k.applyObject(ctx, obj, dryRun)
		if err != nil {
			return out, err
		}
		out = append(out, got)
	}
	return out, nil
}

func (k *Kube) resourceFor(obj *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	k.clients()
	gvk := obj.GroupVersionKind()
	mp, err := k.mapper.resource(gvk)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	if mp.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			obj.SetNamespace("default")
		}
		return k.dyn.Resource(mp.Resource).Namespace(obj.GetNamespace()), nil
	}
	return k.dyn.Resource(mp.Resource), nil
}

func (k *Kube) applyObject(ctx context.Context, obj *unstructured.Unstructured, dryRun bool) (*unstructured.Unstructured, error) {
	ri, err := k.resourceFor(obj)
	if err != nil {
		return nil, err
	}
	data, err := obj.MarshalJSON()
	if err != nil {
		return nil, err
	}
	po := metav1.PatchOptions{FieldManager: FieldManager, Force: ptr(true)}
	if dryRun {
		po.DryRun = []string{metav1.DryRunAll}
	}
	got, err := ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, po)
	if err != nil {
		return nil, fmt.Errorf("%s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
	return got, nil
}

func ptr[T any](v T) *T { return &v }

// Create creates obj (any kind) and returns it as stored.
func (k *Kube) Create(t testing.TB, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	got, err := k.TryCreate(Context(t), obj)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	return got
}

// TryCreate creates obj and returns the error instead of failing.
func (k *Kube) TryCreate(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	ri, err := k.resourceFor(obj)
	if err != nil {
		return nil, err
	}
	got, err := ri.Create(ctx, obj, metav1.CreateOptions{FieldManager: FieldManager})
	if err != nil {
		return nil, fmt.Errorf("create %s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
	return got, nil
}

// Delete deletes obj (kind, namespace and name are used); a missing object is
// not an error.
func (k *Kube) Delete(t testing.TB, obj *unstructured.Unstructured) {
	t.Helper()
	ri, err := k.resourceFor(obj)
	if err != nil {
		t.Fatal(err)
	}
	if err := ri.Delete(Context(t), obj.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("delete %s %s/%s: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
}

// Endpoint is one external-dns endpoint of a DNSEndpoint's spec.
type Endpoint = testkit.Endpoint

// DNSEndpointObject builds a DNSEndpoint object.
func DNSEndpointObject(namespace, name string, labels map[string]string, eps ...Endpoint) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: testkit.DNSEndpointObject(namespace, name, labels, eps...)}
}

// CreateDNSEndpoint creates a DNSEndpoint and returns it as stored.
func (k *Kube) CreateDNSEndpoint(t testing.TB, namespace, name string, labels map[string]string, eps ...Endpoint) *unstructured.Unstructured {
	t.Helper()
	return k.Create(t, DNSEndpointObject(namespace, name, labels, eps...))
}

// SetDNSEndpoints replaces the endpoints of an existing DNSEndpoint (an
// update, retried on conflict) and returns the object as stored.
func (k *Kube) SetDNSEndpoints(t testing.TB, namespace, name string, eps ...Endpoint) *unstructured.Unstructured {
	t.Helper()
	ri := k.Dynamic().Resource(DNSEndpointGVR).Namespace(namespace)
	var got *unstructured.Unstructured
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := ri.Get(Context(t), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Object["spec"] = testkit.DNSEndpointObject(namespace, name, nil, eps...)["spec"]
		got, err = ri.Update(Context(t), cur, metav1.UpdateOptions{FieldManager: FieldManager})
		return err
	})
	if err != nil {
		t.Fatalf("update DNSEndpoint %s/%s: %v", namespace, name, err)
	}
	return got
}

// SetDNSEndpointLabels replaces an existing DNSEndpoint's object labels.
func (k *Kube) SetDNSEndpointLabels(t testing.TB, namespace, name string, labels map[string]string) {
	t.Helper()
	ri := k.Dynamic().Resource(DNSEndpointGVR).Namespace(namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := ri.Get(Context(t), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.SetLabels(labels)
		_, err = ri.Update(Context(t), cur, metav1.UpdateOptions{FieldManager: FieldManager})
		return err
	})
	if err != nil {
		t.Fatalf("relabel DNSEndpoint %s/%s: %v", namespace, name, err)
	}
}

// DeleteDNSEndpoint deletes a DNSEndpoint; a missing one is not an error.
func (k *Kube) DeleteDNSEndpoint(t testing.TB, namespace, name string) {
	t.Helper()
	err := k.Dynamic().Resource(DNSEndpointGVR).Namespace(namespace).Delete(Context(t), name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("delete DNSEndpoint %s/%s: %v", namespace, name, err)
	}
}

// NewNamespace creates a namespace named prefix-<random> and deletes it when
// the test ends.
func (k *Kube) NewNamespace(t testing.TB, prefix string) string {
	t.Helper()
	ns, err := k.Clientset().CoreV1().Namespaces().Create(Context(t), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		k.Clientset().CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}

// EnsureNamespace creates the namespace name if it does not exist (it is not
// deleted at the end).
func (k *Kube) EnsureNamespace(t testing.TB, name string) {
	t.Helper()
	_, err := k.Clientset().CoreV1().Namespaces().Create(Context(t), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: name},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", name, err)
	}
}

// DNSEndpointReaderRules are the only rules k8scrd needs: get, list and watch
// on dnsendpoints.
var DNSEndpointReaderRules = []rbacv1.PolicyRule{{
	APIGroups: []string{"externaldns.k8s.io"},
	Resources: []string{"dnsendpoints"},
	Verbs:     []string{"get", "list", "watch"},
}}

// ServiceAccountWithRules creates (or reuses) the ServiceAccount ns/name and a
// ClusterRole + ClusterRoleBinding named fleetdns-test-<ns>-<name> that grant
// it exactly rules (nil: no rules, no role). It returns the ClusterRole name.
func (k *Kube) ServiceAccountWithRules(t testing.TB, ns, name string, rules []rbacv1.PolicyRule) string {
	t.Helper()
	cs := k.Clientset()
	ctx := Context(t)
	k.EnsureNamespace(t, ns)
	_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: name},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create ServiceAccount %s/%s: %v", ns, name, err)
	}
	if rules == nil {
		return ""
	}
	role := "fleetdns-test-" + ns + "-" + name
	cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}, Rules: rules}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, cr, metav1.CreateOptions{}); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create ClusterRole %s: %v", role, err)
		}
		if _, err := cs.RbacV1().ClusterRoles().Update(ctx, cr, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("update ClusterRole %s: %v", role, err)
		}
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: name}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create ClusterRoleBinding %s: %v", role, err)
	}
	return role
}

// TokenKubeconfig asks the TokenRequest API for a token of the existing
// ServiceAccount ns/name (valid one hour) and writes a kubeconfig that uses
// it; it returns the file's path.
func (k *Kube) TokenKubeconfig(t testing.TB, ns, name string) string {
	t.Helper()
	tr, err := k.Clientset().CoreV1().ServiceAccounts(ns).CreateToken(Context(t), name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(3600))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s/%s: %v", ns, name, err)
	}
	path, err := k.writeKubeconfig("sa-"+ns+"-"+name, tr.Status.Token, nil)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// Kubectl runs kubectl with the admin kubeconfig and returns its combined
// output; a non-zero exit fails the test.
func (k *Kube) Kubectl(t testing.TB, args ...string) string {
	t.Helper()
	out, err := k.TryKubectl(args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// Kustomize renders a kustomization folder (relative to the repository
// root) with kubectl's built-in kustomize, as `kubectl apply -k` does; an
// error or an empty rendering fails the test.
func (k *Kube) Kustomize(t testing.TB, dir string) []*unstructured.Unstructured {
	t.Helper()
	out := k.Kubectl(t, "kustomize", filepath.Join(ModuleRoot(t), dir))
	objs, err := DecodeYAML(out)
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, out)
	}
	if len(objs) == 0 {
		t.Fatalf("kubectl kustomize %s rendered nothing", dir)
	}
	return objs
}

// ShippedCorefile returns data.Corefile of the ConfigMap name in the
// manifest file rel (relative to the repository root), as shipped.
func ShippedCorefile(t testing.TB, rel, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ModuleRoot(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := DecodeYAML(string(b))
	if err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && o.GetName() == name {
			cf, ok, _ := unstructured.NestedString(o.Object, "data", "Corefile")
			if !ok {
				t.Fatalf("%s: ConfigMap %s has no Corefile key", rel, name)
			}
			return cf
		}
	}
	t.Fatalf("%s: no ConfigMap %s", rel, name)
	return ""
}

// TryKubectl runs kubectl with the admin kubeconfig and returns its output
// and error (for commands expected to fail).
func (k *Kube) TryKubectl(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	full := append([]string{"--kubeconfig", k.Kubeconfig}, args...)
	return Run(ctx, filepath.Join(k.Bin, "kubectl"), full...)
}

// KubectlStdin runs kubectl with stdin (e.g. `apply -f -`).
func (k *Kube) KubectlStdin(stdin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return RunStdin(ctx, stdin, filepath.Join(k.Bin, "kubectl"), append([]string{"--kubeconfig", k.Kubeconfig}, args...)...)
}

// KindsOf lists objs as kind/namespace/name, for a failure message.
func KindsOf(objs []*unstructured.Unstructured) []string {
	var ks []string
	for _, o := range objs {
		ks = append(ks, o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName())
	}
	return ks
}
