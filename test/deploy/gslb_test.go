package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
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

	// The three addresses of the example that cannot exist here (the parent's
	// server and the two clusters' load balancers) become loopback addresses.
	euIP, usIP := harness.NewIP(t), harness.NewIP(t)
	parentIP := startParent(t, root, euIP, usIP)

	// Cluster us: answers localtargets-<host> with its targets, as any
	// fleetdns or k8gb cluster does.
	startUpstreams(t, &upstream{zone: "gslb.example.com", answer: "198.51.100.80", ips: []string{usIP}})

	// eu's controllers have written the app's load-balancer address and its
	// two Ready pods (runApp).
	eu := startGSLBCluster(t, k, root, "eu", euIP, parentIP, newPodNet(t), euLB)
	addr, p, app := eu.addr, eu.p, eu.app
	ask := func(name string, qtype uint16) *dns.Msg {
		return harness.Exchange(t, addr, name, qtype, harness.NoRD, harness.Timeout(5*time.Second))
	}
	// failover, primary eu (deploy/multicluster/app/app.yaml): eu has a
	// ready pod, so its load balancer.
	if got := eventuallyA(t, addr, "app.gslb.example.com.", euLB); got != euLB {
		t.Errorf("app.gslb.example.com A = %v, want eu's load balancer %s (failover, eu first)\n%s", got, euLB, p.Log())
	}
	if got := harness.Targets(ask("localtargets-app.gslb.example.com.", dns.TypeA), dns.TypeA); strings.Join(got, " ") != euLB {
		t.Errorf("localtargets-app.gslb.example.com A = %v, want eu's own load balancer", got)
	}

	// Another namespace of the cluster publishes the same host, a literal
	// localtargets- answer and the zone's apex NS: the shipped Corefile
	// reads only namespace fleetdns and grants it the zone, so none of it
	// is served, to clients or to peers.
	intruder := k.NewNamespace(t, "intruder")
	k.CreateDNSEndpoint(t, intruder, "takeover", map[string]string{"k8gb.io/dnstype": "local"},
		testkit.EP("app.gslb.example.com", "A", 0, "198.51.100.66"),
		testkit.EP("localtargets-app.gslb.example.com", "A", 0, "198.51.100.66"),
		testkit.EP("gslb.example.com", "NS", 0, "ns.attacker.example.net"))
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if got := harness.Targets(ask("localtargets-app.gslb.example.com.", dns.TypeA), dns.TypeA); strings.Join(got, " ") != euLB {
			t.Fatalf("localtargets-app.gslb.example.com A = %v after another namespace published it; want eu's own load balancer", got)
		}
		if got := harness.Targets(ask("gslb.example.com.", dns.TypeNS), dns.TypeNS); strings.Join(got, " ") != "gslb-ns-eu.gslb.example.com. gslb-ns-us.gslb.example.com." {
			t.Fatalf("gslb.example.com NS = %v after another namespace published one; want the zone's own", got)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// eu's app scaled to zero: the Ingress still declares the host, but no
	// pod behind it is ready; the answer comes from us, the peer found
	// through the parent's delegation.
	app.scaleToZero(t)
	if got := eventuallyA(t, addr, "app.gslb.example.com.", "198.51.100.80"); got != "198.51.100.80" {
		t.Errorf("app.gslb.example.com A with eu scaled to zero = %v, want us's 198.51.100.80 (peer from the delegation)\n%s", got, p.Log())
	}
	if r := ask("localtargets-app.gslb.example.com.", dns.TypeA); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 0 {
		t.Errorf("localtargets-app.gslb.example.com A with eu scaled to zero: %s %v, want NODATA", dns.RcodeToString[r.Rcode], r.Answer)
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

	metrics := harness.HTTPBody(t, eu.metricsURL)
	for _, m := range []string{`coredns_gslb_parent_link{geotag="eu",zone="gslb.example.com."} 1`, `coredns_gslb_discovered_peers{zone="gslb.example.com."} 1`} {
		if !strings.Contains(metrics, m) {
			t.Errorf("metrics lack %s", m)
		}
	}
	if strings.Contains(p.Log(), "orbidden") {
		t.Errorf("permission errors with the shipped fleetdns:gslb Role:\n%s", p.Log())
	}
}

// TestGSLBTwoClustersFromTheOverlays runs both clusters of the example, each
// with its own API server holding its own overlay's objects, its own
// ServiceAccount token and its own environment, under one parent: both find
// each other through the delegation and give every client the same answer.
// The app is the overlays' Ingress; what its controllers would write (the
// Ingress status, the EndpointSlices of Service app) the test writes. eu's
// app is scaled to zero and back: both clusters follow.
func TestGSLBTwoClustersFromTheOverlays(t *testing.T) {
	root := harness.ModuleRoot(t)
	kEU := harness.SharedKube(t)
	kUS := harness.StartKube(t) // cluster us has an API server of its own
	euIP, usIP := harness.NewIP(t), harness.NewIP(t)
	parentIP := startParent(t, root, euIP, usIP)
	// Each app runs before its cluster's name servers start, as in a fleet
	// that has been up for a while: their first exchange is the steady state.
	pods := newPodNet(t)
	eu := startGSLBCluster(t, kEU, root, "eu", euIP, parentIP, pods, euLB)
	us := startGSLBCluster(t, kUS, root, "us", usIP, parentIP, pods, usLB)
	euApp := eu.app

	// failover, primary eu: both clusters answer eu's load balancer.
	for _, c := range []*gslbCluster{eu, us} {
		if got := eventuallyA(t, c.addr, "app.gslb.example.com.", euLB); got != euLB {
			t.Errorf("cluster %s: app.gslb.example.com A = %q, want eu's load balancer %s\n%s", c.tag, got, euLB, c.p.Log())
		}
	}
	if got := eventuallyA(t, us.addr, "localtargets-app.gslb.example.com.", usLB); got != usLB {
		t.Errorf("cluster us: localtargets-app = %q, want its own load balancer %s", got, usLB)
	}

	// Both clusters follow eu's app: eu within a second (its EndpointSlice
	// watch), us within one gslb refresh more (it re-asks eu's
	// localtargets- answer at min(TTL, refresh): the shipped Corefile keeps
	// gslb's default refresh of 30 s, and eu's answers have TTL 30). The
	// margins are for a loaded two-core machine.
	const refresh = 30 * time.Second
	follow := func(what, want string, changed time.Time) {
		t.Helper()
		for _, c := range []*gslbCluster{eu, us} {
			bound := time.Second + time.Second
			if c == us {
				bound = time.Second + refresh + 3*time.Second
			}
			// The answers on the way, with when each was first seen.
			var seen []string
			last := "-"
			testkit.Within(bound-time.Since(changed), func() bool {
				r := harness.Exchange(t, c.addr, "app.gslb.example.com.", dns.TypeA, harness.NoRD, harness.Timeout(5*time.Second))
				got := dns.RcodeToString[r.Rcode] + " " + strings.Join(harness.Targets(r, dns.TypeA), " ")
				if got != last {
					seen = append(seen, fmt.Sprintf("%v: %s", time.Since(changed).Round(10*time.Millisecond), got))
					last = got
				}
				return got == "NOERROR "+want
			})
			// Never an empty answer on the way: resolvers cache a NODATA
			// for the SOA's negative TTL, an outage well past the failover.
			for _, a := range seen {
				if strings.HasSuffix(a, ": NOERROR ") {
					t.Errorf("cluster %s answered NODATA on the way after %s (answers seen: %v): another cluster had targets throughout", c.tag, what, seen)
					break
				}
			}
			took := time.Since(changed)
			if last != "NOERROR "+want {
				t.Errorf("cluster %s %v after %s: app.gslb.example.com A answers %v, want %s\n%s", c.tag, took.Round(10*time.Millisecond), what, seen, want, c.p.Log())
				continue
			}
			t.Logf("cluster %s answers %s %v after %s (answers seen: %v)", c.tag, want, took.Round(10*time.Millisecond), what, seen)
		}
	}

	// Each cluster has heard the other's targets (its explain record, asked
	// from loopback, lists every peer's answer): a cluster whose first try of
	// a peer failed, because that peer was still starting, waits for its
	// retry, and failover is measured from the steady state.
	for _, c := range []struct {
		*gslbCluster
		peerLB string
	}{{eu, usLB}, {us, euLB}} {
		var txt string
		start := time.Now()
		testkit.Within(time.Second+refresh+3*time.Second, func() bool {
			r := harness.Exchange(t, c.addr, "_gslb-explain.app.gslb.example.com.", dns.TypeTXT, harness.NoRD, harness.Timeout(5*time.Second))
			txt = strings.Join(harness.RRStrings(r.Answer), " ")
			return strings.Contains(txt, c.peerLB)
		})
		if !strings.Contains(txt, c.peerLB) {
			t.Fatalf("cluster %s never heard its peer's target %s: explain %s", c.tag, c.peerLB, txt)
		}
		t.Logf("cluster %s has its peer's targets (%v)", c.tag, time.Since(start).Round(10*time.Millisecond))
	}

	// kubectl scale deployment app --replicas=0, in eu only.
	euApp.scaleToZero(t)
	scaled := time.Now()
	var r *dns.Msg
	testkit.Within(2*time.Second, func() bool {
		r = harness.Exchange(t, eu.addr, "localtargets-app.gslb.example.com.", dns.TypeA, harness.NoRD, harness.Timeout(5*time.Second))
		return r.Rcode == dns.RcodeSuccess && len(r.Answer) == 0
	})
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 0 {
		t.Errorf("cluster eu scaled to zero: localtargets-app.gslb.example.com A %s %v, want NODATA", dns.RcodeToString[r.Rcode], r.Answer)
	} else {
		t.Logf("cluster eu: localtargets-app NODATA %v after the scale to zero", time.Since(scaled).Round(10*time.Millisecond))
	}
	euApp.podsGone(t)
	follow("eu's app was scaled to zero", usLB, scaled)

	// kubectl scale deployment app --replicas=2: new pods, Ready.
	euApp.scaleUp(t, 2)
	follow("eu's app was scaled up again", euLB, time.Now())

	for _, c := range []*gslbCluster{eu, us} {
		m := harness.HTTPBody(t, c.metricsURL)
		if want := `coredns_gslb_parent_link{geotag="` + c.tag + `",zone="gslb.example.com."} 1`; !strings.Contains(m, want) {
			t.Errorf("cluster %s: metrics lack %s", c.tag, want)
		}
		if strings.Contains(c.p.Log(), "orbidden") {
			t.Errorf("cluster %s: permission errors with the shipped RBAC:\n%s", c.tag, c.p.Log())
		}
	}
}

// startParent serves the parent zone example.com with the shipped delegation
// (deploy/multicluster/parent/delegation.yaml) from k8scrd, the glue
// pointing at the two clusters' loopback addresses, and returns its address.
func startParent(t *testing.T, root, euIP, usIP string) string {
	t.Helper()
	const noSuchAddr = "the example's public address cannot exist on the test machine: a loopback address stands in"
	delegation, err := os.ReadFile(filepath.Join(root, "deploy/multicluster/parent/delegation.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	data := harness.Substitute(t, string(delegation),
		harness.Substitution{Old: "203.0.113.10", New: euIP, Why: noSuchAddr},
		harness.Substitution{Old: "198.51.100.10", New: usIP, Why: noSuchAddr})
	if err := os.WriteFile(filepath.Join(dir, "delegation.yaml"), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	ip := harness.NewIP(t)
	harness.StartCoreDNS(t, fmt.Sprintf("example.com:53 {\n    bind %s\n    k8scrd {\n        directory %s\n    }\n}\n", ip, dir),
		harness.WithProbe("gslb.example.com.", dns.TypeNS))
	return ip
}

type gslbCluster struct {
	tag, addr, metricsURL string
	p                     *harness.Process
	app                   *appRun
}

// startGSLBCluster applies overlay tag to k, plays the app's controllers
// (runApp: load balancer lb, pods in pods), and runs its GSLB Corefile as
// the Deployment would: the overlay's generated environment, ServiceAccount
// fleetdns-gslb's credentials, listening on ip; the parent is parentIP.
func startGSLBCluster(t *testing.T, k *harness.Kube, root, tag, ip, parentIP string, pods *podNet, lb string) *gslbCluster {
	t.Helper()
	objs := k.Kustomize(t, "deploy/multicluster/overlays/"+tag)
	// --force-conflicts: an earlier test may have changed the app's
	// objects; the overlay is the truth again.
	applyAsUsers(t, k, objs, "--force-conflicts")
	app := runApp(t, k, pods, lb)
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
	if shipped == "" || env["FLEETDNS_GEOTAG"] != tag {
		t.Fatalf("overlay %s rendered no Corefile or another geo tag: env %v", tag, env)
	}
	// Authoritative only, and no cache in front of geo answers.
	noDirective(t, shipped, "forward", "splitdns", "cache", "kubeconfig")
	mustLines(t, shipped, "any", "localtargets gslb.example.com", "gslb gslb.example.com {", "k8scrd gslb.example.com {",
		"resources DNSEndpoint Ingress Service HTTPRoute GRPCRoute TLSRoute")

	if env["FLEETDNS_PARENT_NS"] != "192.0.2.53" {
		t.Fatalf("overlay %s: FLEETDNS_PARENT_NS = %q; the substitution below expects 192.0.2.53", tag, env["FLEETDNS_PARENT_NS"])
	}
	env["FLEETDNS_PARENT_NS"] = parentIP
	t.Logf("cluster %s: substituted FLEETDNS_PARENT_NS 192.0.2.53 -> %s: the parent's server cannot exist on the test machine", tag, parentIP)

	hp, rp, mp := harness.FreePort(t, ip), harness.FreePort(t, ip), harness.FreePort(t, ip)
	const ports = "fixed ports on every interface would collide with the other tests on this machine"
	cf := harness.Substitute(t, shipped,
		harness.Substitution{Old: "gslb.example.com:53 {", New: "gslb.example.com:53 {\n    bind " + ip, Why: "the load balancer's public address cannot exist on the test machine: a loopback address stands in"},
		harness.Substitution{Old: "health {", New: "health " + fmtAddr(ip, hp) + " {", Why: ports},
		harness.Substitution{Old: "\n    ready\n", New: "\n    ready " + fmtAddr(ip, rp) + "\n", Why: ports},
		harness.Substitution{Old: "prometheus :9153", New: "prometheus " + fmtAddr(ip, mp), Why: ports},
		harness.Substitution{Old: "peers_from_ns {$FLEETDNS_PARENT_NS} {", New: "peers_from_ns {$FLEETDNS_PARENT_NS} {\n              allow 127.0.0.0/8", Why: "the parent stands in on loopback and so does its glue, which gslb refuses unless allowed"},
		harness.Substitution{Old: "key /etc/fleetdns/fleet/fleet.key", New: "key " + harness.FleetKeyFile(t), Why: "Secret fleetdns-fleet-key is mounted by the kubelet, which does not run here: the same key in a file stands in"},
	)
	var envList []string
	for key, v := range env {
		envList = append(envList, key+"="+v)
	}
	p := startInCluster(t, k, "fleetdns", "fleetdns-gslb", cf, envList...)
	if err := waitHTTP(p, "http://"+fmtAddr(ip, rp)+"/ready", 60*time.Second); err != nil {
		t.Fatalf("cluster %s never ready: %v\n%s", tag, err, p.Log())
	}
	return &gslbCluster{tag: tag, addr: ip + ":53", metricsURL: "http://" + fmtAddr(ip, mp) + "/metrics", p: p, app: app}
}

// eventuallyA asks name A until the sorted answer is want (within, 15 s by
// default) and returns the last answer, space-separated.
func eventuallyA(t *testing.T, addr, name, want string, within ...time.Duration) string {
	t.Helper()
	wait := 15 * time.Second
	if len(within) > 0 {
		wait = within[0]
	}
	var got string
	testkit.Within(wait, func() bool {
		r := harness.Exchange(t, addr, name, dns.TypeA, harness.NoRD, harness.Timeout(5*time.Second))
		got = strings.Join(harness.Targets(r, dns.TypeA), " ")
		return got == want
	})
	return got
}

func stringField(t *testing.T, o *unstructured.Unstructured, fields ...string) string {
	t.Helper()
	s, ok, err := unstructured.NestedString(o.Object, fields...)
	if err != nil || !ok {
		t.Fatalf("%s %s: no %v", o.GetKind(), o.GetName(), fields)
	}
	return s
}
