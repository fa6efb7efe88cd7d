package k8scrd

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/dirfeed"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// hasA tells whether name answers an A record of exactly addr (a substring
// match took 192.0.2.10 for 192.0.2.1).
func hasA(k *K8sCRD, t *testing.T, name, addr string) func() bool {
	want := net.ParseIP(addr)
	if want == nil {
		t.Fatalf("hasA: %q is not an address", addr)
	}
	return func() bool {
		resp, _ := ask(t, k, name, dns.TypeA)
		if resp == nil {
			return false
		}
		for _, rr := range resp.Answer {
			if a, ok := rr.(*dns.A); ok && a.A.Equal(want) {
				return true
			}
		}
		return false
	}
}

func isNXDOMAIN(k *K8sCRD, t *testing.T, name string) func() bool {
	return func() bool {
		resp, _ := ask(t, k, name, dns.TypeA)
		return resp != nil && resp.Rcode == dns.RcodeNameError
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestDirectoryCreateChangeDeleteRename(t *testing.T) {
	k, dir := newTestPlugin(t, "example.org", zoneBody, map[string]string{
		"a.yaml": testkit.DNSEndpoint("ns", "a", nil, testkit.EP("a.example.org", "A", 0, "192.0.2.1")),
	})
	if !hasA(k, t, "a.example.org.", "192.0.2.1")() {
		t.Fatal("a.example.org not served at start")
	}

	write(t, filepath.Join(dir, "b.yml"), testkit.DNSEndpoint("ns", "b", nil, testkit.EP("b.example.org", "A", 0, "192.0.2.2")))
	testkit.Eventually(t, 5*time.Second, "created file served", hasA(k, t, "b.example.org.", "192.0.2.2"))

	write(t, filepath.Join(dir, "b.yml"), testkit.DNSEndpoint("ns", "b", nil, testkit.EP("b.example.org", "A", 0, "192.0.2.3")))
	testkit.Eventually(t, 5*time.Second, "changed file served", hasA(k, t, "b.example.org.", "192.0.2.3"))
	if hasA(k, t, "b.example.org.", "192.0.2.2")() {
		t.Error("old target still served after the change")
	}

	if err := os.Rename(filepath.Join(dir, "b.yml"), filepath.Join(dir, "c.json.tmp")); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "renamed-away file dropped", isNXDOMAIN(k, t, "b.example.org."))
	if err := os.Rename(filepath.Join(dir, "c.json.tmp"), filepath.Join(dir, "c.yaml")); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "renamed-in file served", hasA(k, t, "b.example.org.", "192.0.2.3"))

	if err := os.Remove(filepath.Join(dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "deleted file dropped", isNXDOMAIN(k, t, "a.example.org."))
	if !hasA(k, t, "b.example.org.", "192.0.2.3")() {
		t.Error("other file lost when one was deleted")
	}
}

func TestDirectoryMalformedFileSkippedRestServed(t *testing.T) {
	before := testutil.ToFloat64(object.InvalidEndpoints.WithLabelValues(object.ReasonDecode))
	k, dir := newTestPlugin(t, "example.org", zoneBody, map[string]string{
		"good.yaml": testkit.DNSEndpoint("ns", "good", nil, testkit.EP("good.example.org", "A", 0, "192.0.2.1")),
		"bad.yaml":  "apiVersion: externaldns.k8s.io/v1alpha1\nkind: DNSEndpoint\nmetadata:\n  name: bad\n spec: [\n",
		// A multi-document file whose second document is not YAML: the first is still served.
		"mixed.yaml": testkit.DNSEndpoint("ns", "m1", nil, testkit.EP("m1.example.org", "A", 0, "192.0.2.7")) + "---\nkey: [unclosed\n",
	})
	if !hasA(k, t, "good.example.org.", "192.0.2.1")() || !hasA(k, t, "m1.example.org.", "192.0.2.7")() {
		t.Fatal("valid data not served beside malformed files")
	}
	if d := testutil.ToFloat64(object.InvalidEndpoints.WithLabelValues(object.ReasonDecode)) - before; d != 2 {
		t.Errorf("decode errors counted: %v, want 2", d)
	}
	// Fixing the file serves it.
	write(t, filepath.Join(dir, "bad.yaml"), testkit.DNSEndpoint("ns", "bad", nil, testkit.EP("bad.example.org", "A", 0, "192.0.2.9")))
	testkit.Eventually(t, 5*time.Second, "fixed file served", hasA(k, t, "bad.example.org.", "192.0.2.9"))
}

func TestDirectoryFileWrittenInPieces(t *testing.T) {
	k, dir := newTestPlugin(t, "example.org", zoneBody, nil)
	full := testkit.DNSEndpoint("ns", "p", nil, testkit.EP("p.example.org", "A", 0, "192.0.2.4"), testkit.EP("q.example.org", "A", 0, "192.0.2.5"))
	path := filepath.Join(dir, "p.yaml")
	// The first piece ends inside a quoted target: it does not parse.
	cut := strings.Index(full, "192.0.2.5") + 4
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(full[:cut])
	f.Sync()
	time.Sleep(4 * dirfeed.Settle) // the piece is read, does not parse, and is skipped
	if r, _ := ask(t, k, "p.example.org.", dns.TypeA); r.Rcode != dns.RcodeNameError {
		t.Errorf("half-written new file: want nothing served from it yet, got\n%s", r)
	}
	f.WriteString(full[cut:])
	f.Close()
	testkit.Eventually(t, 5*time.Second, "whole file served", hasA(k, t, "q.example.org.", "192.0.2.5"))
	if !hasA(k, t, "p.example.org.", "192.0.2.4")() {
		t.Error("p.example.org missing once the file is whole")
	}

	// Rewritten in place (truncate, then pieces): the previous contents keep
	// being served until the new ones parse.
	next := strings.ReplaceAll(full, "192.0.2.", "198.51.100.")
	cut = strings.Index(next, "198.51.100.5") + 4
	write(t, path, next[:cut])
	time.Sleep(4 * dirfeed.Settle)
	if !hasA(k, t, "q.example.org.", "192.0.2.5")() {
		t.Error("while the file is half-rewritten its previous contents must be served")
	}
	write(t, path, next)
	testkit.Eventually(t, 5*time.Second, "rewritten file served", hasA(k, t, "q.example.org.", "198.51.100.5"))
}

func TestDirectoryConfigMapSymlinkSwap(t *testing.T) {
	// A ConfigMap volume: files are symlinks through ..data, which is swapped atomically.
	k, dir := newTestPlugin(t, "example.org", zoneBody, nil)
	mk := func(ts, addr string) {
		os.MkdirAll(filepath.Join(dir, ts), 0o755)
		write(t, filepath.Join(dir, ts, "cm.yaml"), testkit.DNSEndpoint("ns", "cm", nil, testkit.EP("cm.example.org", "A", 0, addr)))
		os.Symlink(ts, filepath.Join(dir, "..data_tmp"))
		if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	mk("..v1", "192.0.2.31")
	os.Symlink(filepath.Join("..data", "cm.yaml"), filepath.Join(dir, "cm.yaml"))
	testkit.Eventually(t, 5*time.Second, "configmap file served", hasA(k, t, "cm.example.org.", "192.0.2.31"))
	mk("..v2", "192.0.2.32")
	testkit.Eventually(t, 5*time.Second, "configmap update served", hasA(k, t, "cm.example.org.", "192.0.2.32"))
}

func TestDirectoryNamespacesAndLabelsFilter(t *testing.T) {
	k, _ := newTestPlugin(t, "example.org", zoneBody+"\nnamespaces web edge\nlabels tier=public", map[string]string{
		"a.yaml": strings.Replace(testkit.DNSEndpoint("web", "in", nil, testkit.EP("in.example.org", "A", 0, "192.0.2.1")), "metadata:\n", "metadata:\n  labels: {tier: public}\n", 1) +
			"---\n" + strings.Replace(testkit.DNSEndpoint("web", "private", nil, testkit.EP("private.example.org", "A", 0, "192.0.2.2")), "metadata:\n", "metadata:\n  labels: {tier: private}\n", 1) +
			"---\n" + strings.Replace(testkit.DNSEndpoint("other", "ns", nil, testkit.EP("otherns.example.org", "A", 0, "192.0.2.3")), "metadata:\n", "metadata:\n  labels: {tier: public}\n", 1),
	})
	if !hasA(k, t, "in.example.org.", "192.0.2.1")() {
		t.Error("object in a listed namespace with matching labels not served")
	}
	for _, name := range []string{"private.example.org.", "otherns.example.org."} {
		if !isNXDOMAIN(k, t, name)() {
			t.Errorf("%s: filtered out by labels or namespace, yet served", name)
		}
	}
}

// hasA compares addresses exactly: 192.0.2.10 is not 192.0.2.1 (the
// substring check it replaces passed here).
func TestHasAExact(t *testing.T) {
	k, _ := newTestPlugin(t, "example.org", zoneBody, map[string]string{
		"a.yaml": testkit.DNSEndpoint("ns", "a", nil, testkit.EP("a.example.org", "A", 0, "192.0.2.10")),
	})
	if !hasA(k, t, "a.example.org.", "192.0.2.10")() {
		t.Fatal("a.example.org. A 192.0.2.10 not seen")
	}
	for _, addr := range []string{"192.0.2.1", "92.0.2.10", "192.0.2.100"} {
		if hasA(k, t, "a.example.org.", addr)() {
			t.Errorf("hasA(%s) true for an answer of 192.0.2.10 only", addr)
		}
	}
}
