package dnssec_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"
	"github.com/miekg/dns"
)

const zone = "gslb.example.com."

// keySet is the zone's key set as the Secret fleetdns-dnssec-keys holds
// it: NAME.key and NAME.private files in one directory (the mount).
type keySet struct {
	dir  string
	ds   string // the KSK's DS record (SHA-256), the parent's and the validators' anchor
	tags map[string]uint16
}

// newKeySet makes a KSK and a ZSK with dnssec-keygen (ECDSA P-256), named
// ksk and zsk as docs/dnssec.md stores them in the Secret.
func newKeySet(t *testing.T) *keySet {
	t.Helper()
	ks := &keySet{dir: t.TempDir(), tags: map[string]uint16{}}
	ks.add(t, "ksk", true)
	ks.add(t, "zsk", false)
	out := run(t, "dnssec-dsfromkey", "-2", filepath.Join(ks.dir, "ksk.key"))
	ks.ds = strings.TrimSpace(out)
	return ks
}

// add makes one more key named name (a KSK when ksk) in the set.
func (ks *keySet) add(t *testing.T, name string, ksk bool) {
	t.Helper()
	gen := t.TempDir()
	args := []string{"-q", "-K", gen, "-a", "ECDSAP256SHA256"}
	if ksk {
		args = append(args, "-f", "KSK")
	}
	base := strings.TrimSpace(run(t, "dnssec-keygen", append(args, strings.TrimSuffix(zone, "."))...))
	for _, ext := range []string{".key", ".private"} {
		b, err := os.ReadFile(filepath.Join(gen, base+ext))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ks.dir, name+ext), b, 0o440); err != nil {
			t.Fatal(err)
		}
	}
	rr, err := dns.NewRR(keyLine(t, filepath.Join(ks.dir, name+".key")))
	if err != nil {
		t.Fatal(err)
	}
	ks.tags[name] = rr.(*dns.DNSKEY).KeyTag()
}

// keyLine is the DNSKEY record of a .key file (its comments left out).
func keyLine(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" && !strings.HasPrefix(l, ";") {
			return l
		}
	}
	t.Fatalf("%s: no DNSKEY record", path)
	return ""
}

func run(t *testing.T, tool string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := harness.Run(ctx, harness.LookPath(t, tool), args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", tool, strings.Join(args, " "), err, out)
	}
	return out
}

// signedCorefile is the GSLB Corefile that deploy/gslb's dnssec component ships.
func signedCorefile(t *testing.T) string {
	t.Helper()
	return harness.ShippedCorefile(t, "deploy/gslb/dnssec/configmap.yaml", "fleetdns-gslb")
}

// cluster is one GSLB cluster: a coredns process running a shipped
// Corefile, reading its own namespace of the test's API server.
type cluster struct {
	tag, ip, ns, metrics string
	*harness.CoreDNS
}

