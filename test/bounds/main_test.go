// Package bounds_test holds issue 16's bounds against the built coredns
// binary over real sockets: a cluster's many targets, a parent naming a
// thousand name servers, a peer that sends a stray datagram first, a
// thousand-fold churn of DNSEndpoints in a real API server, and the
// amplification factor of the shipped stanzas. Fake peers are real
// processes: this test binary started again in a fake's role (see fake).
package bounds_test

import (
	"os"
	"testing"

	"github.com/fleetdns/fleetdns/test/harness"
)

func TestMain(m *testing.M) {
	if role := os.Getenv(fakeRoleEnv); role != "" {
		os.Exit(runFake(role))
	}
	os.Exit(harness.Main(m))
}
