package harness

import (
	"fmt"
	"os"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

func TestKubeDNSEndpointLifecycle(t *testing.T) {
	k := SharedKube(t)
	ns := k.NewNamespace(t, "lifecycle")
	obj := k.CreateDNSEndpoint(t, ns, "www", map[string]string{"app": "web"},
		Endpoint{DNSName: "www.example.org", RecordType: "A", Targets: []string{"192.0.2.1"}, TTL: 60})
	if obj.GetUID() == "" {
		t.Fatalf("created object has no UID: %v", obj)
	}
	got := k.SetDNSEndpoints(t, ns, "www", Endpoint{DNSName: "www.example.org", RecordType: "A", Targets: []string{"192.0.2.2"}})
	eps, _, _ := unstructuredSlice(got.Object, "spec", "endpoints")
	if len(eps) != 1 || !strings.Contains(strings.Join(stringsOf(eps), ""), "192.0.2.2") {
		t.Fatalf("update not stored: %v", got.Object["spec"])
	}
	k.DeleteDNSEndpoint(t, ns, "www")
	_, err := k.Dynamic().Resource(DNSEndpointGVR).Namespace(ns).Get(Context(t), "www", metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("after delete: %v", err)
	}
	// The CRD's schema is external-dns's: a wrong type is rejected.
	_, err = k.TryApply(Context(t), `apiVersion: externaldns.k8s.io/v1alpha1
kind: DNSEndpoint
metadata: {name: bad, namespace: `+ns+`}
spec:
  endpoints:
  - dnsName: x.example.org
    recordTTL: "sixty"
`)
	if err == nil {
		t.Fatal("a recordTTL string was accepted by the CRD schema")
	}
}

func TestKubeServiceAccountTokenIsLimitedByRBAC(t *testing.T) {
	k := SharedKube(t)
	ns := k.NewNamespace(t, "rbac")
	k.CreateDNSEndpoint(t, ns, "a", nil, Endpoint{DNSName: "a.example.org", RecordType: "A", Targets: []string{"192.0.2.1"}})
	k.ServiceAccountWithRules(t, ns, "reader", DNSEndpointReaderRules)
	path := k.TokenKubeconfig(t, ns, "reader")
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(cfg)
	list, err := dyn.Resource(DNSEndpointGVR).List(Context(t), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("reader cannot list dnsendpoints: %v", err)
	}
	if len(list.Items) == 0 {
		t.Fatal("reader lists no dnsendpoints")
	}
	_, err = kubernetes.NewForConfigOrDie(cfg).CoreV1().Secrets(ns).List(Context(t), metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("reader listing secrets: got %v, want Forbidden", err)
	}
	err = dyn.Resource(DNSEndpointGVR).Namespace(ns).Delete(Context(t), "a", metav1.DeleteOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("reader deleting a dnsendpoint: got %v, want Forbidden", err)
	}
	if out := k.Kubectl(t, "get", "dnsendpoints", "-n", ns, "-o", "name"); !strings.Contains(out, "dnsendpoint.externaldns.k8s.io/a") {
		t.Fatalf("kubectl get: %s", out)
	}
}

func TestKubeRestartKeepsData(t *testing.T) {
	k := StartKube(t)
	k.EnsureNamespace(t, "keep")
	k.CreateDNSEndpoint(t, "keep", "a", nil, Endpoint{DNSName: "a.example.org", RecordType: "A", Targets: []string{"192.0.2.1"}})
	k.RestartAPIServer(t)
	k.RestartEtcd(t)
	if _, err := k.Dynamic().Resource(DNSEndpointGVR).Namespace("keep").Get(Context(t), "a", metav1.GetOptions{}); err != nil {
		t.Fatalf("after restarts: %v", err)
	}
}

func unstructuredSlice(obj map[string]any, fields ...string) ([]any, bool, error) {
	cur := any(obj)
	for _, f := range fields {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false, nil
		}
		cur = m[f]
	}
	s, ok := cur.([]any)
	return s, ok, nil
}

func stringsOf(v []any) []string {
	var out []string
	for _, x := range v {
		out = append(out, strings.TrimSpace(strings.ReplaceAll(strings.ReplaceAll(fmtAny(x), "\n", ""), " ", "")))
	}
	return out
}

func fmtAny(v any) string { return fmt.Sprint(v) }
