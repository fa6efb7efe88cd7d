package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/test/harness"
	"github.com/miekg/dns"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestGSLBOverlayServesTheZone runs cluster eu of the multi-cluster example
// as shipped: the objects of deploy/multicluster/overlays/eu in the API
// server, the Corefile of ConfigMap fleetdns-gslb with the values of the
// overlay's generated ConfigMap fleetdns-cluster as its environment, the
// credentials of ServiceAccount fleetdns-gslb. Its peers come from the
// parent's delegation (deploy/multicluster/parent/delegation.yaml, served by
// k8scrd); cluster us is a stand-in that answers localtargets- queries.
func TestGSLBOverlayServesTheZone(t *testing.T) {
	k := harness.SharedKube(t)
	root := harness.ModuleRoot(t)

	objs := kustomize(t, k, root, "deploy/multicluster/overlays/eu")
	applyAsUsers(t, k, objs)
	var shipped string
	env := map[string]string{}
	for _, o := range objs {
		switch {
		case o.GetKind() == "ConfigMap" && o.GetName() == "fleetdns-gslb":
			shipped = stringField(t, o, "data", "Corefile")
		case o.GetKind() == "ConfigMap" && strings.HasPrefix(o.GetName(), "fleetdns-cluster"):
			for key, v := range o.Object["data"].(map[string]any) {
				env[key] = v.(string)
			}
		}
	}
	if shipped == "" || env["FLEETDNS_GEOTAG"] != "eu" {
		t.Fatalf("overlay eu rendered no Corefile or no geo tag: env %v", env)
	}
	// Authoritative only, and no cache in front of geo answers.
	noDirective(t, shipped, "forward", "splitdns", "cache", "kubeconfig")
	mustLines(t, shipped, "any", "localtargets gslb.example.com", "gslb gslb.example.com {", "k8scrd gslb.example.com {")

	// The three addresses of the example that cannot exist here (the parent's
	// server and the two clusters' load balancers) become loopback addresses.
	euIP, usIP, parentIP := harness.NewIP(t), harness.NewIP(t), harness.NewIP(t)
	const noSuchAddr = "the example's public address cannot exist on the test machine: a loopback address stands in"

	// The parent zone example.com, with the shipped delegation.
	delegation, err := os.ReadFile(filepath.Join(root, "deploy/multicluster/parent/delegation.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	parentDir := t.TempDir()
	parentData := substitute(t, string(delegation),
		substitution{"203.0.113.10", euIP, noSuchAddr},
		substitution{"198.51.100.10", usIP, noSuchAddr})
	if err := os.WriteFile(filepath.Join(parentDir, "delegation.yaml"), []byte(parentData), 0o644); err != nil {
		t.Fatal(err)
	}
	harness.StartCoreDNS(t, fmt.Sprintf("example.com:53 {\n    bind %s\n    k8scrd {\n        directory %s\n    }\n}\n", parentIP, parentDir),
		harness.WithProbe("gslb.example.com.", dns.TypeNS))

	// Cluster us: answers localtargets-<host> with its targets, as any
	// fleetdns or k8gb cluster does.
	startUpstreams(t, &upstream{zone: "gslb.example.com", answer: "198.51.100.80", ips: []string{usIP}})

	if env["FLEETDNS_PARENT_NS"] != "192.0.2.53" {
		t.Fatalf("overlay eu: FLEETDNS_PARENT_NS = %q; the substitution below expects 192.0.2.53", env["FLEETDNS_PARENT_NS"])
	}
	env["FLEETDNS_PARENT_NS"] = parentIP
	t.Logf("substituted FLEETDNS_PARENT_NS 192.0.2.53 -> %s: %s", parentIP, noSuchAddr)

	hp, rp, mp := harness.FreePort(t, euIP), harness.FreePort(t, euIP), harness.FreePort(t, euIP)
	const ports = "fixed ports on every interface would collide with the other tests on this machine"
	cf := substitute(t, shipped,
		substitution{"gslb.example.com:53 {", "gslb.example.com:53 {\n    bind " + euIP, "the load balancer's address: " + noSuchAddr},
		substitution{"health {", "health " + fmtAddr(euIP, hp) + " {", ports},
		substitution{"\n    ready\n", "\n    ready " + fmtAddr(euIP, rp) + "\n", ports},
		substitution{"prometheus :9153", "prometheus " + fmtAddr(euIP, mp), ports},
	)
	var envList []string
	for key, v := range env {
		envList = append(envList, key+"="+v)
	}
	p := startInCluster(t, k, "fleetdns", "fleetdns-gslb", cf, envList...)
	readyURL := "http://" + fmtAddr(euIP, rp) + "/ready"
	if err := waitHTTP(p, readyURL, 60*time.Second); err != nil {
		t.Fatalf("never ready: %v\n%s", err, p.Log())
	}
	addr := euIP + ":53"

	ask := func(name string, qtype uint16) *dns.Msg {
		return harness.Exchange(t, addr, name, qtype, harness.NoRD, harness.Timeout(5*time.Second))
	}
	eventually := func(name string, want []string) []string {
		var got []string
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			got = harness.Targets(ask(name, dns.TypeA), dns.TypeA)
			if strings.Join(got, " ") == strings.Join(want, " ") {
				break
			}
		}
		return got
	}

	// failover, primary eu,us (overlays/eu/app.yaml): eu has targets.
	if got := eventually("app.gslb.example.com.", []string{"203.0.113.80", "203.0.113.81"}); strings.Join(got, " ") != "203.0.113.80 203.0.113.81" {
		t.Errorf("app.gslb.example.com A = %v, want eu's targets (failover, eu first)", got)
	}
	if got := harness.Targets(ask("localtargets-app.gslb.example.com.", dns.TypeA), dns.TypeA); strings.Join(got, " ") != "203.0.113.80 203.0.113.81" {
		t.Errorf("localtargets-app.gslb.example.com A = %v, want eu's own targets", got)
	}

	// eu keeps the declaration but loses its targets: the answer comes from
	// us, the peer found through the parent's delegation.
	k.Kubectl(t, "-n", "fleetdns", "patch", "dnsendpoint", "app", "--type=json",
		`-p=[{"op":"replace","path":"/spec/endpoints/0/targets","value":[]}]`)
	if got := eventually("app.gslb.example.com.", []string{"198.51.100.80"}); strings.Join(got, " ") != "198.51.100.80" {
		t.Errorf("app.gslb.example.com A with no eu targets = %v, want us's 198.51.100.80 (peer from the delegation)\n%s", got, p.Log())
	}

	// The zone itself is k8scrd's, authoritative.
	soa := ask("gslb.example.com.", dns.TypeSOA)
	if !soa.Authoritative || len(soa.Answer) != 1 || soa.Answer[0].(*dns.SOA).Ns != "gslb-ns-eu.gslb.example.com." {
		t.Errorf("gslb.example.com SOA: aa=%v %v; want aa and mname gslb-ns-eu.gslb.example.com.", soa.Authoritative, soa.Answer)
	}
	if got := harness.Targets(ask("gslb.example.com.", dns.TypeNS), dns.TypeNS); strings.Join(got, " ") != "gslb-ns-eu.gslb.example.com. gslb-ns-us.gslb.example.com." {
		t.Errorf("gslb.example.com NS = %v, want both clusters' name servers", got)
	}
	// any: ANY answered with one small HINFO (RFC 8482), not the zone.
	if r := ask("gslb.example.com.", dns.TypeANY); len(r.Answer) != 1 || r.Answer[0].Header().Rrtype != dns.TypeHINFO {
		t.Errorf("ANY gslb.example.com: %v, want one HINFO (the any plugin)", r.Answer)
	}
	// Never an open resolver: other names are refused, not resolved.
	if r := harness.Exchange(t, addr, "www.example.org.", dns.TypeA, harness.Timeout(5*time.Second)); r.Rcode != dns.RcodeRefused {
		t.Errorf("www.example.org A with RD: rcode %s, want REFUSED (authoritative only)", dns.RcodeToString[r.Rcode])
	}
	// explain: loopback is in the ACL.
	if r := ask("_gslb-explain.app.gslb.example.com.", dns.TypeTXT); len(r.Answer) == 0 || r.Answer[0].Header().Rrtype != dns.TypeTXT {
		t.Errorf("_gslb-explain.app.gslb.example.com TXT from loopback: %v, want an explain record", r.Answer)
	}

	metrics := httpGet(t, "http://"+fmtAddr(euIP, mp)+"/metrics")
	for _, m := range []string{`coredns_gslb_parent_link{geotag="eu",zone="gslb.example.com."} 1`, `coredns_gslb_discovered_peers{zone="gslb.example.com."} 1`} {
		if !strings.Contains(metrics, m) {
			t.Errorf("metrics lack %s", m)
		}
	}
	if strings.Contains(p.Log(), "orbidden") {
		t.Errorf("permission errors with the shipped fleetdns:gslb ClusterRole:\n%s", p.Log())
	}
}

func stringField(t *testing.T, o *unstructured.Unstructured, fields ...string) string {
	t.Helper()
	s, ok, err := unstructured.NestedString(o.Object, fields...)
	if err != nil || !ok {
		t.Fatalf("%s %s: no %v", o.GetKind(), o.GetName(), fields)
	}
	return s
}
