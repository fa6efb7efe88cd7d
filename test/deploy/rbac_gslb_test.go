package deploy

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetdns/fleetdns/test/harness"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// gslbReads are the kinds the shipped gslb Corefile's k8scrd reads
// (resources DNSEndpoint Ingress Service HTTPRoute GRPCRoute TLSRoute, and
// what their derivation needs), with whether they are namespaced.
var gslbReads = []struct {
	gvr        schema.GroupVersionResource
	namespaced bool
}{
	{schema.GroupVersionResource{Group: "externaldns.k8s.io", Version: "v1alpha1", Resource: "dnsendpoints"}, true},
	{schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"}, true},
	{schema.GroupVersionResource{Version: "v1", Resource: "services"}, true},
	{schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}, true},
	{schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gateways"}, true},
	{schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "httproutes"}, true},
	{schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "grpcroutes"}, true},
	{schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "tlsroutes"}, true},
	{schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "ingressclasses"}, false},
	{schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}, false},
}

// installGatewayAPI applies the Gateway API CRDs that the routes need, from
// the gateway-api module this repository builds with (its standard channel).
func installGatewayAPI(t *testing.T, k *harness.Kube, root string) {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		harness.Missing(t, "the sigs.k8s.io/gateway-api module's CRDs (go list -m: %v)", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "config/crd/standard")
	for _, r := range []string{"gateways", "httproutes", "grpcroutes", "tlsroutes"} {
		k.Kubectl(t, "apply", "--server-side", "--force-conflicts", "-f", filepath.Join(dir, "gateway.networking.k8s.io_"+r+".yaml"))
		k.WaitCRDEstablished(t, r+".gateway.networking.k8s.io")
	}
}

