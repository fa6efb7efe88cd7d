package harness

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// PowerDNS is a Debian `pdns-server` process with the gsqlite3 backend (a
// backend that takes RFC 2136 UPDATEs), beside BIND, Knot and NSD.
type PowerDNS struct {
	*Process
	Addr string // "ip:53"
	Dir  string // its configuration, database and files
}

// powerDNSSchema is the gsqlite3 schema that pdns-backend-sqlite3 ships.
const powerDNSSchema = "/usr/share/pdns-backend-sqlite3/schema/schema.sqlite3.sql"

// StartPowerDNS starts pdns_server on ip (from NewIP) with a fresh sqlite
// database holding zones (origin -> zone file text, loaded by pdnsutil), the
// pdns.conf lines conf, the files (name -> text) written into Dir, and each
// of setup run as pdnsutil arguments before the start (import-tsig-key,
// set-meta...); it waits until the SOA of every zone answers.
func StartPowerDNS(t testing.TB, ip string, zones map[string]string, conf string, files map[string]string, setup ...[]string) *PowerDNS {
	t.Helper()
	bin := LookPath(t, "pdns_server")
	pdnsutil := LookPath(t, "pdnsutil")
	sqlite := LookPath(t, "sqlite3")
	schema, err := os.ReadFile(powerDNSSchema)
	if err != nil {
		Missing(t, "pdns-backend-sqlite3's schema: %v", err)
	}
	dir := t.TempDir()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	db := filepath.Join(dir, "pdns.db")
	if out, err := RunStdin(Context(t), string(schema), sqlite, db); err != nil {
		t.Fatalf("sqlite3 %s < %s: %v\n%s", db, powerDNSSchema, err, out)
	}
	text := fmt.Sprintf(`launch=gsqlite3
gsqlite3-database=%s
local-address=%s
local-port=53
socket-dir=%s
daemon=no
guardian=no
write-pid=no
disable-syslog=yes
loglevel=6
%s
`, db, ip, dir, conf)
	if err := os.WriteFile(filepath.Join(dir, "pdns.conf"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	origins := make([]string, 0, len(zones))
	for origin := range zones {
		origins = append(origins, origin)
	}
	sort.Strings(origins)
	for _, origin := range origins {
		file := filepath.Join(dir, origin+"zone")
		if err := os.WriteFile(file, []byte(zones[origin]), 0o644); err != nil {
			t.Fatal(err)
		}
		setup = append([][]string{{"load-zone", origin, file}}, setup...)
	}
	for _, args := range setup {
		if out, err := Run(Context(t), pdnsutil, append([]string{"--config-dir=" + dir}, args...)...); err != nil {
			t.Fatalf("pdnsutil %v: %v\n%s", args, err, out)
		}
	}
	p := &PowerDNS{Addr: net.JoinHostPort(ip, "53"), Dir: dir}
	p.Process = StartProcess(t, "pdns_server", bin, []string{"--config-dir=" + dir}, dir)
	waitServing(t, p.Process, "pdns_server", p.Addr, origins)
	return p
}
