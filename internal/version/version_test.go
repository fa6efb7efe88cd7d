package version

import (
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestBuildInfoInDefaultRegistry: the prometheus plugin serves the default
// registry, so coredns_fleetdns_build_info must be there, labelled with the
// link-time values.
func TestBuildInfoInDefaultRegistry(t *testing.T) {
	want := `# HELP coredns_fleetdns_build_info A metric with a constant '1' value labeled by the fleetdns version, revision (commit) and the Go version it was built with.
# TYPE coredns_fleetdns_build_info gauge
coredns_fleetdns_build_info{goversion="` + runtime.Version() + `",revision="` + Commit + `",version="` + Version + `"} 1
`
	if err := testutil.GatherAndCompare(prometheus.DefaultGatherer, strings.NewReader(want), "coredns_fleetdns_build_info"); err != nil {
		t.Error(err)
	}
}

func TestStringNamesVersionAndCommit(t *testing.T) {
	s := String()
	if !strings.HasPrefix(s, "fleetdns-"+Version+"\n") || !strings.Contains(s, ", "+Commit+"\n") {
		t.Errorf("String() = %q, want fleetdns-%s and the commit %q", s, Version, Commit)
	}
}
