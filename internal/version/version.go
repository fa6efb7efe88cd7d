// Package version is fleetdns's own build identity, set at link time:
//
//	go build -ldflags "-X github.com/fleetdns/fleetdns/internal/version.Version=0.0.0-06d2de5 \
//	  -X github.com/fleetdns/fleetdns/internal/version.Commit=06d2de5... \
//	  -X github.com/coredns/coredns/coremain.GitCommit=06d2de5..." ./cmd/coredns
//
// `make build` and `make image` pass all three (the Makefile's LDFLAGS).
// CoreDNS's own coredns_build_info then carries the fleetdns commit as its
// revision, and coredns_fleetdns_build_info the fleetdns version.
package version

import (
	"fmt"
	"runtime"

	"github.com/coredns/coredns/plugin"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Set by -X at link time; a plain `go build` leaves these defaults.
var (
	// Version is `git describe --tags --always --dirty` without its
	// leading "v" when a tag is reachable, else 0.0.0-<short commit>[-dirty].
	Version = "0.0.0-dev"
	// Commit is the full fleetdns commit the binary was built from.
	Commit = ""
)

// buildInfo is exported on the prometheus plugin's /metrics: that plugin
// serves the default registry (plugin/metrics New), where promauto
// registers, the same way as CoreDNS's own coredns_build_info.
var buildInfo = promauto.NewGaugeVec(prometheus.GaugeOpts{
	Namespace: plugin.Namespace,
	Subsystem: "fleetdns",
	Name:      "build_info",
	Help:      "A metric with a constant '1' value labeled by the fleetdns version, revision (commit) and the Go version it was built with.",
}, []string{"version", "revision", "goversion"})

func init() {
	buildInfo.WithLabelValues(Version, Commit, runtime.Version()).Set(1)
}

// String is the line `coredns -version` prints for fleetdns, in the shape
// of CoreDNS's own two lines: fleetdns-<version>, then <os>/<arch>, <go>, <commit>.
func String() string {
	return fmt.Sprintf("fleetdns-%s\n%s/%s, %s, %s\n", Version, runtime.GOOS, runtime.GOARCH, runtime.Version(), Commit)
}
