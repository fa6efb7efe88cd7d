// Package sources_test runs the built coredns binary with k8scrd's sources
// (`resources Ingress Service HTTPRoute GRPCRoute TLSRoute`) against a real
// kube-apiserver: the objects are created through the API, their status set
// through the status subresource as a controller would, EndpointSlices
// written with the labels and conditions of the EndpointSlice controller,
// and the answers read over real sockets (docs/architecture.md, "Sources").
package sources_test

import (
	"os"
	"testing"

	"github.com/fleetdns/fleetdns/test/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }
