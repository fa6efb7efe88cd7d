package k8scrd

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/derive"
)

// lintRun writes the Corefile and the files into a new folder, lints and
// returns the exit code and the output.
func lintRun(t *testing.T, corefile string, files map[string]string) (int, string) {
	t.Helper()
	dir := t.TempDir()
	cf := filepath.Join(dir, "Corefile")
	if err := os.WriteFile(cf, []byte(corefile), 0o644); err != nil {
		t.Fatal(err)
	}
	m := filepath.Join(dir, "m")
	for name, text := range files {
		p := filepath.Join(m, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	code := Lint(&out, m, cf, false)
	return code, strings.ReplaceAll(out.String(), m+string(filepath.Separator), "")
}

func wantLines(t *testing.T, out string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains(out, l+"\n") {
			t.Errorf("output lacks the line %q:\n%s", l, out)
		}
	}
}

const lintCorefile = `example.org:1053 {
    k8scrd {
        kubeconfig /nonexistent
        namespaces team-a team-b
        tenancy strict
        resources DNSEndpoint Ingress Service HTTPRoute
        ingress_class nginx
    }
}
`

const lintObjects = `apiVersion: externaldns.k8s.io/v1alpha1
kind: DNSEndpoint
metadata: {name: a, namespace: team-a, creationTimestamp: "2024-01-01T00:00:00Z"}
spec:
  endpoints:
  - {dnsName: www.example.org, recordType: A, targets: ["192.0.2.1"]}
  - {dnsName: www.other.org, recordType: A, targets: ["192.0.2.1"]}
  - {dnsName: x.example.org, recordType: HINFO, targets: ["a b"]}
---
apiVersion: externaldns.k8s.io/v1alpha1
kind: DNSEndpoint
metadata: {name: b, namespace: team-b, creationTimestamp: "2024-02-01T00:00:00Z"}
spec:
  endpoints:
  - {dnsName: www.example.org, recordType: A, targets: ["192.0.2.2"]}
  - {dnsName: b.example.org, recordType: A, targets: ["192.0.2.2"]}
---
apiVersion: externaldns.k8s.io/v1alpha1
kind: DNSEndpoint
metadata: {name: c, namespace: kube-system}
spec:
  endpoints:
  - {dnsName: c.example.org, recordType: A, targets: ["192.0.2.3"]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: d, namespace: team-a}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: i, namespace: team-a, annotations: {kubernetes.io/ingress.class: traefik}}
spec:
  rules: [{host: i.example.org}]
---
apiVersion: v1
kind: Service
metadata: {name: s, namespace: team-a, annotations: {coredns.io/hostname: s.example.org}}
spec: {type: LoadBalancer}
status: {loadBalancer: {ingress: [{ip: 192.0.2.9}]}}
---
apiVersion: v1
kind: Service
metadata: {name: quiet, namespace: team-a}
spec: {type: ClusterIP}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: team-b, generation: 2}
spec:
  hostnames: [r.example.org]
  parentRefs: [{name: gw}]
`

// TestLintSaysWhatIsNotServedAndWhy: tenancy, zone, type, namespace,
// class, a foreign annotation and an unaccepted route each give a line with
// the reason the Event on the object would carry, and exit 1.
func TestLintSaysWhatIsNotServedAndWhy(t *testing.T) {
	code, out := lintRun(t, lintCorefile, map[string]string{"a.yaml": lintObjects})
	if code != LintNotServed {
		t.Errorf("exit %d, want %d:\n%s", code, LintNotServed, out)
	}
	wantLines(t, out,
		`a.yaml:1: DNSEndpoint team-a/a: serves www.example.org. A`,
		`a.yaml:1: DNSEndpoint team-a/a: NameSkipped: endpoint 1 (www.other.org A): name "www.other.org." is outside zones [example.org.]`,
		`a.yaml:1: DNSEndpoint team-a/a: InvalidEndpoint: endpoint 2 (x.example.org HINFO): record type "HINFO" is not served`,
		`a.yaml:10: DNSEndpoint team-b/b: serves b.example.org. A`,
		`a.yaml:10: DNSEndpoint team-b/b: NameRefused: www.example.org. belongs to namespace "team-a", whose object published it first`,
		`a.yaml:18: DNSEndpoint kube-system/c: serves nothing`,
		`a.yaml:18: DNSEndpoint kube-system/c: NameSkipped: namespace "kube-system" is not one this block reads (namespaces team-a team-b)`,
		`a.yaml:29: Ingress team-a/i: NameSkipped: IngressClass "traefik" is not one ingress_class serves (nginx)`,
		"a.yaml:35: Service team-a/s: NameSkipped: s.example.org. (k8s_gateway_annotation): k8s_gateway annotation coredns.io/hostname; enable with `hostname_annotation coredns.io/hostname external-dns.alpha.kubernetes.io/hostname`",
		`a.yaml:46: HTTPRoute team-b/r: NameSkipped: parent Gateway team-b/gw has not accepted it (no Accepted=True at generation 2 in status.parents)`,
		`6 objects, 2 names served in example.org.`,
	)
	if strings.Contains(out, "quiet") || strings.Contains(out, "Deployment") {
		t.Errorf("a ClusterIP Service and a Deployment name nothing, yet are listed:\n%s", out)
	}
}

// TestLintAllServedExitsZero: a folder whose every name is served.
func TestLintAllServedExitsZero(t *testing.T) {
	code, out := lintRun(t, "example.org {\n k8scrd\n}\n", map[string]string{"sub/x.json": `{"apiVersion": "externaldns.k8s.io/v1alpha1", "kind": "DNSEndpoint",
 "metadata": {"name": "x"}, "spec": {"endpoints": [{"dnsName": "x.example.org", "recordType": "AAAA", "targets": ["2001:db8::1"]},
 {"dnsName": "x.example.org", "recordType": "TXT", "targets": ["hello"]}]}}`})
	if code != LintServed {
		t.Errorf("exit %d, want %d:\n%s", code, LintServed, out)
	}
	wantLines(t, out, `sub/x.json:1: DNSEndpoint default/x: serves x.example.org. AAAA TXT`)
}

// TestLintNamesTheLineThatDoesNotParse: exit 2, the file and line named,
// and the other files still linted.
func TestLintNamesTheLineThatDoesNotParse(t *testing.T) {
	code, out := lintRun(t, "example.org {\n k8scrd\n}\n", map[string]string{
		"broken.yaml": "apiVersion: externaldns.k8s.io/v1alpha1\nkind: DNSEndpoint\nmetadata:\n  name: x\n  labels: [unclosed\n",
		"good.yaml":   "apiVersion: externaldns.k8s.io/v1alpha1\nkind: DNSEndpoint\nmetadata: {name: good}\nspec: {endpoints: [{dnsName: y.example.org, recordType: A, targets: [192.0.2.1]}]}\n",
	})
	if code != LintBad {
		t.Errorf("exit %d, want %d:\n%s", code, LintBad, out)
	}
	if !strings.Contains(out, "broken.yaml:5: ") {
		t.Errorf("the error does not name broken.yaml:5:\n%s", out)
	}
	wantLines(t, out, `good.yaml:1: DNSEndpoint default/good: serves y.example.org. A`)
}

// TestLintBadCorefileExitsTwo: the Corefile's error names its line, as the
// server's start-up would.
func TestLintBadCorefileExitsTwo(t *testing.T) {
	for _, c := range []struct{ name, corefile, want string }{
		{"unknown word", "example.org {\n k8scrd {\n  tenancy loose\n }\n}\n", `Corefile:3 - Error during parsing: tenancy "loose": want shared or strict`},
		{"no k8scrd", "example.org {\n whoami\n}\n", "no k8scrd block"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out := lintRun(t, c.corefile, nil)
			if code != LintBad || !strings.Contains(out, c.want) {
				t.Errorf("exit %d, want %d with %q:\n%s", code, LintBad, c.want, out)
			}
		})
	}
}

