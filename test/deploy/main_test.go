package deploy

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if dockerDir != "" {
		os.RemoveAll(dockerDir)
	}
	os.Exit(code)
}
