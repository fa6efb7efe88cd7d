package deploy

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetdns/fleetdns/test/harness"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// startInCluster runs the coredns binary on corefile the way a pod runs it:
// with in-cluster credentials for the ServiceAccount ns/sa, which is the only
// way the shipped Corefiles (no `kubeconfig` line) reach the API server.
//
// A pod has the API server's Service address in KUBERNETES_SERVICE_HOST and
// the ServiceAccount's token, CA and namespace in
// /var/run/secrets/kubernetes.io/serviceaccount. Both are recreated here:
// the address is the test API server's (10.96.0.1 cannot exist on the test
// machine), the token comes from the TokenRequest API for the shipped
// ServiceAccount, and the folder is a tmpfs over /run in a mount namespace of
// the process's own (unshare -m), so nothing outside the process sees it.
func startInCluster(t *testing.T, k *harness.Kube, ns, sa, corefile string, env ...string) *harness.Process {
	t.Helper()
	if os.Geteuid() != 0 {
		harness.Missing(t, "root, for a mount namespace with the pod's serviceaccount folder")
	}
	unshare := harness.LookPath(t, "unshare")
	bin := harness.CoreDNSBinary(t)

	tr, err := k.Clientset().CoreV1().ServiceAccounts(ns).CreateToken(harness.Context(t), sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(3600))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for ServiceAccount %s/%s: %v", ns, sa, err)
	}
	ca, err := os.ReadFile(filepath.Join(k.Dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	secrets := filepath.Join(dir, "serviceaccount")
	if err := os.Mkdir(secrets, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"token": []byte(tr.Status.Token), "ca.crt": ca, "namespace": []byte(ns)} {
		if err := os.WriteFile(filepath.Join(secrets, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cf := filepath.Join(dir, "Corefile")
	if err := os.WriteFile(cf, []byte(corefile), 0o644); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(k.URL)
	if err != nil {
		t.Fatal(err)
	}
	// /var/run is a symlink to /run on most systems; mount follows it.
	const mountPoint = "/var/run/secrets/kubernetes.io/serviceaccount"
	script := fmt.Sprintf("set -e; mount -t tmpfs -o size=1m,mode=755 fleetdns-test /var/run; mkdir -p %s; cp %s/* %s/; exec %s -conf %s",
		mountPoint, shellQuote(secrets), mountPoint, shellQuote(bin), shellQuote(cf))
	env = append(env, "KUBERNETES_SERVICE_HOST="+u.Hostname(), "KUBERNETES_SERVICE_PORT="+u.Port(), "KUBECONFIG=")
	return harness.StartProcess(t, "coredns-"+sa, unshare, []string{"--mount", "--propagation", "private", "/bin/sh", "-c", script}, dir, env...)
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func ptr[T any](v T) *T { return &v }