// TestLintOutputIsStable: the builder merges in map order; the lint's lines
// come out the same every run, each once.
func TestLintOutputIsStable(t *testing.T) {
	var b strings.Builder
	for i := range 20 {
		fmt.Fprintf(&b, "---\napiVersion: externaldns.k8s.io/v1alpha1\nkind: DNSEndpoint\nmetadata: {name: o%d, namespace: team-%c, creationTimestamp: \"2024-01-%02dT00:00:00Z\"}\nspec:\n  endpoints:\n", i, 'a'+rune(i%2), i+1)
		for j := range 10 {
			fmt.Fprintf(&b, "  - {dnsName: h%d.example.org, recordType: A, targets: [192.0.2.%d]}\n", j, i)
		}
	}
	files := map[string]string{"many.yaml": b.String()}
	_, first := lintRun(t, lintCorefile, files)
	for range 5 {
		if _, again := lintRun(t, lintCorefile, files); again != first {
			t.Fatalf("two runs differ:\n%s\n---\n%s", first, again)
		}
	}
	seen := map[string]bool{}
	for _, l := range strings.Split(first, "\n") {
		if seen[l] && l != "" {
			t.Errorf("line twice: %q", l)
		}
		seen[l] = true
	}
	if !strings.Contains(first, `many.yaml:18: DNSEndpoint team-b/o1: NameRefused: h0.example.org. belongs to namespace "team-a", whose object published it first`) {
		t.Errorf("no refusal of team-b's o1:\n%s", first)
	}
}

