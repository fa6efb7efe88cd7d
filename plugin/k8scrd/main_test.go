package k8scrd

import (
	"os"
	"testing"
)

// TestMain stops the k8scrd that FuzzServeDNS shares across its runs and
// removes its manifest folder, which no single test can own.
func TestMain(m *testing.M) {
	code := m.Run()
	if fuzzPlugin != nil {
		fuzzPlugin.shutdown()
	}
	if fuzzDir != "" {
		os.RemoveAll(fuzzDir)
	}
	os.Exit(code)
}
