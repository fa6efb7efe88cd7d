package delegation

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

const (
	zone   = "gslb.example.com."
	parent = "example.com."
	host   = "app.gslb.example.com."
	// interval is publish_delegation's and peers_from_ns's: the tests'
	// 1s stands in for the shipped 5m.
	interval = time.Second
	settle   = 15 * interval
)

// nsName is a cluster's name server by the default pattern.
func nsName(tag string) string { return "gslb-ns-" + tag + "." + zone }

// keyOf makes a cluster's TSIG key with BIND's tsig-keygen, as the guide
// tells: the key file and its secret (for Knot's configuration).
func keyOf(t *testing.T, name string) (file, secret string) {
	t.Helper()
	out, err := harness.Run(harness.Context(t), harness.LookPath(t, "tsig-keygen"), "-a", "hmac-sha256", name)
	if err != nil {
		t.Fatalf("tsig-keygen %s: %v\n%s", name, err, out)
	}
	m := regexp.MustCompile(`secret "([^"]+)"`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("tsig-keygen %s wrote no secret:\n%s", name, out)
	}
	file = filepath.Join(t.TempDir(), name+".key")
	if err := os.WriteFile(file, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	return file, m[1]
}

// parentZoneText is example.com before any cluster published itself: no
// delegation of the GSLB zone.
func parentZoneText(ip string) string {
	return fmt.Sprintf(`$ORIGIN example.com.
$TTL 300
@	SOA	ns.example.com. hostmaster.example.com. 1 3600 600 86400 60
@	NS	ns.example.com.
ns	A	%s
www	A	192.0.2.1
`, ip)
}

// cluster is one GSLB cluster: a coredns process on its own loopback
// address that declares host with target (its load balancer, data only).
type cluster struct {
	tag, ip, key, target string
	dir                  string
	metrics              string
	srv                  *harness.CoreDNS
}

func newCluster(t *testing.T, tag, key string, n int) *cluster {
	c := &cluster{tag: tag, ip: harness.NewIP(t), key: key, target: fmt.Sprintf("192.0.2.%d", 100+n), dir: t.TempDir()}
	c.metrics = harness.HostPort(t, c.ip)
	testkit.WriteFile(t, c.dir, "hosts.yaml", testkit.DNSEndpoint("apps", "app", nil,
		testkit.Endpoint{DNSName: host, RecordType: "A", TTL: 5, Targets: []string{c.target},
			ProviderSpecific: [][2]string{{"gslb/strategy", "roundRobin"}}}))
	return c
}

// publishStanza is the publish_delegation stanza the clusters run (the
// guide's, with the tests' parent, key and address and a 1s interval).
func publishStanza(parentAddr, key, address, extra string) string {
	return fmt.Sprintf(`        publish_delegation %s {
            key %s
            address %s
            ttl 300
            interval 1s
%s        }
`, parentAddr, key, address, extra)
}

// corefile is a cluster's Corefile: gslb publishing its delegation and
// discovering its peers from the same parent.
func (c *cluster) corefile(parentAddr, publish string) string {
	return fmt.Sprintf(`gslb.example.com:53 {
    bind %s
    prometheus %s
    localtargets gslb.example.com
    gslb gslb.example.com {
        geotag %s
%s        peers_from_ns %s {
            refresh 1s
            allow 127.0.0.0/8
        }
        timeout 300ms
        refresh 1s
    }
    k8scrd gslb.example.com {
        directory %s
    }
}
`, c.ip, c.metrics, c.tag, publish, parentAddr, c.dir)
}

// start runs the cluster with publish (a publish_delegation stanza).
func (c *cluster) start(t *testing.T, parentAddr, publish string) {
	t.Helper()
	if c.srv != nil {
		c.srv.Stop()
	}
	c.srv = harness.StartCoreDNS(t, c.corefile(parentAddr, publish), harness.WithProbe(host, dns.TypeA))
}

// delegationAt is the parent's delegation of the GSLB zone as a resolver
// meets it: the NS names (sorted) and the glue of each.
func delegationAt(parentAddr string) (ns []string, glue map[string][]string, err error) {
	r, err := harness.Ask(parentAddr, zone, dns.TypeNS, harness.NoRD, harness.Timeout(time.Second))
	if err != nil {
		return nil, nil, err
	}
	glue = map[string][]string{}
	for _, rr := range append(r.Answer, r.Ns...) {
		if n, ok := rr.(*dns.NS); ok && strings.EqualFold(n.Hdr.Name, zone) {
			ns = append(ns, strings.ToLower(n.Ns))
		}
	}
	for _, rr := range r.Extra {
		if a, ok := rr.(*dns.A); ok {
			n := strings.ToLower(a.Hdr.Name)
			glue[n] = append(glue[n], a.A.String())
		}
	}
	slices.Sort(ns)
	return ns, glue, nil
}

// describe is a delegation as one comparable line: "ns=ip ns=ip".
func describe(ns []string, glue map[string][]string) string {
	var parts []string
	for _, n := range ns {
		parts = append(parts, n+"="+strings.Join(glue[n], ","))
	}
	return strings.Join(parts, " ")
}

func want(cs ...*cluster) string {
	slices.SortFunc(cs, func(a, b *cluster) int { return strings.Compare(nsName(a.tag), nsName(b.tag)) })
	var parts []string
	for _, c := range cs {
		parts = append(parts, nsName(c.tag)+"="+c.ip)
	}
	return strings.Join(parts, " ")
}

// waitDelegation waits until the parent delegates to exactly cs, each with
// its own glue, and the glue of gone (decommissioned) clusters is absent.
func waitDelegation(t *testing.T, parentAddr, what string, cs ...*cluster) {
	t.Helper()
	w := want(cs...)
	testkit.Eventually(t, settle, what, func() (bool, string) {
		ns, glue, err := delegationAt(parentAddr)
		got := describe(ns, glue)
		return err == nil && got == w, fmt.Sprintf("%s: the parent delegates %q (%v), want %q", what, got, err, w)
	})
}

// waitPeers waits until every cluster in cs answers host with the targets of
// exactly cs (roundRobin: its own and every peer's it discovered), and its
// peers are the others.
func waitPeers(t *testing.T, what string, cs ...*cluster) {
	t.Helper()
	var targets []string
	for _, c := range cs {
		targets = append(targets, c.target)
	}
	slices.Sort(targets)
	for _, c := range cs {
		testkit.Eventually(t, settle, what, func() (bool, string) {
			r, err := harness.Ask(c.ip+":53", host, dns.TypeA, harness.Timeout(time.Second))
			if err != nil {
				return false, err.Error()
			}
			got := harness.Targets(r, dns.TypeA)
			slices.Sort(got)
			return slices.Equal(got, targets), fmt.Sprintf("%s: %s at %s = %v, want %v; explain:\n%s", what, host, c.tag, got, targets, explain(c))
		})
		var peers []string
		for _, o := range cs {
			if o != c {
				peers = append(peers, o.tag)
			}
		}
		slices.Sort(peers)
		testkit.Eventually(t, settle, what, func() (bool, string) {
			m := harness.Scrape(t, "http://"+c.metrics+"/metrics")
			got := peersOf(m)
			return slices.Equal(got, peers), fmt.Sprintf("%s: %s's peers %v, want %v", what, c.tag, got, peers)
		})
	}
}

// peersOf lists the peers whose state a cluster reports, sorted.
func peersOf(m harness.Metrics) []string {
	var peers []string
	for _, l := range rePeerState.FindAllStringSubmatch(m.Text, -1) {
		if !slices.Contains(peers, l[1]) {
			peers = append(peers, l[1])
		}
	}
	slices.Sort(peers)
	return peers
}

var rePeerState = regexp.MustCompile(`(?m)^coredns_gslb_peer_state\{[^}]*peer="([^"]+)"[^}]*\} 1$`)

// explain is a cluster's explain record of host: which peers it asked.
func explain(c *cluster) string {
	r, err := harness.Ask(c.ip+":53", "_gslb-explain."+host, dns.TypeTXT, harness.TCP, harness.Timeout(time.Second))
	if err != nil {
		return err.Error()
	}
	var lines []string
	for _, rr := range r.Answer {
		if txt, ok := rr.(*dns.TXT); ok {
			lines = append(lines, strings.Join(txt.Txt, ""))
		}
	}
	return strings.Join(lines, "\n")
}

// updates is a cluster's coredns_gslb_delegation_updates_total{result}.
func updates(t *testing.T, c *cluster, result string) float64 {
	return harness.Scrape(t, "http://"+c.metrics+"/metrics").Sum("coredns_gslb_delegation_updates_total", "result", result)
}

func parentLink(t *testing.T, c *cluster) (float64, bool) {
	return harness.Scrape(t, "http://"+c.metrics+"/metrics").Value("coredns_gslb_parent_link", "geotag", c.tag)
}

// fleet is the clusters of one parent test.
type fleet struct {
	parentAddr string
	keys       map[string]string // tag -> key file
	secrets    map[string]string // tag -> secret
	clusters   map[string]*cluster
}

func newFleet(t *testing.T, tags ...string) *fleet {
	harness.RequirePlugins(t, "k8scrd", "localtargets", "gslb")
	f := &fleet{keys: map[string]string{}, secrets: map[string]string{}, clusters: map[string]*cluster{}}
	for i, tag := range tags {
		f.keys[tag], f.secrets[tag] = keyOf(t, tag+"."+zone)
		f.clusters[tag] = newCluster(t, tag, f.keys[tag], i)
	}
	return f
}

func (f *fleet) publish(t *testing.T, tag, extra string) {
	t.Helper()
	c := f.clusters[tag]
	c.start(t, f.parentAddr, publishStanza(f.parentAddr, c.key, c.ip, extra))
}

// run is the story both parents must tell: publishing, a new cluster,
// a decommissioned one, a key that may not touch another's glue, wrong keys.
func (f *fleet) run(t *testing.T) {
	eu, us, ap := f.clusters["eu"], f.clusters["us"], f.clusters["ap"]

	// Two clusters publish themselves; the parent then delegates to both,
	// and each finds the other there.
	if ns, _, err := delegationAt(f.parentAddr); err != nil || len(ns) != 0 {
		t.Fatalf("before any cluster: the parent delegates %v (%v), want nothing", ns, err)
	}
	f.publish(t, "eu", "")
	f.publish(t, "us", "")
	waitDelegation(t, f.parentAddr, "eu and us published", eu, us)
	waitPeers(t, "eu and us find each other", eu, us)
	for _, c := range []*cluster{eu, us} {
		testkit.Eventually(t, settle, "parent link", func() (bool, string) {
			v, ok := parentLink(t, c)
			return ok && v == 1, fmt.Sprintf("%s: coredns_gslb_parent_link = %v (present %v), want 1", c.tag, v, ok)
		})
	}
	// Steady state: checks, and no more UPDATEs.
	sent := updates(t, eu, "ok")
	time.Sleep(3 * interval)
	if now := updates(t, eu, "ok"); now != sent || sent != 1 {
		t.Errorf("eu sent %v successful UPDATEs, then %v after 3 more checks; want 1 and no more", sent, now)
	}
	if n := harness.Scrape(t, "http://"+eu.metrics+"/metrics").Sum("coredns_gslb_delegation_checks_total", "result", "in_place"); n < 2 {
		t.Errorf("eu's in_place checks = %v, want the steady state checked", n)
	}

	// A new cluster appears without touching the others.
	euPid, usPid := eu.srv.Pid(), us.srv.Pid()
	start := time.Now()
	f.publish(t, "ap", "")
	ready := time.Now()
	waitDelegation(t, f.parentAddr, "ap published", eu, us, ap)
	published := time.Now()
	waitPeers(t, "ap joined", eu, us, ap)
	t.Logf("ap: ready %v after its start, delegated by the parent %v after ready, in every cluster's answers %v after that (peers_from_ns refresh 1s)",
		ready.Sub(start).Round(time.Millisecond), published.Sub(ready).Round(time.Millisecond), time.Since(published).Round(time.Millisecond))
	if eu.srv.Pid() != euPid || us.srv.Pid() != usPid {
		t.Errorf("eu or us was restarted for ap to join")
	}

	// A key the parent confines to eu's own glue name may not touch ap's
	// glue: an eu-keyed cluster claiming ap's name server is REFUSED and the
	// parent keeps ap's glue.
	rogue := newCluster(t, "ap", f.keys["eu"], 9)
	rogue.start(t, f.parentAddr, publishStanza(f.parentAddr, f.keys["eu"], rogue.ip, ""))
	testkit.Eventually(t, settle, "the rogue UPDATE refused", func() (bool, string) {
		// BIND answers REFUSED; Knot answers a key its acl does not allow
		// NOTAUTH with TSIG error BADKEY.
		n := updates(t, rogue, "refused") + updates(t, rogue, "notauth") + updates(t, rogue, "badkey")
		return n > 0, fmt.Sprintf("rogue's refused UPDATEs: %v; log:\n%s", n, rogue.srv.Log())
	})
	t.Logf("the UPDATE of ap's glue with eu's key: refused %v, notauth %v, badkey %v",
		updates(t, rogue, "refused"), updates(t, rogue, "notauth"), updates(t, rogue, "badkey"))
	if n := updates(t, rogue, "ok"); n != 0 {
		t.Errorf("the parent applied %v UPDATEs of ap's glue signed with eu's key", n)
	}
	rogue.srv.Stop()
	waitDelegation(t, f.parentAddr, "after the refused UPDATE", eu, us, ap)
	// The same with BIND's nsupdate and eu's key file.
	out, err := nsupdate(t, f.keys["eu"], fmt.Sprintf("server %s %s\nzone %s\nupdate delete %s A\nupdate add %s 300 A 192.0.2.66\nsend\n",
		host0(f.parentAddr), port0(f.parentAddr), parent, nsName("us"), nsName("us")))
	if err == nil || !strings.Contains(out, "REFUSED") && !strings.Contains(out, "NOTAUTH") {
		t.Errorf("nsupdate of us's glue with eu's key: %v, want REFUSED:\n%s", err, out)
	}
	waitDelegation(t, f.parentAddr, "after nsupdate with eu's key", eu, us, ap)

	// Wrong keys change nothing: an unknown key name is BADKEY, ap's key
	// name with another secret BADSIG. Each claims ap's name server with
	// another address, which ap's real key could do.
	for _, c := range []struct{ name, keyName, result string }{
		{"unknown key", "nobody." + zone, "badkey"},
		{"wrong secret", "ap." + zone, "badsig"},
	} {
		file, _ := keyOf(t, c.keyName)
		w := newCluster(t, "ap", file, 10)
		w.start(t, f.parentAddr, publishStanza(f.parentAddr, file, w.ip, ""))
		testkit.Eventually(t, settle, c.name, func() (bool, string) {
			n := updates(t, w, c.result)
			return n > 0, fmt.Sprintf("%s: %s UPDATEs %v; log:\n%s", c.name, c.result, n, w.srv.Log())
		})
		if n := updates(t, w, "ok"); n != 0 {
			t.Errorf("%s: the parent applied %v UPDATEs", c.name, n)
		}
		if r, err := harness.Ask(w.ip+":53", host, dns.TypeA, harness.Timeout(time.Second)); err != nil || r.Rcode != dns.RcodeSuccess {
			t.Errorf("%s: the cluster stopped serving: %v %v", c.name, r, err)
		}
		if n := strings.Count(w.srv.Log(), "did not apply the UPDATE"); n != 1 {
			t.Errorf("%s: %d log lines for the refused UPDATEs, want one", c.name, n)
		}
		w.srv.Stop()
	}
	waitDelegation(t, f.parentAddr, "after the wrong keys", eu, us, ap)

	// us is decommissioned: only its own NS record and glue leave.
	f.publish(t, "us", "            decommission\n")
	waitDelegation(t, f.parentAddr, "us decommissioned", eu, ap)
	waitPeers(t, "us gone", eu, ap)
	testkit.Eventually(t, settle, "us's parent link", func() (bool, string) {
		v, ok := parentLink(t, us)
		return ok && v == 0, fmt.Sprintf("us: coredns_gslb_parent_link = %v (present %v), want 0", v, ok)
	})
	if r, err := harness.Ask(f.parentAddr, nsName("us"), dns.TypeA, harness.NoRD); err != nil || len(harness.Targets(r, dns.TypeA)) != 0 {
		t.Errorf("us's glue is still at the parent: %v %v", r, err)
	}
}

// nsupdate runs BIND's nsupdate with a key file and script.
func nsupdate(t *testing.T, key, script string) (string, error) {
	ctx, cancel := context.WithTimeout(harness.Context(t), 20*time.Second)
	defer cancel()
	return harness.RunStdin(ctx, script, harness.LookPath(t, "nsupdate"), "-k", key, "-t", "3")
}

func host0(hp string) string { h, _, _ := net.SplitHostPort(hp); return h }
func port0(hp string) string { _, p, _ := net.SplitHostPort(hp); return p }

// TestBINDParentTakesEachClustersOwnDelegation runs the story against BIND
// 9: update-policy grants each cluster's key the zone's NS RRset and its own
// glue name, nothing else.
func TestBINDParentTakesEachClustersOwnDelegation(t *testing.T) {
	f := newFleet(t, "eu", "us", "ap")
	b := f.startBIND(t)
	f.run(t)
	if t.Failed() {
		t.Logf("named's log:\n%s", b.Log())
	}
}

// bindGrants is a cluster's update-policy, as docs/multicluster-gslb.md
// shows it: its key may touch the zone's NS RRset and its own glue name.
func bindGrants(tag string) string {
	return fmt.Sprintf("        grant %s name %s NS;\n        grant %s name %s A AAAA;\n", tag+"."+zone, zone, tag+"."+zone, nsName(tag))
}

// knotACL is a cluster's Knot acl, as docs/multicluster-gslb.md shows it.
func knotACL(tag string) string {
	return fmt.Sprintf(`  - id: %s
    key: %s
    action: update
    update-type: [NS, A, AAAA]
    update-owner: name
    update-owner-match: equal
    update-owner-name: [%s, %s]
`, tag, tag+"."+zone, zone, nsName(tag))
}

// TestGuideShowsTheTestedPolicies: the parent policies the guide tells
// users to write are the ones these tests run, and its stanza is the
// shipped component's.
func TestGuideShowsTheTestedPolicies(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(harness.ModuleRoot(t), "docs/multicluster-gslb.md"))
	if err != nil {
		t.Fatal(err)
	}
	st, _ := stanza(t, harness.ShippedCorefile(t, "deploy/multicluster/publish/corefile.yaml", "fleetdns-gslb"))
	if !strings.Contains(string(b), st) {
		t.Errorf("docs/multicluster-gslb.md does not quote deploy/multicluster/publish's stanza:\n%s", st)
	}
	if !strings.Contains(string(b), powerDNSPolicy) {
		t.Errorf("docs/multicluster-gslb.md lacks the tested PowerDNS policy:\n%s", powerDNSPolicy)
	}
	for _, tag := range []string{"eu", "us"} {
		for _, want := range []string{bindGrants(tag), knotACL(tag)} {
			if !strings.Contains(string(b), want) {
				t.Errorf("docs/multicluster-gslb.md lacks the tested policy:\n%s", want)
			}
		}
	}
}

