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

// NSD is a Debian `nsd` process serving zone files, a reference
// authoritative server for differential tests.
type NSD struct {
	*Process
	Addr string // "ip:53"
}

// StartNSD starts nsd on a fresh loopback address with its own configuration
// in a temp dir, serving zones (origin -> zone file text), and waits until it
// answers the SOA of every zone. extraServer lines are added to the server:
// clause (e.g. "minimal-responses: yes").
func StartNSD(t testing.TB, zones map[string]string, extraServer ...string) *NSD {
	t.Helper()
	bin := LookPathOwn(t, "nsd") // not stopped by scripts/test-deps.sh
	ip := NewIP(t)
	dir := t.TempDir()
	var conf strings.Builder
	fmt.Fprintf(&conf, `server:
	ip-address: %s
	port: 53
	username: ""
	chroot: ""
	zonesdir: %q
	database: ""
	zonelistfile: %q
	xfrdfile: %q
	xfrdir: %q
	pidfile: %q
	server-count: 1
	verbosity: 2
	hide-version: yes
`, ip, dir, filepath.Join(dir, "zone.list"), filepath.Join(dir, "xfrd.state"), dir, filepath.Join(dir, "nsd.pid"))
	for _, l := range extraServer {
		fmt.Fprintf(&conf, "\t%s\n", l)
	}
	conf.WriteString("remote-control:\n\tcontrol-enable: no\n")
	origins := make([]string, 0, len(zones))
	for origin := range zones {
		origins = append(origins, origin)
	}
	sort.Strings(origins)
	for _, origin := range origins {
		file := strings.TrimSuffix(dns.Fqdn(origin), ".") + ".zone"
		if err := os.WriteFile(filepath.Join(dir, file), []byte(zones[origin]), 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&conf, "zone:\n\tname: %q\n\tzonefile: %q\n", dns.Fqdn(origin), file)
	}
	cf := filepath.Join(dir, "nsd.conf")
	if err := os.WriteFile(cf, []byte(conf.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	n := &NSD{Addr: net.JoinHostPort(ip, "53")}
	n.Process = StartProcess(t, "nsd", bin, []string{"-d", "-c", cf}, dir)
	waitServing(t, n.Process, "nsd", n.Addr, origins)

	return n
}

// waitServing waits until the reference server p (named name in messages)
// answers the SOA of every origin at addr, and fails the test with its log
// if it exits or does not within 20 s.
func waitServing(t testing.TB, p *Process, name, addr string, origins []string) {
	t.Helper()
	for _, origin := range origins {
		msg, ok := testkit.Within(20*time.Second, func() (bool, string) {
			if !p.Running() {
				return false, fmt.Sprintf("%s exited: %v", name, p.ExitErr())
			}
			r, err := Ask(addr, origin, dns.TypeSOA, NoRD, Timeout(300*time.Millisecond), Attempts(1))
			if err != nil {
				return false, err.Error()
			}
			return r.Rcode == dns.RcodeSuccess && len(r.Answer) > 0, "SOA " + origin + ": " + dns.RcodeToString[r.Rcode]
		})
		if !ok {
			t.Fatalf("%s not serving %s: %s\n--- %s log ---\n%s", name, origin, msg, name, p.Log())
		}
	}
}