// TestGSLBRoleCreatesEventsAndWritesNothingElse: the shipped RBAC of
// deploy/gslb, exercised with the ServiceAccount's token: it may read every
// kind the Corefile's resources need, in namespace fleetdns (the Corefile's
// namespaces) and the two cluster-scoped kinds cluster-wide, and create
// Events in fleetdns (its one write); it may change nothing else, and read
// nothing namespaced in any other namespace.
func TestGSLBRoleCreatesEventsAndWritesNothingElse(t *testing.T) {
	k := harness.SharedKube(t)
	root := harness.ModuleRoot(t)
	installGatewayAPI(t, k, root)
	applyAsUsers(t, k, k.Kustomize(t, "deploy/gslb"), "--force-conflicts")
	other := k.NewNamespace(t, "elsewhere")

	user := "system:serviceaccount:fleetdns:fleetdns-gslb"
	can := func(ns, group, resource, verb string) bool {
		r, err := k.Clientset().AuthorizationV1().SubjectAccessReviews().Create(harness.Context(t), &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:fleetdns"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Group: group, Resource: resource, Verb: verb}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r.Status.Allowed
	}
	resources := [][2]string{{"", "events"}, {"", "configmaps"}, {"", "secrets"}, {"", "pods"}, {"", "namespaces"},
		{"apps", "deployments"}, {"rbac.authorization.k8s.io", "roles"}, {"rbac.authorization.k8s.io", "clusterroles"},
		{"gateway.networking.k8s.io", "gatewayclasses"}}
	for _, r := range gslbReads {
		resources = append(resources, [2]string{r.gvr.Group, r.gvr.Resource})
	}
	for _, ns := range []string{"fleetdns", other, ""} {
		for _, r := range resources {
			for _, verb := range []string{"create", "update", "patch", "delete", "deletecollection"} {
				if ns == "fleetdns" && r[1] == "events" && verb == "create" {
					continue
				}
				if can(ns, r[0], r[1], verb) {
					t.Errorf("the shipped RBAC lets fleetdns %s %s in namespace %q", verb, r[1], ns)
				}
			}
		}
	}
	for _, r := range [][2]string{{"", "secrets"}, {"", "configmaps"}, {"", "pods"}, {"gateway.networking.k8s.io", "gatewayclasses"}} {
		if can("", r[0], r[1], "list") || can("fleetdns", r[0], r[1], "get") {
			t.Errorf("the shipped RBAC lets fleetdns read %s, which no configured kind needs", r[1])
		}
	}

	// For real, with the ServiceAccount's token.
	cfg, err := clientcmd.BuildConfigFromFlags("", k.TokenKubeconfig(t, "fleetdns", "fleetdns-gslb"))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := harness.Context(t)
	for _, r := range gslbReads {
		res := dyn.Resource(r.gvr)
		var in dynamic.ResourceInterface = res
		where := "cluster-wide"
		if r.namespaced {
			in, where = res.Namespace("fleetdns"), "in fleetdns"
		}
		// What an informer does: list, then watch from there; get too.
		l, err := in.List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			t.Errorf("list %s %s with the token: %v", r.gvr.Resource, where, err)
			continue
		}
		w, err := in.Watch(ctx, metav1.ListOptions{ResourceVersion: l.GetResourceVersion()})
		if err != nil {
			t.Errorf("watch %s %s with the token: %v", r.gvr.Resource, where, err)
		} else {
			w.Stop()
		}
		if _, err := in.Get(ctx, "no-such-object", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("get %s %s with the token: %v, want NotFound (allowed, absent)", r.gvr.Resource, where, err)
		}
		// Writes are refused, whatever the kind (dry-run: the API server
		// authorizes before it would store anything).
		obj := &unstructured.Unstructured{}
		obj.SetAPIVersion(r.gvr.GroupVersion().String())
		obj.SetName("rbac-test")
		if _, err := in.Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); !apierrors.IsForbidden(err) {
			t.Errorf("create %s %s with the token: %v, want Forbidden", r.gvr.Resource, where, err)
		}
		if err := in.Delete(ctx, "rbac-test", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}); !apierrors.IsForbidden(err) {
			t.Errorf("delete %s %s with the token: %v, want Forbidden", r.gvr.Resource, where, err)
		}
		if r.namespaced {
			if _, err := res.Namespace(other).List(ctx, metav1.ListOptions{Limit: 1}); !apierrors.IsForbidden(err) {
				t.Errorf("list %s in namespace %s with the token: %v, want Forbidden (only the Corefile's namespaces are read)", r.gvr.Resource, other, err)
			}
			if _, err := res.List(ctx, metav1.ListOptions{Limit: 1}); !apierrors.IsForbidden(err) {
				t.Errorf("list %s in all namespaces with the token: %v, want Forbidden", r.gvr.Resource, err)
			}
		}
	}
	if _, err := cs.CoreV1().Secrets("fleetdns").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list secrets in fleetdns with the token: %v, want Forbidden", err)
	}

	// The one write: the Event is written, an update is refused.
	ev, err := cs.CoreV1().Events("fleetdns").Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: "rbac-test."},
		InvolvedObject: corev1.ObjectReference{APIVersion: "networking.k8s.io/v1", Kind: "Ingress", Namespace: "fleetdns", Name: "app"},
		Reason:         "NameRefused", Message: "test", Type: corev1.EventTypeWarning,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating an Event with the shipped Role's token: %v", err)
	}
	ev.Message = "changed"
	if _, err := cs.CoreV1().Events("fleetdns").Update(ctx, ev, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("updating an Event with the token: %v, want Forbidden; the shipped Role gives create only", err)
	}
	if _, err := cs.CoreV1().Events(other).Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: "rbac-test."},
		InvolvedObject: corev1.ObjectReference{Kind: "Ingress", Namespace: other, Name: "app"},
		Reason:         "NameRefused", Message: "test", Type: corev1.EventTypeWarning,
	}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("creating an Event in namespace %s with the token: %v, want Forbidden", other, err)
	}
}
