package reliability

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

// directoryServer runs k8scrd on a manifest folder, with the stock reload
// plugin so that SIGUSR1 reloads the Corefile.
func directoryServer(t *testing.T, dir, extra string) *harness.CoreDNS {
	t.Helper()
	harness.RequirePlugins(t, "k8scrd")
	ip := harness.NewIP(t)
	return harness.StartCoreDNS(t, fmt.Sprintf(`%s:53 {
    bind %s
    k8scrd {
        directory %s
%s    }
    errors
}
`, zone, ip, dir, extra), harness.WithProbe("www."+zone, dns.TypeA))
}

func wantWWW(target string) func(string, *dns.Msg) string {
	return func(_ string, m *dns.Msg) string {
		if m.Rcode != dns.RcodeSuccess || !slices.Equal(addrsOf(m), []string{target}) {
			return summary(m, nil)
		}
		return ""
	}
}

// TestManifestWrittenInPieces: a manifest caught half-written (an editor or
// kubectl writing in several steps) never takes the names it held away;
// when it is complete, its new data is served.
func TestManifestWrittenInPieces(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	dir := t.TempDir()
	old := testkit.DNSEndpoint("reliability", "zone", nil, testkit.Endpoint{DNSName: "www.example.org", RecordType: "A", TTL: 60, Targets: []string{"192.0.2.1"}},
		testkit.Endpoint{DNSName: "mail.example.org", RecordType: "A", TTL: 60, Targets: []string{"192.0.2.25"}})
	testkit.WriteFile(t, dir, "zone.yaml", old)
	srv := directoryServer(t, dir, "")

	l := startLoad(srv.Addr, 2, 5*time.Millisecond, []string{"www." + zone}, dns.TypeA, wantWWW("192.0.2.1"))
	next := testkit.DNSEndpoint("reliability", "zone", nil, testkit.Endpoint{DNSName: "www.example.org", RecordType: "A", TTL: 60, Targets: []string{"192.0.2.2"}},
		testkit.Endpoint{DNSName: "mail.example.org", RecordType: "A", TTL: 60, Targets: []string{"192.0.2.25"}})
	// In place, in two writes with a pause longer than the settle delay:
	// the first piece stops in the middle of a line, so it does not parse.
	f, err := os.OpenFile(filepath.Join(dir, "zone.yaml"), os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cut := len(next) * 2 / 3
	for next[cut-1] == '\n' || next[cut-1] == ' ' {
		cut++
	}
	if _, err := f.WriteString(next[:cut]); err != nil {
		t.Fatal(err)
	}
	f.Sync()
	time.Sleep(time.Second)
	total, wrong, first := l.end()
	t.Logf("half-written manifest for 1 s: %d queries, %d wrong", total, wrong)
	if wrong > 0 {
		t.Errorf("while the manifest was half written, %d of %d answers were not the last good data: %v", wrong, total, first)
	}
	if _, err := f.WriteString(next[cut:]); err != nil {
		t.Fatal(err)
	}
	f.Close()
	completed := time.Now()
	harness.WaitTargets(t, 5*time.Second, "www served from the completed manifest", srv.Addr, "www."+zone, dns.TypeA, "192.0.2.2")
	t.Logf("completed manifest served after %v", time.Since(completed).Round(time.Millisecond))

	// A new file that appears half written: whatever it holds so far is not
	// served as if it were the whole file, and the rest of the folder is untouched.
	l = startLoad(srv.Addr, 2, 5*time.Millisecond, []string{"www." + zone}, dns.TypeA, wantWWW("192.0.2.2"))
	extra := testkit.DNSEndpoint("reliability", "extra", nil, testkit.Endpoint{DNSName: "new.example.org", RecordType: "A", TTL: 60, Targets: []string{"192.0.2.3"}})
	if err := os.WriteFile(filepath.Join(dir, "extra.yaml"), []byte(extra[:len(extra)-12]), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if err := os.WriteFile(filepath.Join(dir, "extra.yaml"), []byte(extra), 0o644); err != nil {
		t.Fatal(err)
	}
	harness.WaitTargets(t, 5*time.Second, "new.example.org served from the added file", srv.Addr, "new."+zone, dns.TypeA, "192.0.2.3")
	total, wrong, first = l.end()
	if wrong > 0 {
		t.Errorf("a half-written new file disturbed other names: %d of %d wrong: %v", wrong, total, first)
	}
}

// TestManifestReplacedByRename: a manifest replaced by rename(2) (as
// kubectl cp, editors and ConfigMap volumes do) switches from the old data
// to the new with no answer in between that is neither.
func TestManifestReplacedByRename(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	dir := t.TempDir()
	testkit.WriteFile(t, dir, "zone.yaml", testkit.DNSEndpoint("reliability", "zone", nil, testkit.Endpoint{DNSName: "www.example.org", RecordType: "A", TTL: 60, Targets: []string{"192.0.2.1"}}))
	srv := directoryServer(t, dir, "")
	var changedAt time.Time
	l := startLoad(srv.Addr, 2, 2*time.Millisecond, []string{"www." + zone}, dns.TypeA, func(_ string, m *dns.Msg) string {
		got := addrsOf(m)
		if m.Rcode != dns.RcodeSuccess || !(slices.Equal(got, []string{"192.0.2.1"}) || slices.Equal(got, []string{"192.0.2.2"}) || slices.Equal(got, []string{"192.0.2.3"})) {
			return summary(m, nil)
		}
		return ""
	})
	for i, target := range []string{"192.0.2.2", "192.0.2.3", "192.0.2.1", "192.0.2.2"} {
		testkit.WriteFile(t, dir, "zone.yaml", testkit.DNSEndpoint("reliability", "zone", nil, testkit.Endpoint{DNSName: "www.example.org", RecordType: "A", TTL: 60, Targets: []string{target}}))
		changedAt = time.Now()
		testkit.Eventually(t, 5*time.Second, "www served from the renamed-in file", func() (bool, string) {
			m, err := harness.Ask(srv.Addr, "www."+zone, dns.TypeA)
			return err == nil && slices.Equal(addrsOf(m), []string{target}), summary(m, err)
		})
		t.Logf("rename %d: new data served after %v", i+1, time.Since(changedAt).Round(time.Millisecond))
	}
	total, wrong, first := l.end()
	t.Logf("4 renames under load: %d queries, %d neither old nor new", total, wrong)
	if wrong > 0 {
		t.Errorf("%d of %d answers during renames were neither the old nor the new data: %v", wrong, total, first)
	}
}

// TestCorefileReloadUnderLoad reloads the Corefile (SIGUSR1, as the reload
// plugin does on a change) three times while queries arrive: every query is
// answered, from the data, and the changed setting takes effect.
func TestCorefileReloadUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	harness.RequirePlugins(t, "k8scrd", "localtargets", "gslb", "reload")
	dir := t.TempDir()
	testkit.WriteFile(t, dir, "zone.yaml", testkit.DNSEndpoint("reliability", "zone", nil,
		testkit.Endpoint{DNSName: "www.example.org", RecordType: "A", Targets: []string{"192.0.2.1"}},
		testkit.Endpoint{DNSName: appHost, RecordType: "A", Targets: []string{"10.10.0.1"}}))
	ip := harness.NewIP(t)
	corefile := func(ttl int) string {
		return fmt.Sprintf(`%s:53 %s:53 {
    bind %s
    localtargets
    gslb %s {
        geotag eu
        ttl 5
    }
    k8scrd %s %s {
        directory %s
        ttl %d
    }
    errors
}
`, zone, gslbZone, ip, gslbZone, zone, gslbZone, dir, ttl)
	}
	srv := harness.StartCoreDNS(t, corefile(30), harness.WithProbe("www."+zone, dns.TypeA))
	l := startLoad(srv.Addr, 4, 2*time.Millisecond, []string{"www." + zone, appHost}, dns.TypeA, func(name string, m *dns.Msg) string {
		want := "192.0.2.1"
		if name == appHost {
			want = "10.10.0.1"
		}
		if m.Rcode != dns.RcodeSuccess || !slices.Equal(addrsOf(m), []string{want}) {
			return summary(m, nil)
		}
		return ""
	})
	time.Sleep(500 * time.Millisecond)
	for i, ttl := range []int{31, 32, 33} {
		if err := os.WriteFile(srv.Corefile, []byte(corefile(ttl)), 0o644); err != nil {
			t.Fatal(err)
		}
		srv.Signal(syscall.SIGUSR1)
		testkit.Eventually(t, 15*time.Second, "the reloaded TTL served", func() (bool, string) {
			m, err := harness.Ask(srv.Addr, "www."+zone, dns.TypeA)
			if err != nil || len(m.Answer) == 0 {
				return false, summary(m, err)
			}
			return m.Answer[0].Header().Ttl == uint32(ttl), fmt.Sprintf("reload %d: TTL %d, want %d", i+1, m.Answer[0].Header().Ttl, ttl)
		})
		time.Sleep(300 * time.Millisecond)
	}
	total, wrong, first := l.end()
	t.Logf("3 reloads under load: %d queries, %d failed or wrong, slowest %v", total, wrong, l.maxLat.Round(time.Millisecond))
	if wrong > 0 {
		t.Errorf("%d of %d queries failed or were wrong across reloads: %v", wrong, total, first)
	}
	if !srv.Running() {
		t.Fatalf("coredns exited: %v\n%s", srv.ExitErr(), srv.Log())
	}
}
