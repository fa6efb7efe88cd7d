package k8scrd

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
)

func TestMetricsRecordsPerZoneAndLastSync(t *testing.T) {
	_, dir := newTestPlugin(t, "metrics.example", "", map[string]string{
		"a.yaml": testkit.DNSEndpoint("ns", "a", nil, testkit.EP("a.metrics.example", "A", 0, "192.0.2.1", "192.0.2.2"), testkit.EP("a.metrics.example", "TXT", 0, "x")),
	})
	records := func() float64 { return metricValue(t, "coredns_k8scrd_records", "zone", "metrics.example.") }
	// The builder sets the gauges just after it publishes the snapshot that
	// made the plugin ready.
	testkit.Eventually(t, 5*time.Second, "the records gauge of the first sync", func() (bool, string) {
		return records() == 3, fmt.Sprintf("records: %v, want 3", records())
	})
	if ts := metricValue(t, "coredns_k8scrd_last_sync_timestamp_seconds"); time.Since(time.Unix(int64(ts), 0)) > time.Minute {
		t.Errorf("last sync timestamp %v is not recent", ts)
	}
	os.Remove(filepath.Join(dir, "a.yaml"))
	testkit.Eventually(t, 5*time.Second, "records drop to 0", func() bool { return records() == 0 })
}
