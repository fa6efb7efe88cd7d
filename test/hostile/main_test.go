// Package hostile_test runs the built coredns binary against what a hostile
// tenant (someone who may create objects in one namespace a Corefile reads)
// can do, over real sockets, with the real kube-apiserver where the finding
// needs one: the hostile-tenant findings 1, 2, 7, 8, 9, 10 and 12. Each test names its
// finding. The tenant's "own DNS" is a DNS server in this test process on a
// loopback address; no query leaves the machine (scripts/e2e.sh runs the
// package in a network namespace of its own).
package hostile_test

import (
	"os"
	"testing"

	"github.com/fleetdns/fleetdns/test/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }
