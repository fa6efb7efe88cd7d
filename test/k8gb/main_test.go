// Package k8gb_test runs the built coredns binary with `k8scrd { resources
// Gslb }` against real kube-apiservers holding k8gb's Gslb objects (CRDs
// from deploy/crd), with the status and EndpointSlices a controller would
// write, two clusters answering through gslb and localtargets, and a peer
// that answers as k8gb's CoreDNS does (docs/architecture.md, "Sources").
package k8gb_test

import (
	"os"
	"testing"

	"github.com/fleetdns/fleetdns/test/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }
