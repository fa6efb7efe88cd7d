package deploy

import (
	"os"
	"testing"

	"github.com/fleetdns/fleetdns/test/harness"
)

func TestMain(m *testing.M) {
	code := harness.Main(m)
	if dockerDir != "" {
		os.RemoveAll(dockerDir)
	}
	os.Exit(code)
}
