package gslb

import (
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

const (
	zone   = "gslb.example.com"
	parent = "example.com"

	// Timings of every cluster's gslb block: short, so that a test sees a
	// failover within seconds.
	peerTimeout = 500 * time.Millisecond
	peerRefresh = time.Second
	splitBrain  = 3 * time.Second
)

// tags are the three clusters, in failover order.
var tags = []string{"eu", "us", "ap"}

// targetsOf are each cluster's own targets for every host it declares.
var targetsOf = map[string][]string{
	"eu": {"10.10.0.1", "10.10.0.2"},
	"us": {"10.20.0.1"},
	"ap": {"10.30.0.1"},
}

// v6Of are the AAAA targets of the dual-stack host: eu and ap only.
var v6Of = map[string][]string{
	"eu": {"fd00:10::1"},
	"ap": {"fd00:30::1"},
}

// The client subnets that `geo cidr` maps to each cluster.
var subnetOf = map[string]string{"eu": "10.1.0.0/16", "us": "10.2.0.0/16", "ap": "10.3.0.0/16"}

// host names, one per strategy, declared alike in every cluster.
const (
	hostFailover = "failover." + zone
	hostRR       = "rr." + zone
	hostWeighted = "weighted." + zone
	hostGeo      = "geo." + zone
	hostDual     = "dual." + zone
	hostDualRR   = "dualrr." + zone
	hostDefault  = "default." + zone // no providerSpecific: the Corefile's strategy
)

// cluster is one coredns process: its geo tag, address and manifest folder.
type cluster struct {
	tag  string
	ip   string
	addr string // ip:53
	dir  string // k8scrd's directory
	srv  *harness.CoreDNS
}

// fleet is the parent zone instance and the clusters it delegates to.
type fleet struct {
	parentIP  string
	parent    *harness.CoreDNS
	parentDir string
	clusters  map[string]*cluster
	// targets are each cluster's own targets (targetsOf unless a test
	// changes them before start).
	targets map[string][]string
	// delegation holds the name servers the parent lists, tag -> address;
	// more can be added (a k8gb peer) before start or with setDelegation.
	delegation map[string]nsEntry
}

type nsEntry struct {
	name string // the name server's name
	ip   string
}

// fleetOptions change what the clusters run.
type fleetOptions struct {
	// extra lines inside each cluster's gslb block, by tag ("" for all).
	gslbExtra map[string]string
	// extra lines inside each cluster's server block, before localtargets.
	blockExtra map[string]string
	// localtargets replaces a cluster's `localtargets` line (e.g. with a
	// healthcheck block), by tag.
	localtargets map[string]string
	// files written beside each Corefile (e.g. the MaxMind DB).
	files map[string]string
	// plainZone, when set, is served by the same server block through
	// k8scrd alone (no gslb): the benchmark's baseline.
	plainZone string
	// noHosts starts the clusters with no host declared (a new GSLB zone):
	// start then waits only until each cluster serves.
	noHosts bool
}

// nsName is the default pattern gslb-ns-{geotag}.{zone}.
func nsName(tag string) string { return "gslb-ns-" + tag + "." + zone }

// k8gbNSName is k8gb's pattern: gslb-ns-<geotag>-<zone with dashes>.<parent>.
func k8gbNSName(tag string) string {
	return "gslb-ns-" + tag + "-" + strings.ReplaceAll(zone, ".", "-") + "." + parent
}

// newFleet reserves addresses and writes every cluster's data; start()
// runs the processes.
func newFleet(t *testing.T) *fleet {
	t.Helper()
	harness.RequirePlugins(t, "k8scrd", "localtargets", "gslb")
	f := &fleet{clusters: map[string]*cluster{}, delegation: map[string]nsEntry{}, targets: map[string][]string{}}
	f.parentIP = harness.NewIP(t)
	f.parentDir = t.TempDir()
	for _, tag := range tags {
		c := &cluster{tag: tag, ip: harness.NewIP(t), dir: t.TempDir()}
		c.addr = net.JoinHostPort(c.ip, "53")
		f.clusters[tag] = c
		f.delegation[tag] = nsEntry{name: nsName(tag), ip: c.ip}
		f.targets[tag] = targetsOf[tag]
	}
	return f
}

// clusterHosts is what one cluster's store declares: every host, with this
// cluster's targets and the per-host policy in providerSpecific. Answer
// TTLs: recordTTL 7, the weighted host's gslb/ttl 11, the default host's
// the Corefile's ttl 5.
func clusterHosts(tag string, own []string) string {
	return testkit.DNSEndpoint("apps", "gslb-hosts", nil,
		testkit.Endpoint{DNSName: hostFailover, RecordType: "A", TTL: 7, Targets: own,
			ProviderSpecific: [][2]string{{"gslb/primary", "eu,us,ap"}, {"gslb/strategy", "failover"}}},
		testkit.Endpoint{DNSName: hostRR, RecordType: "A", TTL: 7, Targets: own,
			ProviderSpecific: [][2]string{{"gslb/strategy", "roundRobin"}}},
		testkit.Endpoint{DNSName: hostWeighted, RecordType: "A", TTL: 7, Targets: own,
			ProviderSpecific: [][2]string{{"gslb/strategy", "weighted"}, {"gslb/ttl", "11"}, {"gslb/weight", "eu=0,us=1,ap=1"}}},
		testkit.Endpoint{DNSName: hostGeo, RecordType: "A", TTL: 7, Targets: own,
			ProviderSpecific: [][2]string{{"gslb/strategy", "geoip"}}},
		testkit.Endpoint{DNSName: hostDual, RecordType: "A", TTL: 7, Targets: own,
			ProviderSpecific: [][2]string{{"gslb/primary", "us,eu,ap"}, {"gslb/strategy", "failover"}}},
		testkit.Endpoint{DNSName: hostDual, RecordType: "AAAA", TTL: 7, Targets: v6Of[tag]},
		testkit.Endpoint{DNSName: hostDualRR, RecordType: "A", TTL: 7, Targets: own,
			ProviderSpecific: [][2]string{{"gslb/strategy", "roundRobin"}}},
		testkit.Endpoint{DNSName: hostDualRR, RecordType: "AAAA", TTL: 7, Targets: v6Of[tag]},
		testkit.Endpoint{DNSName: hostDefault, RecordType: "A", Targets: own}, // no recordTTL: the Corefile ttl
	)
}

// parentManifest is the parent zone: the delegation of the GSLB zone (NS)
// and the glue of its name servers.
func (f *fleet) parentManifest() string {
	var ns []string
	var glue []testkit.Endpoint
	for _, tag := range slices.Sorted(maps.Keys(f.delegation)) {
		e := f.delegation[tag]
		ns = append(ns, e.name)
		glue = append(glue, testkit.Endpoint{DNSName: e.name, RecordType: "A", TTL: 60, Targets: []string{e.ip}})
	}
	eps := append([]testkit.Endpoint{
		{DNSName: "www." + parent, RecordType: "A", TTL: 60, Targets: []string{"192.0.2.1"}},
		{DNSName: zone, RecordType: "NS", TTL: 60, Targets: ns},
	}, glue...)
	return testkit.DNSEndpoint("dns", "delegation", nil, eps...)
}

// setDelegation rewrites the parent's delegation; k8scrd serves it at once.
func (f *fleet) setDelegation(t *testing.T) {
	t.Helper()
	testkit.WriteFile(t, f.parentDir, "delegation.yaml", f.parentManifest())
}

// clusterCorefile is one cluster's GSLB block: authoritative only (no
// forward), localtargets, gslb and k8scrd in the documented order.
func (f *fleet) clusterCorefile(c *cluster, o fleetOptions) string {
	var geo strings.Builder
	for _, tag := range tags {
		fmt.Fprintf(&geo, "        geo cidr %s %s\n", subnetOf[tag], tag)
	}
	lt := "localtargets"
	if l, ok := o.localtargets[c.tag]; ok {
		lt = l
	}
	keys := zone + ":53"
	zones := zone
	if o.plainZone != "" {
		keys += " " + o.plainZone + ":53"
		zones += " " + o.plainZone
	}
	return fmt.Sprintf(`%[12]s {
    bind %[2]s
%[7]s    %[14]s
    gslb %[1]s {
        geotag %[3]s
        peers_from_ns %[4]s:53 {
            refresh 1s
            allow 127.0.0.0/8
        }
        strategy roundRobin
        timeout %[5]s
        refresh %[6]s
        split_brain_threshold %[8]s
        ttl 5
%[9]s%[10]s    }
    k8scrd %[13]s {
        directory %[11]s
    }
    errors
}
`, zone, c.ip, c.tag, f.parentIP, peerTimeout, peerRefresh, o.blockExtra[c.tag]+o.blockExtra[""],
		splitBrain, geo.String(), o.gslbExtra[c.tag]+o.gslbExtra[""], c.dir, keys, zones, lt)
}

// startTimeout bounds fleet.start's wait for the fleet to converge.
const startTimeout = 20 * time.Second

// start runs the parent and every cluster, and waits until the fleet has
// converged (see converged): every cluster knows every other cluster's
// targets, so a test's first query sees the whole fleet.
func (f *fleet) start(t *testing.T, o fleetOptions) {
	t.Helper()
	if !o.noHosts {
		for _, tag := range tags {
			testkit.WriteFile(t, f.clusters[tag].dir, "hosts.yaml", clusterHosts(tag, f.targets[tag]))
		}
	}
	f.setDelegation(t)
	f.parent = harness.StartCoreDNS(t, fmt.Sprintf(`%s:53 {
    bind %s
    k8scrd %s {
        directory %s
    }
    errors
}
`, parent, f.parentIP, parent, f.parentDir), harness.WithProbe("www."+parent, dns.TypeA))

	for _, tag := range tags {
		c := f.clusters[tag]
		var opts []harness.Option
		for name, content := range o.files {
			opts = append(opts, harness.WithFile(name, content))
		}
		opts = append(opts, harness.WithProbe(hostDefault, dns.TypeA))
		c.srv = harness.StartCoreDNS(t, f.clusterCorefile(c, o), opts...)
	}
	if o.noHosts {
		return
	}
	start := time.Now()
	if msg, ok := testkit.Within(startTimeout, f.converged); !ok {
		t.Fatalf("fleet start: not converged %v after the last cluster started: %s", startTimeout, msg)
	}
	t.Logf("fleet converged %v after the last cluster started", time.Since(start).Round(time.Millisecond))
}

// converged reports whether every cluster answers the roundRobin host with
// the union of the targets of every cluster it knows (itself and the
// clusters in the parent's delegation: each has every such peer up and knows
// its targets) and the failover host with its first known primary's
// targets (eu's, unless a test left eu out of the delegation). Peers in the
// delegation that are not clusters of the fleet (a k8gb cluster, a garbage
// or oversized peer) are the tests' business: their addresses are left out
// of the comparison. The roundRobin host is asked over TCP, so that an
// oversized peer answer is not truncated away. When not converged, the
// message names the first cluster that is not, what it answered and its
// explain record (the peers' states and last errors).
func (f *fleet) converged() (bool, string) {
	ours := map[string]bool{}
	for _, ip := range f.union(tags...) {
		ours[ip] = true
	}
	for _, tag := range tags {
		c := f.clusters[tag]
		var known []string
		for _, other := range tags {
			if _, delegated := f.delegation[other]; other == tag || delegated {
				known = append(known, other)
			}
		}
		want := f.union(known...)
		got, err := ask(c.addr, hostRR, dns.TypeA, harness.TCP)
		var mine []string
		for _, ip := range got {
			if ours[ip] {
				mine = append(mine, ip)
			}
		}
		if err != nil || !equal(mine, want) {
			return false, fmt.Sprintf("%s answers %s with %v (%v), want the targets of %v: %v; %s",
				tag, hostRR, got, err, known, want, f.explain(c, hostRR))
		}
		// known is in failover order (eu, us, ap), and every cluster has
		// targets.
		if got, err := ask(c.addr, hostFailover, dns.TypeA); err != nil || !equal(got, f.union(known[0])) {
			return false, fmt.Sprintf("%s answers %s with %v (%v), want the first primary %s's %v; %s",
				tag, hostFailover, got, err, known[0], f.union(known[0]), f.explain(c, hostFailover))
		}
	}
	return true, ""
}

// explain returns a cluster's explain record for host, one line, for
// failure messages (the peers' states, the ages of their answers, their
// last errors).
func (f *fleet) explain(c *cluster, host string) string {
	txt, _, err := askTXTFrom("127.0.0.1", c.addr, "_gslb-explain."+host)
	if err != nil || len(txt) == 0 {
		return fmt.Sprintf("no explain record from %s (%v)", c.tag, err)
	}
	return fmt.Sprintf("%s's explain: %s", c.tag, strings.Join(txt, "; "))
}

// ask queries addr over UDP once and returns the sorted answer targets.
func ask(addr, name string, qtype uint16, opts ...harness.QueryOption) ([]string, error) {
	opts = append([]harness.QueryOption{harness.Attempts(1), harness.Timeout(2 * time.Second)}, opts...)
	m, err := harness.Ask(addr, name, qtype, opts...)
	if err != nil {
		return nil, err
	}
	if m.Rcode != dns.RcodeSuccess {
		return nil, fmt.Errorf("%s %s: rcode %s", name, dns.TypeToString[qtype], dns.RcodeToString[m.Rcode])
	}
	return harness.Targets(m, qtype), nil
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// union returns the sorted targets of the given clusters.
func (f *fleet) union(tagList ...string) []string {
	var out []string
	for _, tag := range tagList {
		out = append(out, f.targets[tag]...)
	}
	return sorted(out)
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// writeFile writes a file into dir and returns its path.
func writeFile(t testing.TB, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
