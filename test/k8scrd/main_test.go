// Package k8scrd_test runs the built coredns binary with the k8scrd plugin
// against a real kube-apiserver and etcd (test/harness) and real DNS clients,
// and compares its answers with reference authoritative servers (NSD, the
// stock file plugin) serving the same data.
package k8scrd_test

import (
	"os"
	"testing"

	"github.com/fleetdns/fleetdns/test/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }
