package gslb

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

// k8gbTargets are the targets of the k8gb cluster (geo tag za).
var k8gbTargets = []string{"10.40.0.1", "10.40.0.2"}

// k8gbZone is what a k8gb cluster's CoreDNS answers for the GSLB zone: the
// localtargets- A records that its operator writes, served here by the
// stock `file` plugin alone.
func k8gbZone() string {
	var b strings.Builder
	fmt.Fprintf(&b, "$ORIGIN %s.\n@ 30 IN SOA %s. hostmaster.%s. 1 7200 1800 86400 30\n@ 30 IN NS %s.\n",
		zone, k8gbNSName("za"), zone, k8gbNSName("za"))
	for _, host := range []string{hostRR, hostFailover, hostDefault} {
		label := strings.TrimSuffix(host, "."+zone)
		for _, ip := range k8gbTargets {
			fmt.Fprintf(&b, "localtargets-%s 30 IN A %s\n", label, ip)
		}
	}
	return b.String()
}

// startK8gbPeer runs a k8gb cluster's CoreDNS as a stock `file` server of
// the GSLB zone (k8gbZone) on an address of its own, not yet in the
// parent's delegation.
func startK8gbPeer(t *testing.T) (ip string, srv *harness.CoreDNS) {
	ip = harness.NewIP(t)
	srv = harness.StartCoreDNS(t, fmt.Sprintf(`%s:53 {
    bind %s
    file db.zone
    errors
}
`, zone, ip), harness.WithFile("db.zone", k8gbZone()), harness.WithProbe("localtargets-"+hostRR, dns.TypeA))
	return ip, srv
}

// TestStockCoreDNSIsAPeer runs a fourth cluster as a k8gb cluster would: a
// CoreDNS with only stock plugins (`file`) serving localtargets- A records,
// its name server in the parent's delegation under k8gb's naming
// (gslb-ns-<geotag>-<zone with dashes>.<parent>). Every fleetdns cluster
// discovers it, asks it, and adds its targets to roundRobin answers; the
// k8gb cluster can ask ours the same plain question.
func TestStockCoreDNSIsAPeer(t *testing.T) {
	f := newFleet(t)
	k8gbIP, k8gb := startK8gbPeer(t)
	f.start(t, fleetOptions{})

	// Before the k8gb cluster is in the delegation: the three of us.
	for _, tag := range tags {
		if got, err := ask(f.clusters[tag].addr, hostRR, dns.TypeA); err != nil || !equal(got, f.union(tags...)) {
			t.Fatalf("%s from %s = %v (%v), want %v before the k8gb peer is delegated", hostRR, tag, got, err, f.union(tags...))
		}
	}

	// The parent now delegates to the k8gb cluster's name server too; the
	// clusters act on the change at their next discovery.
	f.delegation["za"] = nsEntry{name: k8gbNSName("za"), ip: k8gbIP}
	f.setDelegation(t)
	want := sorted(append(f.union(tags...), k8gbTargets...))
	for _, tag := range tags {
		c := f.clusters[tag]
		testkit.Eventually(t, 5*peerRefresh, "the k8gb peer's targets in the answer", func() (bool, string) {
			got, err := ask(c.addr, hostRR, dns.TypeA)
			return err == nil && equal(got, want), fmt.Sprintf("%s from %s = %v (%v), want the k8gb peer's targets too: %v", hostRR, tag, got, err, want)
		})
		// failover primary eu,us,ap: za is not in the order, eu still wins.
		if got, err := ask(c.addr, hostFailover, dns.TypeA); err != nil || !equal(got, f.union("eu")) {
			t.Errorf("%s from %s = %v (%v), want eu's %v", hostFailover, tag, got, err, f.union("eu"))
		}
		// geo has no localtargets- record at the k8gb cluster: NXDOMAIN
		// there means "up, no targets", not a failure.
		if got, err := ask(c.addr, hostGeo, dns.TypeA, harness.ECS("192.0.2.0/24")); err != nil || !equal(got, f.union(tags...)) {
			t.Errorf("%s from %s = %v (%v), want %v", hostGeo, tag, got, err, f.union(tags...))
		}
	}

	// What the k8gb cluster asks us: a plain A query without EDNS, as its
	// CoreDNS sends it, answered with this cluster's own targets only.
	for _, tag := range tags {
		m, err := harness.Ask(f.clusters[tag].addr, "localtargets-"+hostRR, dns.TypeA, harness.NoRD)
		if err != nil {
			t.Fatal(err)
		}
		if got := harness.Targets(m, dns.TypeA); m.Rcode != dns.RcodeSuccess || !equal(got, sorted(targetsOf[tag])) {
			t.Errorf("localtargets-%s at %s = %s %v, want %v", hostRR, tag, dns.RcodeToString[m.Rcode], got, targetsOf[tag])
		}
	}
	// The real dig sees the same.
	if got := harness.DigShort(t, f.clusters["us"].addr, "localtargets-"+hostRR, "A"); !equal(got, sorted(targetsOf["us"])) {
		t.Errorf("dig localtargets-%s @us = %v, want %v", hostRR, got, targetsOf["us"])
	}

	// The k8gb cluster goes away: its answer stands until the threshold,
	// then its targets leave the answers.
	k8gb.Kill()
	for _, tag := range tags {
		c := f.clusters[tag]
		testkit.Eventually(t, splitBrain+2*peerRefresh+slack, "the answer without the dead k8gb peer", func() (bool, string) {
			got, err := ask(c.addr, hostRR, dns.TypeA)
			return err == nil && equal(got, f.union(tags...)), fmt.Sprintf("%s from %s = %v (%v) after the k8gb peer died", hostRR, tag, got, err)
		})
	}
}
