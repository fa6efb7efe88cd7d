package deploy

import (
	"strings"
	"testing"

	"github.com/fleetdns/fleetdns/test/harness"
)

// TestGSLBRollsAndDrainsAsKubeSystem: deploy/gslb, applied to the API
// server, rolls with maxUnavailable 0 and maxSurge 1 (the Deployment, as
// the server defaults it in a server-side dry run: no kubelet here), is
// spread over nodes and zones, and has a PodDisruptionBudget (stored, then
// read back) that selects its pods and lets one go at a time: what the
// kube-system tree has.
func TestGSLBRollsAndDrainsAsKubeSystem(t *testing.T) {
	k := harness.SharedKube(t)
	objs := k.Kustomize(t, "deploy/gslb")
	applyAsUsers(t, k, objs, "--force-conflicts")
	if got := k.Kubectl(t, "-n", "fleetdns", "get", "pdb", "fleetdns-gslb", "-o", "jsonpath={.spec.maxUnavailable} {.spec.selector.matchLabels}"); got != `1 {"app.kubernetes.io/component":"gslb","app.kubernetes.io/name":"fleetdns"}` {
		t.Errorf("PodDisruptionBudget fleetdns-gslb: %q", got)
	}
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		out, err := k.KubectlStdin(harness.EncodeYAML(t, o), "apply", "--server-side", "--force-conflicts", "--dry-run=server", "-f", "-", "-o",
			"jsonpath={.spec.strategy.rollingUpdate.maxUnavailable} {.spec.strategy.rollingUpdate.maxSurge}|{.spec.template.spec.topologySpreadConstraints[*].topologyKey}|{.spec.template.spec.topologySpreadConstraints[*].labelSelector.matchLabels}|{.spec.template.metadata.labels}")
		if err != nil {
			t.Fatalf("apply --dry-run=server: %v\n%s", err, out)
		}
		f := strings.Split(out, "|")
		if len(f) != 4 {
			t.Fatalf("Deployment: %q", out)
		}
		if f[0] != "0 1" {
			t.Errorf("Deployment fleetdns-gslb rollingUpdate maxUnavailable/maxSurge = %q, want 0 1", f[0])
		}
		if f[1] != "kubernetes.io/hostname topology.kubernetes.io/zone" {
			t.Errorf("Deployment fleetdns-gslb spread over %q, want nodes and zones", f[1])
		}
		for _, sel := range strings.Fields(f[2]) {
			if !strings.Contains(f[3], `"app.kubernetes.io/component":"gslb"`) || sel != `{"app.kubernetes.io/component":"gslb","app.kubernetes.io/name":"fleetdns"}` {
				t.Errorf("a spread constraint selects %s; the pods are labelled %s", sel, f[3])
			}
		}
	}
}
