package harness

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// BIND is a Debian `bind9` named process, a reference authoritative server
// (and RFC 2136 UPDATE target) beside Knot and NSD.
type BIND struct {
	*Process
	Addr string // "ip:53"
	Dir  string // its working directory: zone files and journals
}

// StartBIND starts named on ip (from NewIP), authoritative only, with the
// named.conf statements conf after its options (keys, zones; zone file names
// relative to Dir), the files (name -> text) written into Dir, and waits
// until it answers the SOA of every origin.
func StartBIND(t testing.TB, ip, conf string, files map[string]string, origins ...string) *BIND {
	t.Helper()
	own := LookPathOwn(t, "named") // not stopped by scripts/test-deps.sh
	// named listens only on the addresses of its interfaces, not on any
	// address that routes to loopback: give lo this one (the tests run as
	// root in a network namespace of their own, scripts/e2e.sh).
	ipTool := LookPath(t, "ip")
	if out, err := Run(Context(t), ipTool, "addr", "add", ip+"/32", "dev", "lo"); err != nil {
		t.Fatalf("ip addr add %s/32 dev lo (named listens only on an interface's addresses): %v\n%s", ip, err, out)
	}
	t.Cleanup(func() { Run(context.Background(), ipTool, "addr", "del", ip+"/32", "dev", "lo") })
	dir := t.TempDir()
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(files[name]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	text := fmt.Sprintf(`options {
	directory %q;
	pid-file %q;
	listen-on port 53 { %s; };
	listen-on-v6 { none; };
	recursion no;
	dnssec-validation no;
	notify no;
	allow-transfer { none; };
	session-keyfile none;
	automatic-interface-scan no;
};
controls { };
logging {
	channel stderr { stderr; severity info; print-time yes; print-category yes; };
	category default { stderr; };
	category update { stderr; };
	category update-security { stderr; };
};
%s
`, dir, filepath.Join(dir, "named.pid"), ip, conf)
	cf := filepath.Join(dir, "named.conf")
	if err := os.WriteFile(cf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	b := &BIND{Addr: net.JoinHostPort(ip, "53"), Dir: dir}
	// -g: foreground, log to stderr; one worker thread is enough on loopback.
	b.Process = StartProcess(t, "named", own, []string{"-g", "-4", "-n", "1", "-c", cf}, dir)
	waitServing(t, b.Process, "named", b.Addr, origins)
	return b
}
