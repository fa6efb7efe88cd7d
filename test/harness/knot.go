package harness

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// Knot is a Debian `knot` (knotd) process serving zone files, a reference
// authoritative server for differential tests beside NSD.
type Knot struct {
	*Process
	Addr string // "ip:53"
}

// StartKnot starts knotd on a fresh loopback address with its own
// configuration and storage in a temp dir, serving zones (origin -> zone
// file text) unsigned and as written (semantic checks off, no journal), and
// waits until it answers the SOA of every zone.
func StartKnot(t testing.TB, zones map[string]string) *Knot {
	t.Helper()
	return StartKnotAt(t, NewIP(t), zones)
}

// StartKnotAt is StartKnot on ip (from NewIP), for zones that name their
// own server's address.
func StartKnotAt(t testing.TB, ip string, zones map[string]string) *Knot {
	t.Helper()
	return StartKnotWith(t, ip, zones, KnotConfig{})
}

// KnotConfig is what StartKnotWith adds to StartKnotAt's configuration.
type KnotConfig struct {
	// Sections are top-level sections placed before the zones (key:,
	// acl:), so that a zone can refer to them.
	Sections string
	// Zone holds lines added to a zone's entry (origin -> lines, each
	// indented by four spaces, e.g. "    acl: [eu]").
	Zone map[string]string
}

// StartKnotWith is StartKnotAt with cfg: keys, ACLs and per-zone settings,
// e.g. for a zone that takes RFC 2136 UPDATEs.
func StartKnotWith(t testing.TB, ip string, zones map[string]string, cfg KnotConfig) *Knot {
	t.Helper()
	bin := LookPath(t, "knotd")
	dir := t.TempDir()
	var conf strings.Builder
	fmt.Fprintf(&conf, `server:
    rundir: %q
    listen: %s@53
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
log:
  - target: stderr
    any: warning
database:
    storage: %q
template:
  - id: default
    storage: %q
    semantic-checks: off
    zonefile-sync: -1
    zonefile-load: whole
    journal-content: none
`, dir, ip, dir, dir)
	conf.WriteString(cfg.Sections)
	conf.WriteString("\nzone:\n")
	origins := make([]string, 0, len(zones))
	for origin := range zones {
		origins = append(origins, dns.Fqdn(origin))
	}
	sort.Strings(origins)
	for _, origin := range origins {
		file := strings.TrimSuffix(origin, ".") + ".zone"
		if origin == "." {
			file = "root.zone"
		}
		text := zones[origin]
		if text == "" {
			text = zones[strings.TrimSuffix(origin, ".")]
		}
		if err := os.WriteFile(filepath.Join(dir, file), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&conf, "  - domain: %q\n    file: %q\n", origin, file)
		if extra := cfg.Zone[origin]; extra != "" {
			conf.WriteString(strings.TrimRight(extra, "\n") + "\n")
		}
	}
	cf := filepath.Join(dir, "knot.conf")
	if err := os.WriteFile(cf, []byte(conf.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	// Run under a name of its own: scripts/test-deps.sh stops the knotd
	// service that installing the package starts (pkill -x knotd), and
	// must not stop a test's, as it would when run beside the tests.
	own := filepath.Join(dir, "fleetdns-knotd")
	if err := os.Symlink(bin, own); err != nil {
		t.Fatal(err)
	}
	k := &Knot{Addr: net.JoinHostPort(ip, "53")}
	k.Process = StartProcess(t, "knotd", own, []string{"-c", cf}, dir)
	waitServing(t, k.Process, "knotd", k.Addr, origins)

	return k
}
