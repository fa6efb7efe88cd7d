package delegation

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// renderWithPublish renders overlay tag with the publish component, as a
// user's overlay that lists it under components.
func renderWithPublish(t *testing.T, tag string) []*unstructured.Unstructured {
	t.Helper()
	root := harness.ModuleRoot(t)
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, root)
	if err != nil {
		t.Fatal(err)
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - " + rel + "/deploy/multicluster/overlays/" + tag +
		"\ncomponents:\n  - " + rel + "/deploy/multicluster/publish\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := harness.Run(harness.Context(t), filepath.Join(harness.KubeBin(t), "kubectl"), "kustomize", "--load-restrictor", "LoadRestrictionsNone", dir)
	if err != nil {
		t.Fatalf("kubectl kustomize overlay %s with deploy/multicluster/publish: %v\n%s", tag, err, out)
	}
	objs, err := harness.DecodeYAML(out)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// stanza cuts the publish_delegation stanza out of a Corefile: the stanza
// and the Corefile without it.
func stanza(t *testing.T, corefile string) (string, string) {
	t.Helper()
	lines := strings.SplitAfter(corefile, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(strings.TrimSpace(l), "publish_delegation ") {
			continue
		}
		indent := l[:len(l)-len(strings.TrimLeft(l, " "))]
		for j := i + 1; j < len(lines); j++ {
			if lines[j] == indent+"}\n" {
				return strings.Join(lines[i:j+1], ""), strings.Join(lines[:i], "") + strings.Join(lines[j+1:], "")
			}
		}
	}
	t.Fatalf("no publish_delegation stanza in\n%s", corefile)
	return "", ""
}

// TestShippedComponentPublishesTheCluster renders a cluster's overlay with
// deploy/multicluster/publish: its Corefile is the shipped GSLB Corefile
// with the publish_delegation stanza, its key comes from the mounted Secret,
// its glue from the overlay's FLEETDNS_NS_ADDRESS; that stanza, run against
// a BIND parent, publishes the cluster.
func TestShippedComponentPublishesTheCluster(t *testing.T) {
	objs := renderWithPublish(t, "eu")
	var corefile, mountDir, keyItem string
	env := map[string]string{}
	for _, o := range objs {
		switch {
		case o.GetKind() == "ConfigMap" && o.GetName() == "fleetdns-gslb":
			corefile, _, _ = unstructured.NestedString(o.Object, "data", "Corefile")
		case o.GetKind() == "ConfigMap" && strings.HasPrefix(o.GetName(), "fleetdns-cluster"):
			data, _, _ := unstructured.NestedStringMap(o.Object, "data")
			env = data
		case o.GetKind() == "Deployment" && o.GetName() == "fleetdns-gslb":
			pod, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
			for _, c := range pod["containers"].([]any) {
				for _, m := range c.(map[string]any)["volumeMounts"].([]any) {
					if mm := m.(map[string]any); mm["name"] == "delegation-key" && mm["readOnly"] == true {
						mountDir = mm["mountPath"].(string)
					}
				}
			}
			for _, v := range pod["volumes"].([]any) {
				if vv := v.(map[string]any); vv["name"] == "delegation-key" {
					sec := vv["secret"].(map[string]any)
					if sec["secretName"] == "fleetdns-delegation-key" {
						keyItem = sec["items"].([]any)[0].(map[string]any)["path"].(string)
					}
				}
			}
		}
	}
	st, rest := stanza(t, corefile)
	if shipped := harness.ShippedCorefile(t, "deploy/gslb/configmap.yaml", "fleetdns-gslb"); rest != shipped {
		t.Errorf("deploy/multicluster/publish's Corefile is not deploy/gslb's with the publish_delegation stanza: without it\n%s\n--- deploy/gslb ---\n%s", rest, shipped)
	}
	keyPath := mountDir + "/" + keyItem
	if mountDir == "" || keyItem == "" || !strings.Contains(st, "key "+keyPath+"\n") {
		t.Fatalf("the stanza reads its key elsewhere than the read-only mount of Secret fleetdns-delegation-key (%q):\n%s", keyPath, st)
	}
	if env["FLEETDNS_NS_ADDRESS"] != "203.0.113.10" || env["FLEETDNS_PARENT_NS"] != "192.0.2.53" {
		t.Fatalf("overlay eu: FLEETDNS_NS_ADDRESS %q, FLEETDNS_PARENT_NS %q", env["FLEETDNS_NS_ADDRESS"], env["FLEETDNS_PARENT_NS"])
	}

	// Run the stanza: the parent and the glue cannot be the documentation
	// addresses on the test machine, loopback ones stand in; the Secret is
	// a file.
	f := newFleet(t, "eu")
	f.startBIND(t)
	eu := f.clusters["eu"]
	st = strings.NewReplacer("{$FLEETDNS_PARENT_NS}", f.parentAddr, keyPath, f.keys["eu"]).Replace(st)
	eu.srv = harness.StartCoreDNS(t, eu.corefile(f.parentAddr, st), harness.WithProbe(host, dns.TypeA),
		harness.WithEnv("FLEETDNS_NS_ADDRESS="+eu.ip))
	waitDelegation(t, f.parentAddr, "the shipped stanza published eu", eu)
}