// startBIND starts the parent zone on named with the fleet's keys and the
// guide's update-policy (docs/multicluster-gslb.md).
func (f *fleet) startBIND(t *testing.T) *harness.BIND {
	t.Helper()
	ip := harness.NewIP(t)
	var conf, grants strings.Builder
	for _, tag := range slices.Sorted(maps.Keys(f.keys)) {
		b, err := os.ReadFile(f.keys[tag])
		if err != nil {
			t.Fatal(err)
		}
		conf.Write(b)
		grants.WriteString(bindGrants(tag))
	}
	fmt.Fprintf(&conf, "zone \"example.com\" {\n\ttype primary;\n\tfile \"example.com.zone\";\n\tupdate-policy {\n%s\t};\n};\n", grants.String())
	b := harness.StartBIND(t, ip, conf.String(), map[string]string{"example.com.zone": parentZoneText(ip)}, parent)
	f.parentAddr = b.Addr
	return b
}

// TestKnotParentTakesEachClustersOwnDelegation runs the story against Knot
// DNS: an acl per cluster key with update-type NS, A, AAAA and update-owner
// names the zone and that cluster's glue name.
func TestKnotParentTakesEachClustersOwnDelegation(t *testing.T) {
	f := newFleet(t, "eu", "us", "ap")
	ip := harness.NewIP(t)
	var sections strings.Builder
	sections.WriteString("key:\n")
	for _, tag := range []string{"eu", "us", "ap"} {
		fmt.Fprintf(&sections, "  - id: %s\n    algorithm: hmac-sha256\n    secret: %s\n", tag+"."+zone, f.secrets[tag])
	}
	sections.WriteString("acl:\n")
	var ids []string
	for _, tag := range []string{"eu", "us", "ap"} {
		sections.WriteString(knotACL(tag))
		ids = append(ids, tag)
	}
	k := harness.StartKnotWith(t, ip, map[string]string{parent: parentZoneText(ip)}, harness.KnotConfig{
		Sections: sections.String(),
		Zone:     map[string]string{parent: "    acl: [" + strings.Join(ids, ", ") + "]\n    journal-content: changes"},
	})
	f.parentAddr = k.Addr
	f.run(t)
	if t.Failed() {
		t.Logf("knotd's log:\n%s", k.Log())
	}
}