// TestLintExpandsACIDRKey: a server block key 10.0.0.0/23 is the reverse
// zones the server serves, not only the first.
func TestLintExpandsACIDRKey(t *testing.T) {
	code, out := lintRun(t, "10.0.0.0/23:1053 {\n k8scrd\n}\n", map[string]string{"ptr.yaml": "apiVersion: externaldns.k8s.io/v1alpha1\nkind: DNSEndpoint\nmetadata: {name: ptr}\nspec: {endpoints: [{dnsName: 5.1.0.10.in-addr.arpa, recordType: PTR, targets: [host.example.org]}]}\n"})
	if code != LintServed {
		t.Errorf("exit %d, want %d:\n%s", code, LintServed, out)
	}
	wantLines(t, out, "ptr.yaml:1: DNSEndpoint default/ptr: serves 5.1.0.10.in-addr.arpa. PTR", "1 objects, 1 names served in 0.0.10.in-addr.arpa. 1.0.10.in-addr.arpa.")
}

// lintK8sGatewayObjects are the names k8s_gateway serves that external-dns's
// conventions do not: a Service annotated coredns.io/hostname, a
// LoadBalancer Service without any annotation (NAME.NAMESPACE), an Ingress
// host relative to the zone, and a headless Service asking for its pod
// addresses (which no word serves).
const lintK8sGatewayObjects = `apiVersion: v1
kind: Service
metadata: {name: annotated, namespace: web, annotations: {coredns.io/hostname: "shop.example.org, api.example.org"}}
spec: {type: LoadBalancer}
status: {loadBalancer: {ingress: [{ip: 192.0.2.1}]}}
---
apiVersion: v1
kind: Service
metadata: {name: plain, namespace: web}
spec: {type: LoadBalancer}
status: {loadBalancer: {ingress: [{ip: 192.0.2.2}]}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: rel, namespace: web}
spec:
  rules: [{host: myapp}]
status: {loadBalancer: {ingress: [{ip: 192.0.2.3}]}}
`

const lintK8sGatewayEndpoints = `apiVersion: v1
kind: Service
metadata: {name: pods, namespace: web, annotations: {k8s-gateway.dns/resolve-endpoints: "true"}}
spec: {clusterIP: None}
`

