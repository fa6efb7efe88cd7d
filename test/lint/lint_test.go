// Package lint_test runs `coredns -lint DIR -conf COREFILE`, the built
// binary, as a GitOps pipeline would: on the repository's own examples/
// and deploy/, on hostile folders, and beside a real API server to show
// that the lint says before an apply what the Events say after it.
package lint_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/test/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }

// lint runs the binary in the repository root and returns its exit code
// and output.
func lint(t *testing.T, dir, corefile string, env ...string) (int, string) {
	t.Helper()
	return lintArgs(t, []string{"-lint", dir, "-conf", corefile}, env...)
}

func lintArgs(t *testing.T, args []string, env ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, harness.CoreDNSBinary(t), args...)
	cmd.Dir = harness.ModuleRoot(t)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &exit):
		return exit.ExitCode(), string(out)
	}
	t.Fatalf("coredns %s: %v\n%s", strings.Join(args, " "), err, out)
	return 0, ""
}

func wantLines(t *testing.T, out string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains(out, l+"\n") {
			t.Errorf("output lacks the line %q:\n%s", l, out)
		}
	}
}

func writeFile(t *testing.T, path, text string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestLintExamplesAllServed: `make run` serves examples/ with
// Corefile.example; the lint says every object's names are served.
func TestLintExamplesAllServed(t *testing.T) {
	code, out := lint(t, "examples", "Corefile.example")
	if code != 0 {
		t.Fatalf("exit %d, want 0:\n%s", code, out)
	}
	wantLines(t, out,
		"examples/example-org.yaml:1: DNSEndpoint web/www: serves alias.example.org. CNAME, app.example.org. CNAME, www.example.org. A AAAA",
		"examples/shop.yaml:1: Ingress web/shop: serves shop.example.org. A",
		"examples/reverse.json:1: DNSEndpoint web/reverse: serves 10.2.0.192.in-addr.arpa. PTR, 11.2.0.192.in-addr.arpa. PTR",
		"6 objects, 14 names served in example.org. 2.0.192.in-addr.arpa.",
	)
}

// TestLintDeployTree: the multicluster manifests are served by the GSLB
// Corefile they ship with, and the parent's delegation by the parent block
// its comment gives; against the kube-system drop-in (namespaces default)
// they are skipped, as they are meant to be, and the lint says so.
func TestLintDeployTree(t *testing.T) {
	dir := t.TempDir()
	gslb := writeFile(t, filepath.Join(dir, "gslb.Corefile"), harness.ShippedCorefile(t, "deploy/gslb/configmap.yaml", "fleetdns-gslb"))
	env := []string{"FLEETDNS_GEOTAG=eu", "FLEETDNS_PARENT_NS=198.18.0.1"}
	code, out := lint(t, "deploy/multicluster/base", gslb, env...)
	if code != 0 {
		t.Errorf("deploy/multicluster/base with deploy/gslb's Corefile: exit %d, want 0:\n%s", code, out)
	}
	wantLines(t, out, "deploy/multicluster/base/zone.yaml:1: DNSEndpoint fleetdns/gslb-zone-apex: serves gslb.example.com. NS, gslb-ns-eu.gslb.example.com. A, gslb-ns-us.gslb.example.com. A")
	code, out = lint(t, "deploy/multicluster/app", gslb, env...)
	if code != 0 {
		t.Errorf("deploy/multicluster/app with deploy/gslb's Corefile: exit %d, want 0:\n%s", code, out)
	}
	// No cluster wrote the Ingress's status: the host is declared, NODATA until it is.
	wantLines(t, out, "deploy/multicluster/app/app.yaml:73: Ingress fleetdns/app: serves app.gslb.example.com. A (no targets yet)")

	parent := writeFile(t, filepath.Join(dir, "parent.Corefile"), "example.com:53 {\n    k8scrd example.com\n}\n")
	if code, out := lint(t, "deploy/multicluster/parent", parent); code != 0 {
		t.Errorf("deploy/multicluster/parent with `k8scrd example.com`: exit %d, want 0:\n%s", code, out)
	}

	code, out = lint(t, "deploy", "deploy/kube-system/Corefile")
	if code != 1 {
		t.Errorf("deploy/ with the kube-system Corefile: exit %d, want 1:\n%s", code, out)
	}
	wantLines(t, out,
		`deploy/multicluster/base/zone.yaml:1: DNSEndpoint fleetdns/gslb-zone-apex: NameSkipped: namespace "fleetdns" is not one this block reads (namespaces default)`,
		`deploy/multicluster/parent/delegation.yaml:1: DNSEndpoint fleetdns/gslb-delegation: NameSkipped: namespace "fleetdns" is not one this block reads (namespaces default)`,
	)
}

// hostileCorefile owns example.org with strict tenancy for two teams.
const hostileCorefile = `example.org:53 {
    k8scrd {
        namespaces team-a team-b
        tenancy strict
        tenant team-a www.example.org
        tenant team-b example.org
    }
}
`

// TestLintHostileFolders: names refused by tenancy, zone and type exit 1
// with the reason; a file that does not parse exits 2 with its line; a
// folder of 10,000 objects is linted within 5 s.
func TestLintHostileFolders(t *testing.T) {
	dir := t.TempDir()
	cf := writeFile(t, filepath.Join(dir, "Corefile"), hostileCorefile)

	t.Run("refused names exit 1 with the reason", func(t *testing.T) {
		m := filepath.Join(dir, "refused")
		writeFile(t, filepath.Join(m, "a.yaml"), `apiVersion: externaldns.k8s.io/v1alpha1
kind: DNSEndpoint
metadata: {name: web, namespace: team-a, creationTimestamp: "2024-01-01T00:00:00Z"}
spec:
  endpoints:
  - {dnsName: www.example.org, recordType: A, targets: [192.0.2.1]}
  - {dnsName: api.example.org, recordType: A, targets: [192.0.2.2]}
---
apiVersion: externaldns.k8s.io/v1alpha1
kind: DNSEndpoint
metadata: {name: takeover, namespace: team-b, creationTimestamp: "2024-02-01T00:00:00Z"}
spec:
  endpoints:
  - {dnsName: www.example.org, recordType: A, targets: [198.51.100.1]}
  - {dnsName: api.example.org, recordType: A, targets: [198.51.100.1]}
  - {dnsName: ftp.example.net, recordType: A, targets: [198.51.100.1]}
  - {dnsName: b.example.org, recordType: SPF, targets: ["v=spf1 -all"]}
`)
		code, out := lint(t, m, cf)
		if code != 1 {
			t.Errorf("exit %d, want 1:\n%s", code, out)
		}
		wantLines(t, out,
			m+`/a.yaml:1: DNSEndpoint team-a/web: serves www.example.org. A`,
			m+`/a.yaml:1: DNSEndpoint team-a/web: NameRefused: no tenant grant of namespace "team-a" covers api.example.org. (granted to "team-b")`,
			m+`/a.yaml:9: DNSEndpoint team-b/takeover: serves api.example.org. A`,
			m+`/a.yaml:9: DNSEndpoint team-b/takeover: NameRefused: no tenant grant of namespace "team-b" covers www.example.org. (granted to "team-a")`,
			m+`/a.yaml:9: DNSEndpoint team-b/takeover: NameSkipped: endpoint 2 (ftp.example.net A): name "ftp.example.net." is outside zones [example.org.]`,
			m+`/a.yaml:9: DNSEndpoint team-b/takeover: InvalidEndpoint: endpoint 3 (b.example.org SPF): record type "SPF" is not served`,
			"2 objects, 2 names served in example.org.",
		)
	})

	t.Run("-json: one JSON object a line", func(t *testing.T) {
		code, out := lintArgs(t, []string{"-lint", filepath.Join(dir, "refused"), "-conf", cf, "-json"})
		if code != 1 {
			t.Errorf("exit %d, want 1:\n%s", code, out)
		}
		type notServed struct{ Name, Reason, Message string }
		var takeover struct {
			Kind, Namespace, Name string
			Serves                []struct {
				Name  string
				Types []string
			}
			NotServed []notServed
		}
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			var v map[string]any
			if err := json.Unmarshal([]byte(l), &v); err != nil {
				t.Fatalf("not a JSON line: %q: %v", l, err)
			}
			if v["name"] == "takeover" {
				if err := json.Unmarshal([]byte(l), &takeover); err != nil {
					t.Fatal(err)
				}
			}
		}
		want := notServed{"www.example.org.", "NameRefused", `no tenant grant of namespace "team-b" covers www.example.org. (granted to "team-a")`}
		if len(takeover.Serves) != 1 || takeover.Serves[0].Name != "api.example.org." || !slices.Contains(takeover.NotServed, want) {
			t.Errorf("takeover: %+v, want api.example.org. served and %+v", takeover, want)
		}
	})

	t.Run("a file that does not parse exits 2 with its line", func(t *testing.T) {
		m := filepath.Join(dir, "broken")
		writeFile(t, filepath.Join(m, "ok.yaml"), "apiVersion: externaldns.k8s.io/v1alpha1\nkind: DNSEndpoint\nmetadata: {name: ok, namespace: team-b}\nspec: {endpoints: [{dnsName: ok.example.org, recordType: A, targets: [192.0.2.9]}]}\n")
		writeFile(t, filepath.Join(m, "tab.yaml"), "apiVersion: externaldns.k8s.io/v1alpha1\nkind: DNSEndpoint\nmetadata:\n  name: tab\n\tnamespace: team-a\n")
		code, out := lint(t, m, cf)
		if code != 2 {
			t.Errorf("exit %d, want 2:\n%s", code, out)
		}
		if !strings.Contains(out, m+"/tab.yaml:5: ") {
			t.Errorf("the error does not name tab.yaml:5:\n%s", out)
		}
		wantLines(t, out, m+"/ok.yaml:1: DNSEndpoint team-b/ok: serves ok.example.org. A")
	})

	t.Run("10,000 objects within 5 s", func(t *testing.T) {
		m := filepath.Join(dir, "many")
		const files, perFile = 20, 500
		for f := range files {
			var b strings.Builder
			for i := range perFile {
				n := f*perFile + i
				fmt.Fprintf(&b, "---\napiVersion: externaldns.k8s.io/v1alpha1\nkind: DNSEndpoint\nmetadata: {name: o%d, namespace: team-%c}\nspec:\n  endpoints:\n  - {dnsName: h%d.example.org, recordType: A, targets: [198.18.%d.%d]}\n  - {dnsName: h%d.example.org, recordType: TXT, targets: [\"object %d\"]}\n",
					n, 'a'+rune(n%2), n, n/256%256, n%256, n, n)
			}
			writeFile(t, filepath.Join(m, fmt.Sprintf("f%02d.yaml", f)), b.String())
		}
		strict := writeFile(t, filepath.Join(dir, "strict.Corefile"), "example.org:53 {\n    k8scrd {\n        namespaces team-a team-b\n        tenancy strict\n    }\n}\n")
		start := time.Now()
		code, out := lint(t, m, strict)
		took := time.Since(start)
		t.Logf("coredns -lint: %d objects in %s", files*perFile, took.Round(time.Millisecond))
		if code != 0 {
			t.Errorf("exit %d, want 0:\n%s", code, harness.TailLines(out, 20))
		}
		if !strings.HasSuffix(out, "\n10000 objects, 10000 names served in example.org.\n") {
			t.Errorf("want every name served, got:\n%s", harness.TailLines(out, 5))
		}
		if took > 5*time.Second {
			t.Errorf("10,000 objects took %s, want under 5 s", took)
		}
	})
}