// localize makes a shipped GSLB Corefile run here, each substitution
// required to apply: bound to ip, its HTTP endpoints on loopback ports,
// k8scrd reading namespace ns of the test's API server (one namespace a
// cluster, where a real cluster has its own API server), the Secrets'
// files (which the kubelet would mount) from the test's directories, and
// the parent's loopback glue allowed.
func localize(t *testing.T, corefile, ip, ns, kubeconfig string, keys string, ready string) (string, string) {
	t.Helper()
	metrics := harness.HostPort(t, ip)
	subs := []harness.Substitution{
		{Old: "gslb.example.com:53 {\n", New: "gslb.example.com:53 {\n    bind " + ip + "\n", Why: "the load balancer's address: a loopback address stands in"},
		{Old: "prometheus :9153", New: "prometheus " + metrics, Why: "fixed ports would collide with other tests"},
		{Old: "    health {", New: "    health " + harness.HostPort(t, ip) + " {", Why: "fixed ports would collide with other tests"},
		{Old: "    ready\n", New: "    ready " + ready + "\n", Why: "fixed ports would collide with other tests"},
		{Old: "k8scrd gslb.example.com {\n", New: "k8scrd gslb.example.com {\n       kubeconfig " + kubeconfig + "\n", Why: "the API server is the test's"},
		{Old: "namespaces fleetdns", New: "namespaces " + ns, Why: "one API server stands in for each cluster's own"},
		{Old: "tenant fleetdns gslb.example.com", New: "tenant " + ns + " gslb.example.com", Why: "one API server stands in for each cluster's own"},
		{Old: "key /etc/fleetdns/fleet/fleet.key", New: "key " + harness.FleetKeyFile(t), Why: "Secret fleetdns-fleet-key, mounted by the kubelet"},
		{Old: "peers_from_ns {$FLEETDNS_PARENT_NS} {", New: "peers_from_ns {$FLEETDNS_PARENT_NS} {\n              allow 127.0.0.0/8", Why: "the parent's glue is loopback here"},
	}
	if keys != "" { // a signed Corefile
		subs = append(subs, harness.Substitution{Old: "/etc/fleetdns/dnssec/", New: keys + "/", Why: "Secret fleetdns-dnssec-keys, mounted by the kubelet"})
	}
	corefile = harness.Substitute(t, corefile, subs...)
	return corefile, "http://" + metrics + "/metrics"
}

// startCluster runs corefile (a shipped signed Corefile) as cluster tag on
// ip, with key set directory keys, and waits until it is ready.
func startCluster(t *testing.T, k *harness.Kube, corefile, tag, ip, ns, parent, keys string) *cluster {
	t.Helper()
	ready := harness.HostPort(t, ip)
	cf, metrics := localize(t, corefile, ip, ns, k.Kubeconfig, keys, ready)
	c := harness.StartCoreDNS(t, cf, harness.WithReadyURL("http://"+ready+"/ready"), harness.WithStartTimeout(60*time.Second),
		harness.WithEnv("FLEETDNS_GEOTAG="+tag, "FLEETDNS_PARENT_NS="+parent))
	return &cluster{tag: tag, ip: ip, ns: ns, metrics: metrics, CoreDNS: c}
}

// startParent serves example.com (unsigned: the validators' anchor is the
// zone's own DS) with the delegation of gslb.example.com to each
// cluster's name server, gslb-ns-<tag>, and its glue.
func startParent(t *testing.T, clusters map[string]string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("$TTL 60\nexample.com. IN SOA ns.example.com. hostmaster.example.com. 1 60 60 600 60\nexample.com. IN NS ns.example.com.\nns.example.com. IN A 127.0.0.1\n")
	for tag, ip := range clusters {
		fmt.Fprintf(&b, "gslb.example.com. IN NS gslb-ns-%s.gslb.example.com.\ngslb-ns-%s.gslb.example.com. IN A %s\n", tag, tag, ip)
	}
	return harness.StartKnot(t, map[string]string{"example.com.": b.String()}).Addr
}

// unbound is a validating resolver whose trust anchor is the zone's DS
// and whose only way into the zone is a stub to one cluster.
type unbound struct {
	addr string
	*harness.Process
}

