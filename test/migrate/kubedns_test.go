package migrate_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"
	"github.com/miekg/dns"
)

// guideBlock returns the shell block of docs/migrate-kube-dns.md that
// contains marker, without its fence and indentation.
func guideBlock(t *testing.T, doc, marker string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(harness.ModuleRoot(t), doc))
	if err != nil {
		t.Fatal(err)
	}
	fence := regexp.MustCompile("(?ms)^( *)```sh\n(.*?)^ *```")
	for _, m := range fence.FindAllStringSubmatch(string(b), -1) {
		if !strings.Contains(m[2], marker) {
			continue
		}
		var lines []string
		for _, l := range strings.Split(m[2], "\n") {
			lines = append(lines, strings.TrimPrefix(l, m[1]))
		}
		return strings.Join(lines, "\n")
	}
	t.Fatalf("%s: no shell block holds %q", doc, marker)
	return ""
}

// TestKubeDNSGuideAgainstTheShippedTree follows docs/migrate-kube-dns.md
// with the shipped deploy/kube-system tree on a real API server: the CRD
// and the drop-in applied, kube-dns scaled to zero, the dnsmasq hosts file
// turned into a DNSEndpoint by the guide's own commands (its lint
// included), and the drop-in's Corefile, run with the shipped
// ServiceAccount's token, answering the migrated names, the cluster's and
// the kube-dns ConfigMap's routes.
func TestKubeDNSGuideAgainstTheShippedTree(t *testing.T) {
	k := harness.StartKube(t)
	root := harness.ModuleRoot(t)
	const doc = "docs/migrate-kube-dns.md"

	// A user's working folder: a checkout (deploy/), the hosts file, and
	// kubectl and coredns on the PATH.
	work := t.TempDir()
	if err := os.Symlink(filepath.Join(root, "deploy"), filepath.Join(work, "deploy")); err != nil {
		t.Fatal(err)
	}
	hosts := "# dnsmasq addn-hosts, kept by hand\n198.18.0.10 printer.apps.internal\n198.18.0.11 nas.apps.internal files.apps.internal\nfd00::11 nas.apps.internal\n"
	if err := os.WriteFile(filepath.Join(work, "addn-hosts"), []byte(hosts), 0o644); err != nil {
		t.Fatal(err)
	}
	step := func(name, marker string) string {
		t.Helper()
		script := guideBlock(t, doc, marker)
		// The test API server runs no controllers: no pod ever rolls out.
		script = regexp.MustCompile(`(?m)^.*rollout status.*$`).ReplaceAllString(script, "")
		return runScript(t, work, k, doc+", "+name, script)
	}

	// The cluster as kube-dns left it: its Deployment (a stand-in: nothing
	// runs it here) and ConfigMap, whose stub domain and upstreams are
	// real servers on loopback.
	stub, upstream, stub2 := harness.NewIP(t), harness.NewIP(t), harness.NewIP(t)
	harness.StartCoreDNS(t, fmt.Sprintf(`acme.local:53 {
    bind %s
    template IN A acme.local {
        answer "{{ .Name }} 60 IN A 198.18.1.53"
    }
}
.:53 {
    bind %s
    template IN A . {
        answer "{{ .Name }} 60 IN A 198.18.1.1"
    }
    template ANY ANY . {
        rcode NOERROR
    }
}
`, stub, upstream), harness.WithDNSAddr(stub+":53"), harness.WithProbe("host.acme.local.", dns.TypeA))
	// The stub server the guide's patch moves acme.local to (a process of
	// its own: one process serves a zone from one block, whatever it binds).
	harness.StartCoreDNS(t, fmt.Sprintf(`acme.local:53 {
    bind %s
    template IN A acme.local {
        answer "{{ .Name }} 60 IN A 198.18.1.54"
    }
}
`, stub2), harness.WithDNSAddr(stub2+":53"), harness.WithProbe("host.acme.local.", dns.TypeA))
	k.Apply(t, `apiVersion: apps/v1
kind: Deployment
metadata: {name: kube-dns, namespace: kube-system}
spec:
  replicas: 2
  selector: {matchLabels: {k8s-app: kube-dns-legacy}}
  template:
    metadata: {labels: {k8s-app: kube-dns-legacy}}
    spec: {containers: [{name: kubedns, image: registry.k8s.io/dns/k8s-dns-kube-dns:1.23.0}]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: kube-dns, namespace: kube-system}
data:
  stubDomains: |
    {"acme.local": ["`+stub+`"]}
  upstreamNameservers: |
    ["`+upstream+`"]
`)

	step("step 2, the CRD and the drop-in", "kubectl apply --server-side --force-conflicts -k deploy/kube-system")
	step("step 3, kube-dns retired", "scale deploy/kube-dns --replicas=0")
	if got := k.Kubectl(t, "-n", "kube-system", "get", "deploy", "kube-dns", "-o", "jsonpath={.spec.replicas}"); got != "0" {
		t.Errorf("kube-dns replicas after step 3: %s, want 0", got)
	}
	out := step("step 4, the hosts as a DNSEndpoint", "addn-hosts > dns/legacy-hosts.yaml")
	if !strings.Contains(out, "DNSEndpoint default/legacy-hosts: serves") || strings.Contains(out, "NameSkipped") {
		t.Errorf("the guide's lint does not say every migrated name is served:\n%s", out)
	}

	// The drop-in's Corefile, as shipped, run with the shipped
	// ServiceAccount's token and the kube-dns ConfigMap as the pod mounts it.
	shipped, err := os.ReadFile(filepath.Join(root, "deploy/kube-system/Corefile"))
	if err != nil {
		t.Fatal(err)
	}
	ip := harness.NewIP(t)
	dir := t.TempDir()
	kubedns := filepath.Join(dir, "kube-dns")
	k.ConfigMapFolder(t, "kube-system", "kube-dns", kubedns)
	resolv := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver "+harness.NewIP(t)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	token := k.TokenKubeconfig(t, "kube-system", "coredns")
	const ports = "fixed ports on every interface would collide with the other tests on this machine"
	const creds = "the pod's in-cluster credentials: the shipped ServiceAccount's token for the test API server"
	ready := harness.HostPort(t, ip)
	cf := harness.Substitute(t, string(shipped),
		harness.Substitution{Old: ".:53 {", New: ".:53 {\n    bind " + ip, Why: "each test listens on a loopback address of its own"},
		harness.Substitution{Old: "health {", New: "health " + harness.HostPort(t, ip) + " {", Why: ports},
		harness.Substitution{Old: "\n    ready\n", New: "\n    ready " + ready + "\n", Why: ports},
		harness.Substitution{Old: "prometheus :9153", New: "prometheus " + harness.HostPort(t, ip), Why: ports},
		harness.Substitution{Old: "pods insecure", New: "pods insecure\n       kubeconfig " + token, Why: creds},
		harness.Substitution{Old: "namespaces default", New: "namespaces default\n       kubeconfig " + token, Why: creds},
		harness.Substitution{Old: "kubedns /etc/kube-dns", New: "kubedns " + kubedns, Why: "the pod's mount of ConfigMap kube-dns, written from the API server"},
		harness.Substitution{Old: "resolv /etc/resolv.conf", New: "resolv " + resolv, Why: "the node's resolvers: upstreamNameservers replaces them here, as in kube-dns"},
	)
	srv := harness.StartCoreDNS(t, cf, harness.WithDNSAddr(ip+":53"), harness.WithReadyURL("http://"+ready+"/ready"))

	// The guide's Verify, from the test machine: the queries a pod sends.
	guideBlock(t, doc, "dig +short printer.apps.internal")
	answers(t, srv.Addr, []answer{
		{"printer.apps.internal.", dns.TypeA, "198.18.0.10"},
		{"nas.apps.internal.", dns.TypeA, "198.18.0.11"},
		{"nas.apps.internal.", dns.TypeAAAA, "fd00::11"},
		{"files.apps.internal.", dns.TypeA, "198.18.0.11"},
		{"kubernetes.default.svc.cluster.local.", dns.TypeA, "10.96.0.1"},
		{"host.acme.local.", dns.TypeA, "198.18.1.53"},
		{"www.example.com.", dns.TypeA, "198.18.1.1"},
	})

	// A stub domain changed in the ConfigMap applies without a restart,
	// once the kubelet has refreshed the mounted files.
	patch := guideBlock(t, doc, "patch configmap kube-dns")
	patch, _, _ = strings.Cut(patch, "# kubelet refreshes")
	patch = strings.ReplaceAll(patch, "10.150.0.2", stub2)
	t.Logf("substituted 10.150.0.2 -> %s: the guide's new stub server, one on loopback that answers", stub2)
	runScript(t, work, k, doc+", the stub domain changed", patch)
	k.ConfigMapFolder(t, "kube-system", "kube-dns", kubedns)
	// A new name each try: the shipped `cache 30` keeps what the old stub
	// answered for a name asked before splitdns re-read the files.
	try := 0
	testkit.Eventually(t, 10*time.Second, "acme.local answered by the patched stub server", func() (bool, string) {
		try++
		m, err := harness.Ask(srv.Addr, fmt.Sprintf("n%d.acme.local.", try), dns.TypeA)
		if err != nil {
			return false, err.Error()
		}
		if len(m.Answer) == 1 {
			if a, ok := m.Answer[0].(*dns.A); ok && a.A.String() == "198.18.1.54" {
				return true, ""
			}
		}
		return false, m.String()
	})
}

