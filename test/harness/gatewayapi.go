package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GatewayAPIModule is the Gateway API module whose CRDs the tests install:
// the version in go.mod, so that the CRDs and the types k8scrd decodes agree.
const GatewayAPIModule = "sigs.k8s.io/gateway-api"

// GatewayAPIKinds are the standard-channel CRDs the sources read.
var GatewayAPIKinds = []string{"gateways", "httproutes", "grpcroutes", "tlsroutes"}

// GatewayAPICRDFiles returns the paths of the standard-channel CRDs of
// GatewayAPIKinds in the module cache (`go list -m` from the module root).
func GatewayAPICRDFiles(t testing.TB) []string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		Missing(t, "no go toolchain to find %s in the module cache", GatewayAPIModule)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, gobin, "list", "-m", "-f", "{{.Dir}}", GatewayAPIModule)
	cmd.Dir = ModuleRoot(t)
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		t.Fatalf("go list -m %s: %v (%q)", GatewayAPIModule, err, out)
	}
	var files []string
	for _, k := range GatewayAPIKinds {
		p := filepath.Join(dir, "config", "crd", "standard", "gateway.networking.k8s.io_"+k+".yaml")
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("Gateway API CRD: %v (go mod download %s)", err, GatewayAPIModule)
		}
		files = append(files, p)
	}
	return files
}

// GatewayAPICRDNames are the names of the CRDs GatewayAPICRDFiles holds.
func GatewayAPICRDNames() []string {
	var names []string
	for _, k := range GatewayAPIKinds {
		names = append(names, k+".gateway.networking.k8s.io")
	}
	return names
}

// InstallGatewayAPI applies the Gateway API CRDs (GatewayAPICRDFiles) and
// waits until each is Established. It returns when they were established.
func (k *Kube) InstallGatewayAPI(t testing.TB) time.Time {
	t.Helper()
	for _, f := range GatewayAPICRDFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		k.Apply(t, string(b))
	}
	for _, n := range GatewayAPICRDNames() {
		k.WaitCRDEstablished(t, n)
	}
	return time.Now()
}

// GatewayAPIInstalled reports whether any Gateway API CRD of GatewayAPIKinds exists.
func (k *Kube) GatewayAPIInstalled(t testing.TB) bool {
	t.Helper()
	for _, n := range GatewayAPICRDNames() {
		_, err := k.Dynamic().Resource(crdGVR).Get(Context(t), n, metav1.GetOptions{})
		if err == nil {
			return true
		}
		if !apierrors.IsNotFound(err) {
			t.Fatalf("get CRD %s: %v", n, err)
		}
	}
	return false
}

// UninstallGatewayAPI deletes the Gateway API CRDs and waits until they
// are gone (at most a minute).
func (k *Kube) UninstallGatewayAPI(t testing.TB) {
	t.Helper()
	ri := k.Dynamic().Resource(crdGVR)
	for _, n := range GatewayAPICRDNames() {
		if err := ri.Delete(Context(t), n, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("delete CRD %s: %v", n, err)
		}
	}
	testkit.Eventually(t, time.Minute, "Gateway API CRDs deleted", func() (bool, string) {
		for _, n := range GatewayAPICRDNames() {
			if _, err := ri.Get(Context(t), n, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, fmt.Sprintf("CRD %s: %v", n, err)
			}
		}
		return true, ""
	})
}
