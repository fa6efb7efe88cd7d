package k8scrd

import (
	"testing"

	"github.com/miekg/dns"
)

// The directory reads Gslb documents of both groups and the objects they
// name, and serves those objects only through their Gslbs when `resources`
// does not list their kind.
func TestDirectoryServesGslbs(t *testing.T) {
	gslb := func(api, name, ingress string, extra string) string {
		return `apiVersion: ` + api + `
kind: Gslb
metadata:
  name: ` + name + `
  namespace: web
` + extra + `spec:
  resourceRef:
    apiVersion: networking.k8s.io/v1
    kind: Ingress
    name: ` + ingress + `
  strategy:
    type: roundRobin
    dnsTtlSeconds: 45
`
	}
	k, _ := newTestPlugin(t, "example.org", "resources Gslb", map[string]string{
		"ing.yaml":    ingressYAML("shop", "shop.example.org", "app", "198.51.100.1") + "---\n" + ingressYAML("plain", "plain.example.org", "app", "198.51.100.2") + "---\n" + ingressYAML("old", "old.example.org", "app", "198.51.100.3") + "---\n" + ingressYAML("moved", "moved.example.org", "app", "198.51.100.4"),
		"slices.yaml": sliceYAML("app-1", "app", true),
		"gslb.yaml": gslb("k8gb.io/v1beta1", "shop", "shop", "") + "---\n" + gslb("k8gb.absa.oss/v1beta1", "old", "old", "") + "---\n" +
			gslb("k8gb.absa.oss/v1beta1", "moved", "moved", "  labels: {k8gb.io/migrated-to-k8gb-io: \"true\"}\n"),
	})
	for _, tc := range []struct {
		name, want string
	}{
		{"shop.example.org.", "shop.example.org.\t45\tIN\tA\t198.51.100.1"},
		{"old.example.org.", "old.example.org.\t45\tIN\tA\t198.51.100.3"},
		{"plain.example.org.", ""}, // an Ingress no Gslb names: Ingress is not among the resources
		{"moved.example.org.", ""}, // a migrated legacy Gslb: its twin (absent here) would serve it
	} {
		m, _ := ask(t, k, tc.name, dns.TypeA)
		if got := answers(m); got != tc.want {
			t.Errorf("%s A: %q, want %q", tc.name, got, tc.want)
		}
	}
}