type answer struct {
	name  string
	qtype uint16
	want  string
}

// answers waits, bounded, for each name to answer its addresses.
func answers(t *testing.T, addr string, want []answer) {
	t.Helper()
	for _, c := range want {
		testkit.Eventually(t, 10*time.Second, c.name+" "+dns.TypeToString[c.qtype]+" answered "+c.want, func() (bool, string) {
			m, err := harness.Ask(addr, c.name, c.qtype)
			if err != nil {
				return false, err.Error()
			}
			var got []string
			for _, rr := range m.Answer {
				switch r := rr.(type) {
				case *dns.A:
					got = append(got, r.A.String())
				case *dns.AAAA:
					got = append(got, r.AAAA.String())
				}
			}
			return strings.Join(got, " ") == c.want, fmt.Sprintf("%s %v", dns.RcodeToString[m.Rcode], got)
		})
	}
}

// runScript runs a guide's commands with bash in the user's working folder
// work, kubectl (for k's API server) and coredns on the PATH.
func runScript(t *testing.T, work string, k *harness.Kube, name, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "KUBECONFIG="+k.Kubeconfig,
		"PATH="+k.Bin+":"+filepath.Dir(harness.CoreDNSBinary(t))+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n--- script ---\n%s\n--- output ---\n%s", name, err, script, out)
	}
	t.Logf("%s:\n%s", name, out)
	return string(out)
}
