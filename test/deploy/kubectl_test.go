package deploy

import (
	"regexp"
	"strings"
	"testing"

	"github.com/fleetdns/fleetdns/test/harness"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// wouldStartPods is what a controller turns into pods: applied with
// --dry-run=server only (server-side validation, defaulting and admission,
// nothing stored), as the brief of these tests asks.
func wouldStartPods(o *unstructured.Unstructured) bool {
	switch o.GetKind() {
	case "Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "Job", "CronJob", "Pod":
		return true
	}
	return false
}

var reApplied = regexp.MustCompile(`(?m)^(\S+) serverside-applied( \(server dry run\))?$`)

// kubectlApply applies objs with `kubectl apply --server-side` (plus extra
// flags) and checks that kubectl reports every object applied.
func kubectlApply(t *testing.T, k *harness.Kube, objs []*unstructured.Unstructured, extra ...string) {
	t.Helper()
	if len(objs) == 0 {
		return
	}
	args := append([]string{"apply", "--server-side"}, extra...)
	args = append(args, "-f", "-")
	out, err := k.KubectlStdin(harness.EncodeYAML(t, objs...), args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if n := len(reApplied.FindAllString(out, -1)); n != len(objs) {
		t.Fatalf("kubectl %s: %d of %d objects reported applied:\n%s", strings.Join(args, " "), n, len(objs), out)
	}
}

// applyAsUsers applies a rendered kustomization the way its comment tells
// users to (server-side), except that what would start pods is applied with
// --dry-run=server.
func applyAsUsers(t *testing.T, k *harness.Kube, objs []*unstructured.Unstructured, extra ...string) {
	t.Helper()
	var stored, dry []*unstructured.Unstructured
	for _, o := range objs {
		if wouldStartPods(o) {
			dry = append(dry, o)
		} else {
			stored = append(stored, o)
		}
	}
	kubectlApply(t, k, stored, extra...)
	kubectlApply(t, k, dry, append(extra, "--dry-run=server")...)
}
