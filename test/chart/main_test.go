package chart

import (
	"os"
	"testing"

	"github.com/fleetdns/fleetdns/test/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }
