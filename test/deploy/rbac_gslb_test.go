package deploy

import (
	"testing"

	"github.com/fleetdns/fleetdns/test/harness"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// TestGSLBRoleCreatesEventsAndWritesNothingElse: the shipped Role of
// deploy/gslb, exercised with the ServiceAccount's token: it may create
// Events in namespace fleetdns (its one write) and read DNSEndpoints there;
// it may change nothing else, and nothing in any other namespace.
func TestGSLBRoleCreatesEventsAndWritesNothingElse(t *testing.T) {
	k := harness.SharedKube(t)
	root := harness.ModuleRoot(t)
	applyAsUsers(t, k, kustomize(t, k, root, "deploy/gslb"), "--force-conflicts")
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
	for _, verb := range []string{"get", "list", "watch"} {
		if !can("fleetdns", "externaldns.k8s.io", "dnsendpoints", verb) {
			t.Errorf("cannot %s dnsendpoints in fleetdns", verb)
		}
	}
	if !can("fleetdns", "", "events", "create") {
		t.Error("cannot create events in fleetdns")
	}
	resources := [][2]string{{"externaldns.k8s.io", "dnsendpoints"}, {"", "events"}, {"", "configmaps"}, {"", "secrets"},
		{"", "pods"}, {"", "services"}, {"discovery.k8s.io", "endpointslices"}, {"apps", "deployments"}, {"rbac.authorization.k8s.io", "roles"}}
	for _, ns := range []string{"fleetdns", other, ""} {
		for _, r := range resources {
			for _, verb := range []string{"create", "update", "patch", "delete", "deletecollection"} {
				if ns == "fleetdns" && r[1] == "events" && verb == "create" {
					continue
				}
				if can(ns, r[0], r[1], verb) {
					t.Errorf("the shipped Role lets fleetdns %s %s in namespace %q", verb, r[1], ns)
				}
			}
		}
		if ns != "fleetdns" && can(ns, "externaldns.k8s.io", "dnsendpoints", "list") {
			t.Errorf("the shipped Role lets fleetdns list dnsendpoints in namespace %q: only the Corefile's namespaces are read", ns)
		}
	}

	// And for real, with the token: the Event is written, an update is refused.
	cfg, err := clientcmd.BuildConfigFromFlags("", k.TokenKubeconfig(t, "fleetdns", "fleetdns-gslb"))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := cs.CoreV1().Events("fleetdns").Create(harness.Context(t), &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: "rbac-test."},
		InvolvedObject: corev1.ObjectReference{APIVersion: "externaldns.k8s.io/v1alpha1", Kind: "DNSEndpoint", Namespace: "fleetdns", Name: "app"},
		Reason:         "NameRefused", Message: "test", Type: corev1.EventTypeWarning,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating an Event with the shipped Role's token: %v", err)
	}
	ev.Message = "changed"
	if _, err := cs.CoreV1().Events("fleetdns").Update(harness.Context(t), ev, metav1.UpdateOptions{}); err == nil {
		t.Error("the token may update Events; the shipped Role gives create only")
	}
}
