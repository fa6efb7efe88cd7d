package testkit

import (
	"fmt"
	"os"
	"testing"
)

// RequireAll reports whether FLEETDNS_REQUIRE_ALL=1: then a missing part
// fails the test instead of skipping it (CI: `make unit`, `make e2e`).
func RequireAll() bool { return os.Getenv("FLEETDNS_REQUIRE_ALL") == "1" }

// Missing stops the test because a part it needs is not there (a tool, a
// loopback address, a kernel feature): t.Skip, or t.Fatal under
// FLEETDNS_REQUIRE_ALL=1, so that CI never passes a test that did not run.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := "missing: " + fmt.Sprintf(format, args...)
	if RequireAll() {
		t.Fatal(msg + " (FLEETDNS_REQUIRE_ALL=1)")
	}
	t.Skip(msg)
}
