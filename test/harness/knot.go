package harness

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/miekg/dns"
)

// Knot is a Debian `knot` (knotd) process serving zone files, a reference
// authoritative server for differential tests beside NSD.
type Knot struct {
	*Process
	Addr string // "ip:53"
	// DS holds, when KnotConfig.Signing is set, the DS (SHA-256) of each
	// zone's KSK as a parent would publish it (origin -> record text).
	DS map[string]string
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
	// Signing, when set, has Knot sign every zone online under this
	// policy: the lines of a Knot `policy:` entry besides its id, each
	// indented by four spaces, e.g. KnotECDSA. The journal then keeps
	// the signed changes, and StartKnotWith waits until every zone
	// serves its KSK (Knot.DS).
	Signing string
}

// KnotECDSA is a KnotConfig.Signing policy: ECDSA P-256, a KSK and a
// ZSK, NSEC.
const KnotECDSA = "    algorithm: ecdsap256sha256\n    nsec3: off\n"

// StartKnotWith is StartKnotAt with cfg: keys, ACLs and per-zone settings,
// e.g. for a zone that takes RFC 2136 UPDATEs.
func StartKnotWith(t testing.TB, ip string, zones map[string]string, cfg KnotConfig) *Knot {
	t.Helper()
	own := LookPathOwn(t, "knotd") // not stopped by scripts/test-deps.sh
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
`, dir, ip, dir)
	journal := "none"
	if cfg.Signing != "" {
		// A policy must stand before the template that names it.
		fmt.Fprintf(&conf, "policy:\n  - id: fleetdns-test\n%s\n", strings.TrimRight(cfg.Signing, "\n"))
		journal = "changes"
	}
	fmt.Fprintf(&conf, `template:
  - id: default
    storage: %q
    semantic-checks: off
    zonefile-sync: -1
    zonefile-load: whole
    journal-content: %s
`, dir, journal)
	if cfg.Signing != "" {
		conf.WriteString("    dnssec-signing: on\n    dnssec-policy: fleetdns-test\n")
	}
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
	k := &Knot{Addr: net.JoinHostPort(ip, "53")}
	k.Process = StartProcess(t, "knotd", own, []string{"-c", cf}, dir)
	waitServing(t, k.Process, "knotd", k.Addr, origins)
	if cfg.Signing != "" {
		k.DS = make(map[string]string, len(origins))
		for _, origin := range origins {
			k.DS[origin] = k.waitKSK(t, origin)
		}
	}
	return k
}

// waitKSK waits until Knot serves origin's DNSKEY set with a KSK (flags
// 257), and returns the KSK's DS (SHA-256), tabs made spaces.
func (k *Knot) waitKSK(t testing.TB, origin string) string {
	t.Helper()
	var ds string
	msg, ok := testkit.Within(20*time.Second, func() (bool, string) {
		if !k.Running() {
			return false, fmt.Sprintf("knotd exited: %v", k.ExitErr())
		}
		m, err := Ask(k.Addr, origin, dns.TypeDNSKEY, DO, NoRD, Timeout(time.Second))
		if err != nil {
			return false, err.Error()
		}
		for _, rr := range m.Answer {
			if key, ok := rr.(*dns.DNSKEY); ok && key.Flags == 257 {
				ds = strings.ReplaceAll(key.ToDS(dns.SHA256).String(), "\t", " ")
				return true, ""
			}
		}
		return false, fmt.Sprint(m)
	})
	if !ok {
		t.Fatalf("knotd does not sign %s: %s\n--- knotd log ---\n%s", origin, msg, k.Log())
	}
	return ds
}