// startUnbound starts Unbound on a fresh address, validating with anchor
// (a DS record of the zone), asking the servers of stub for the zone and
// of stubs (zone -> address) for other zones. maxTTL caps its cache (0:
// Unbound's default), extra is more server: lines.
func startUnbound(t *testing.T, anchor string, stub []string, stubs map[string]string, maxTTL int, extra ...string) *unbound {
	t.Helper()
	ip := harness.NewIP(t)
	dir := t.TempDir()
	anchorFile := filepath.Join(dir, "anchor")
	if err := os.WriteFile(anchorFile, []byte(anchor+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `server:
  interface: %s
  port: 53
  do-not-query-localhost: no
  username: ""
  chroot: ""
  directory: %q
  pidfile: ""
  use-syslog: no
  logfile: ""
  verbosity: 1
  val-log-level: 2
  num-threads: 1
  module-config: "validator iterator"
  trust-anchor-file: %q
  access-control: 127.0.0.0/8 allow
  qname-minimisation: yes
`, ip, dir, anchorFile)
	if maxTTL > 0 {
		fmt.Fprintf(&b, "  cache-max-ttl: %d\n  cache-max-negative-ttl: %d\n  key-cache-size: 1m\n", maxTTL, maxTTL)
	}
	for _, e := range extra {
		fmt.Fprintf(&b, "  %s\n", e)
	}
	fmt.Fprintf(&b, "stub-zone:\n  name: %q\n", zone)
	for _, s := range stub {
		fmt.Fprintf(&b, "  stub-addr: %s\n", strings.Replace(s, ":", "@", 1))
	}
	for z, a := range stubs {
		fmt.Fprintf(&b, "stub-zone:\n  name: %q\n  stub-addr: %s\n", z, strings.Replace(a, ":", "@", 1))
	}
	conf := filepath.Join(dir, "unbound.conf")
	if err := os.WriteFile(conf, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	p := harness.StartProcess(t, "unbound", harness.LookPathOwn(t, "unbound"), []string{"-d", "-c", conf}, dir)
	u := &unbound{addr: ip + ":53", Process: p}
	testkit.Eventually(t, 10*time.Second, "unbound answers", func() (bool, string) {
		_, err := harness.Ask(u.addr, "localhost.", dns.TypeA, harness.Timeout(500*time.Millisecond))
		return err == nil, fmt.Sprint(err)
	})
	return u
}

// validated asks u for name/qtype with DO and requires what a validated
// answer is: rcode want, AD set (insecure: AD clear, as for a name below
// an insecure delegation), never SERVFAIL.
func validated(t *testing.T, u *unbound, what, name string, qtype uint16, want int, secure bool) *dns.Msg {
	t.Helper()
	m, err := harness.Ask(u.addr, name, qtype, harness.DO, harness.Timeout(5*time.Second), harness.Attempts(2))
	if err != nil {
		t.Errorf("%s: %s %s through Unbound (running: %v): %v\n%s", what, name, dns.TypeToString[qtype], u.Running(), err, harness.TailLines(u.Log(), 5))
		return nil
	}
	if m.Rcode != want || m.AuthenticatedData != secure {
		t.Errorf("%s: %s %s through Unbound: rcode %s AD=%v, want %s AD=%v\n%v\n--- unbound ---\n%s", what, name, dns.TypeToString[qtype],
			dns.RcodeToString[m.Rcode], m.AuthenticatedData, dns.RcodeToString[want], secure, m, harness.TailLines(u.Log(), 15))
	}
	return m
}

// delv asks server (a cluster, authoritative) with delv, validating from
// the anchor, and returns delv's verdict line ("; fully validated",
// "; unsigned answer", "; negative response, fully validated", or the
// failure) and its output.
func delv(t *testing.T, anchor, server, name, qtype string) (string, string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "anchors")
	fields := strings.Fields(anchor) // owner IN DS tag alg digesttype digest
	if len(fields) < 7 {
		t.Fatalf("DS %q", anchor)
	}
	conf := fmt.Sprintf("trust-anchors {\n  %q static-ds %s %s %s %q;\n};\n", fields[0], fields[3], fields[4], fields[5], strings.Join(fields[6:], ""))
	if err := os.WriteFile(f, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	host, _, _ := strings.Cut(server, ":")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, _ := harness.Run(ctx, harness.LookPath(t, "delv"), "@"+host, "-a", f, "+root="+strings.TrimSuffix(zone, "."), "+nomtrace", name, qtype)
	// delv says ";; resolution failed: ncache nxrrset" before a validated
	// negative answer: the verdict is the line after it when there is one.
	verdict := ""
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, "; fully validated"), strings.HasPrefix(l, "; negative response"), strings.HasPrefix(l, "; unsigned answer"):
			return strings.TrimSpace(l), out
		case verdict == "" && strings.HasPrefix(l, ";; "):
			verdict = strings.TrimSpace(l)
		}
	}
	return verdict, out
}
