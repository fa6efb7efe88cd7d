// Package dnssec_test runs the GSLB zone signed as shipped (deploy/gslb's
// dnssec component and the chart's gslb.dnssec values) against real
// validators: Unbound with the zone's DS as its trust anchor and BIND's
// delv, with Knot as the reference for what an authoritative server gives.
// The clusters are coredns processes on loopback addresses reading the
// test's API server; the key set is made by dnssec-keygen, as the guide
// (docs/dnssec.md) makes it.
package dnssec_test

import (
	"os"
	"testing"

	"github.com/fleetdns/fleetdns/test/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }
