package chart

import (
	"strings"
	"testing"

	"github.com/fleetdns/fleetdns/test/harness"
)

// TestGSLBShapeRollsAndDrains: the chart's gslb mode (signed, with
// gslb.dnssec.keySecret), applied to the API server: the
// PodDisruptionBudget (stored, read back) lets one pod go at a time and
// selects the Deployment's pods; the Deployment (server-side dry run, no
// kubelet here) rolls with maxUnavailable 0 / maxSurge 1, spreads over
// nodes and zones, and mounts the key Secret read-only.
func TestGSLBShapeRollsAndDrains(t *testing.T) {
	k := harness.SharedKube(t)
	k.EnsureNamespace(t, "fleetdns-disruption")
	objs := render(t, "fleetdns", "fleetdns-disruption", "--set", "mode=gslb", "--set", "gslb.dnssec.keySecret=fleetdns-dnssec-keys")
	pdb := mustFind(t, objs, "PodDisruptionBudget", "")
	if out, err := k.KubectlStdin(harness.EncodeYAML(t, pdb), "apply", "--server-side", "-f", "-"); err != nil {
		t.Fatalf("PodDisruptionBudget: %v\n%s", err, out)
	}
	got := k.Kubectl(t, "-n", "fleetdns-disruption", "get", "pdb", pdb.GetName(), "-o", "jsonpath={.spec.maxUnavailable} {.spec.selector.matchLabels}")
	d := mustFind(t, objs, "Deployment", "")
	out, err := k.KubectlStdin(harness.EncodeYAML(t, d), "apply", "--server-side", "--dry-run=server", "-f", "-", "-o",
		"jsonpath={.spec.strategy.rollingUpdate.maxUnavailable} {.spec.strategy.rollingUpdate.maxSurge}|{.spec.template.spec.topologySpreadConstraints[*].topologyKey}|{.spec.template.metadata.labels}|{.spec.template.spec.containers[0].volumeMounts[?(@.name=='dnssec-keys')].readOnly} {.spec.template.spec.volumes[?(@.name=='dnssec-keys')].secret.secretName}")
	if err != nil {
		t.Fatalf("Deployment: %v\n%s", err, out)
	}
	f := strings.Split(out, "|")
	if len(f) != 4 {
		t.Fatalf("Deployment: %q", out)
	}
	sel := strings.TrimPrefix(got, "1 ")
	if !strings.HasPrefix(got, "1 ") || !strings.Contains(sel, `"app.kubernetes.io/component":"gslb"`) || !strings.Contains(sel, `"app.kubernetes.io/instance":"fleetdns"`) {
		t.Errorf("PodDisruptionBudget %s: %q", pdb.GetName(), got)
	}
	for _, kv := range strings.Split(strings.Trim(sel, "{}"), ",") {
		if !strings.Contains(f[2], kv) {
			t.Errorf("the PodDisruptionBudget selects %s, which the pods (%s) do not carry", kv, f[2])
		}
	}
	if f[0] != "0 1" {
		t.Errorf("rollingUpdate maxUnavailable/maxSurge = %q, want 0 1", f[0])
	}
	if f[1] != "kubernetes.io/hostname topology.kubernetes.io/zone" {
		t.Errorf("spread over %q, want nodes and zones", f[1])
	}
	if f[3] != "true fleetdns-dnssec-keys" {
		t.Errorf("the key Secret mount: %q, want read-only from fleetdns-dnssec-keys", f[3])
	}
}
