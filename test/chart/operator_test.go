package chart

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/test/harness"
)

// The prometheus-operator release whose ServiceMonitor CRD the chart's
// ServiceMonitor is applied against: test/monitoring's, which
// scripts/test-deps.sh puts into the Go module cache.
const (
	operatorModule  = "github.com/prometheus-operator/prometheus-operator"
	operatorVersion = "v0.94.0"
)

// installServiceMonitorCRD applies the ServiceMonitor CRD from the module
// cache and waits until it is served.
func installServiceMonitorCRD(t *testing.T, k *harness.Kube) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", operatorModule+"@"+operatorVersion)
	cmd.Dir = t.TempDir() // outside the fleetdns module
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOTOOLCHAIN=local")
	out, err := cmd.Output()
	var info struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &info); jerr != nil || info.Dir == "" {
		harness.Missing(t, "go mod download %s@%s (scripts/test-deps.sh downloads it): %v %s %s", operatorModule, operatorVersion, err, info.Error, out)
	}
	k.Kubectl(t, "apply", "--server-side", "-f", filepath.Join(info.Dir, "example", "prometheus-operator-crd", "monitoring.coreos.com_servicemonitors.yaml"))
	k.WaitCRDEstablished(t, "servicemonitors.monitoring.coreos.com")
}
