package gslb

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// endpoint is one entry of a DNSEndpoint's spec.endpoints.
type endpoint struct {
	name       string
	rtype      string
	ttl        int // 0: no recordTTL
	targets    []string
	properties map[string]string // providerSpecific
	labels     map[string]string // the endpoint's own labels (k8gb's strategy)
}

// manifest renders a DNSEndpoint object as YAML, as kubectl would apply it.
func manifest(name, namespace string, labels map[string]string, eps ...endpoint) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: externaldns.k8s.io/v1alpha1\nkind: DNSEndpoint\nmetadata:\n  name: %s\n  namespace: %s\n", name, namespace)
	if len(labels) > 0 {
		b.WriteString("  labels:\n")
		for _, k := range sortedKeys(labels) {
			fmt.Fprintf(&b, "    %s: %q\n", k, labels[k])
		}
	}
	b.WriteString("spec:\n  endpoints:\n")
	for _, ep := range eps {
		fmt.Fprintf(&b, "  - dnsName: %s\n    recordType: %s\n", ep.name, ep.rtype)
		if ep.ttl > 0 {
			fmt.Fprintf(&b, "    recordTTL: %d\n", ep.ttl)
		}
		if len(ep.targets) == 0 {
			b.WriteString("    targets: []\n")
		} else {
			b.WriteString("    targets:\n")
			for _, t := range ep.targets {
				fmt.Fprintf(&b, "    - %q\n", t)
			}
		}
		if len(ep.labels) > 0 {
			b.WriteString("    labels:\n")
			for _, k := range sortedKeys(ep.labels) {
				fmt.Fprintf(&b, "      %s: %q\n", k, ep.labels[k])
			}
		}
		if len(ep.properties) > 0 {
			b.WriteString("    providerSpecific:\n")
			for _, k := range sortedKeys(ep.properties) {
				fmt.Fprintf(&b, "    - name: %s\n      value: %q\n", k, ep.properties[k])
			}
		}
	}
	return b.String()
}

// writeManifest writes (or replaces) one manifest file in a k8scrd
// directory; k8scrd watches the directory and applies it without a reload.
func writeManifest(t testing.TB, dir, file, content string) {
	t.Helper()
	tmp := filepath.Join(dir, "."+file+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, file)); err != nil {
		t.Fatal(err)
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}