// TestLintK8sGatewayNames: without the naming words, each name k8s_gateway
// would serve is listed with derive/names.go's reason and its advice, and the
// lint exits 1; with them, the same names are served and it exits 0. The
// coredns.io/hostname hosts are not said skipped once hostname_annotation
// reads the annotation.
func TestLintK8sGatewayNames(t *testing.T) {
	const without = "example.org {\n k8scrd {\n  resources Ingress Service\n }\n}\n"
	const with = "example.org {\n k8scrd {\n  resources Ingress Service\n  hostname_annotation coredns.io/hostname external-dns.alpha.kubernetes.io/hostname\n  service_names\n  relative_hosts\n }\n}\n"
	files := map[string]string{"gw.yaml": lintK8sGatewayObjects}

	code, out := lintRun(t, without, files)
	if code != LintNotServed {
		t.Errorf("without the words: exit %d, want %d:\n%s", code, LintNotServed, out)
	}
	wantLines(t, out,
		"gw.yaml:1: Service web/annotated: serves nothing",
		"gw.yaml:1: Service web/annotated: NameSkipped: api.example.org. (k8s_gateway_annotation): "+derive.UnservedHelp[derive.ReasonK8sGatewayAnnotation],
		"gw.yaml:1: Service web/annotated: NameSkipped: shop.example.org. (k8s_gateway_annotation): "+derive.UnservedHelp[derive.ReasonK8sGatewayAnnotation],
		"gw.yaml:7: Service web/plain: serves nothing",
		"gw.yaml:7: Service web/plain: NameSkipped: plain.web.example.org. (k8s_gateway_service_name): k8s_gateway NAME.NAMESPACE name of a LoadBalancer Service; enable with `service_names`",
		"gw.yaml:13: Ingress web/rel: serves nothing",
		"gw.yaml:13: Ingress web/rel: NameSkipped: myapp.example.org. (k8s_gateway_relative_host): k8s_gateway host relative to the zone; enable with `relative_hosts`",
		"3 objects, 0 names served in example.org.",
	)
	if strings.Contains(out, "outside the zones") {
		t.Errorf("a relative host said outside the zones as well as relative:\n%s", out)
	}

	code, out = lintRun(t, with, files)
	if code != LintServed {
		t.Errorf("with the words: exit %d, want %d:\n%s", code, LintServed, out)
	}
	wantLines(t, out,
		"gw.yaml:1: Service web/annotated: serves api.example.org. A, shop.example.org. A",
		"gw.yaml:7: Service web/plain: serves plain.web.example.org. A",
		"gw.yaml:13: Ingress web/rel: serves myapp.example.org. A",
		"3 objects, 4 names served in example.org.",
	)
	if strings.Contains(out, "NameSkipped") {
		t.Errorf("with the words, a name is still said skipped:\n%s", out)
	}

	// Pod addresses: no word serves them; said with the advice, words or not.
	for _, corefile := range []string{without, with} {
		code, out = lintRun(t, corefile, map[string]string{"pods.yaml": lintK8sGatewayEndpoints})
		if code != LintNotServed {
			t.Errorf("resolve-endpoints: exit %d, want %d:\n%s", code, LintNotServed, out)
		}
		wantLines(t, out, "pods.yaml:1: Service web/pods: NameSkipped: pods.web.example.org. (k8s_gateway_resolve_endpoints): "+derive.UnservedHelp[derive.ReasonK8sGatewayEndpoints])
	}
}

// TestLintK8sGatewayNamesAsJSON: the JSON line carries derive/names.go's
// reason apart, the label of coredns_k8scrd_unserved_names_total.
func TestLintK8sGatewayNamesAsJSON(t *testing.T) {
	dir := t.TempDir()
	cf := filepath.Join(dir, "Corefile")
	if err := os.WriteFile(cf, []byte("example.org {\n k8scrd {\n  resources Service\n }\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := filepath.Join(dir, "m")
	if err := os.MkdirAll(m, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(m, "s.yaml"), []byte(lintK8sGatewayObjects), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if code := Lint(&out, m, cf, true); code != LintNotServed {
		t.Errorf("exit %d, want %d", code, LintNotServed)
	}
	want := `"notServed":[{"name":"plain.web.example.org.","reason":"NameSkipped","message":"plain.web.example.org. (k8s_gateway_service_name): k8s_gateway NAME.NAMESPACE name of a LoadBalancer Service; enable with ` + "`service_names`" + `","k8sGateway":"k8s_gateway_service_name"}]`
	if !strings.Contains(out.String(), want) {
		t.Errorf("no JSON line with %s:\n%s", want, out.String())
	}
}
