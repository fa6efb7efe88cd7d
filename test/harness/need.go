package harness

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/fleetdns/fleetdns/internal/testkit"
)

// RequireAll reports whether FLEETDNS_REQUIRE_ALL=1: then a missing part
// fails the test instead of skipping it (CI, `make e2e`).
func RequireAll() bool { return testkit.RequireAll() }

// Missing stops the test because a part it needs is not there: t.Skip, or
// t.Fatal under FLEETDNS_REQUIRE_ALL=1 (testkit.Missing).
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	testkit.Missing(t, format, args...)
}

// LookPath returns the path of an installed tool (dig, kdig, nsd, ...) or
// stops the test through Missing.
func LookPath(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, "%s is not installed (scripts/test-deps.sh installs it)", name)
	}
	return p
}

// LookPathOwn is LookPath for a server the tests run, as a link named
// fleetdns-NAME in a temp dir: scripts/test-deps.sh stops the packaged
// daemons that installing them starts (pkill -x nsd, unbound, dnsdist,
// named, knotd), and must not stop a test's, as it would when run beside
// the tests.
func LookPathOwn(t testing.TB, name string) string {
	t.Helper()
	own := filepath.Join(t.TempDir(), "fleetdns-"+name)
	if err := os.Symlink(LookPath(t, name), own); err != nil {
		t.Fatal(err)
	}
	return own
}
