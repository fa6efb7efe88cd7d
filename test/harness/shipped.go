package harness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Substitution replaces Old with New in a shipped Corefile, for the reason
// Why (logged, so that every difference from what ships is said).
type Substitution struct{ Old, New, Why string }

// Substitute applies subs to a shipped Corefile; a text that no longer
// holds Old fails the test, so the substitutions cannot silently drift.
func Substitute(t testing.TB, text string, subs ...Substitution) string {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(text, s.Old) {
			t.Fatalf("shipped Corefile no longer contains %q (substituted because %s):\n%s", s.Old, s.Why, text)
		}
		text = strings.ReplaceAll(text, s.Old, s.New)
		t.Logf("substituted %q -> %q: %s", s.Old, s.New, s.Why)
	}
	return text
}

// ConfigMapFolder writes the data of ConfigMap ns/name, as the API server
// holds it, into dir, one file per key: what the kubelet's mount of it shows a pod.
func (k *Kube) ConfigMapFolder(t testing.TB, ns, name, dir string) {
	t.Helper()
	cm, err := k.Clientset().CoreV1().ConfigMaps(ns).Get(Context(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("ConfigMap %s/%s: %v", ns, name, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for key, v := range cm.Data {
		if err := os.WriteFile(filepath.Join(dir, key), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// FleetKey is the fleet protocol's TSIG key of the tests (Secret
// fleetdns-fleet-key in a cluster), the same for every cluster.
const FleetKey = `key "fleet.gslb.example.com" {
	algorithm hmac-sha256;
	secret "c2VjcmV0LW9mLXRoZS10ZXN0LWZsZWV0LWtleS0zMiE=";
};
`

// FleetKeyFile writes FleetKey into a file of the test's own, where a
// shipped GSLB Corefile reads the mounted Secret, and returns its path.
func FleetKeyFile(t testing.TB) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fleet.key")
	if err := os.WriteFile(p, []byte(FleetKey), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
