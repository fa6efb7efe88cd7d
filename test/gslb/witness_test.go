package gslb

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

// witnessCluster is one cluster of the witness test: a coredns process in
// a network namespace of its own.
type witnessCluster struct {
	tag  string
	ns   *harness.NetNS
	addr string // ip:53
	proc *harness.Process
}

// startInNetNS runs the coredns binary on corefile inside the namespace,
// with files beside the Corefile.
func startInNetNS(t *testing.T, ns *harness.NetNS, name, corefile string, files map[string]string) *harness.Process {
	t.Helper()
	dir := t.TempDir()
	files["Corefile"] = corefile
	for f, content := range files {
		sub, base := filepath.Split(f)
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
		testkit.WriteFile(t, filepath.Join(dir, sub), base, content)
	}
	return harness.StartProcess(t, name, "ip", []string{"netns", "exec", ns.Name, harness.CoreDNSBinary(t), "-conf", "Corefile"}, dir)
}

// witnessCorefile is a cluster's GSLB block with the shipped words (fleet
// on, no witness block: the peers' addresses may ask _gslb-peers), static
// peers, and the test's short timings; explain for the test's own address.
// The timeout is witnessTimeout, not peerTimeout: a witness round whose
// query to ap times out has no vouch for eu, and us would fail eu over
// while the test wants it kept.
func witnessCorefile(c *witnessCluster, peers map[string]*witnessCluster, za string) string {
	var lines strings.Builder
	for _, tag := range tags {
		if p := peers[tag]; p != c {
			fmt.Fprintf(&lines, "        peer %s %s\n", tag, p.ns.Addr(0))
		}
	}
	fmt.Fprintf(&lines, "        peer za %s\n", za)
	return fmt.Sprintf(`%[1]s:53 {
    bind %[2]s
    localtargets
    gslb %[1]s {
        geotag %[3]s
%[4]s        strategy roundRobin
        timeout %[5]s
        refresh %[6]s
        split_brain_threshold %[7]s
        explain %[8]s
        fleet
    }
    k8scrd %[1]s {
        directory hosts
    }
    errors
}
`, zone, c.ns.Addr(0), c.tag, lines.String(), witnessTimeout, peerRefresh, splitBrain, c.ns.Host)
}

// witnessTimeout is the gslb timeout of the witness test's clusters: the
// shipped default, so that a loaded machine's half-second stall of ap does
// not count as ap's silence about eu.
const witnessTimeout = time.Second

// TestWitnessKeepsAPartitionedPeer: three clusters in network namespaces of
// their own and a k8gb cluster (a stock `file` zone) as a fourth peer. With
// us's queries to eu dropped in eu's namespace while ap still reaches eu,
// us keeps eu's targets past split_brain_threshold and explains eu as
// partitioned, with ap vouching and the k8gb peer not counted. Then eu
// stops for everyone (SIGSTOP): us and ap fail over within
// split_brain_threshold + refresh + 2 s.
func TestWitnessKeepsAPartitionedPeer(t *testing.T) {
	harness.RequirePlugins(t, "k8scrd", "localtargets", "gslb")
	nft, err := exec.LookPath("nft")
	if err != nil {
		harness.Missing(t, "nft: %v", err)
	}
	lan := harness.NewLAN(t, 4)
	clusters := map[string]*witnessCluster{}
	for i, tag := range tags {
		clusters[tag] = &witnessCluster{tag: tag, ns: lan[i], addr: net.JoinHostPort(lan[i].Addr(0), "53")}
	}
	za := lan[3]
	startInNetNS(t, za, "coredns-za", fmt.Sprintf("%s:53 {\n    bind %s\n    file db.zone\n    errors\n}\n", zone, za.Addr(0)),
		map[string]string{"db.zone": k8gbZone()})
	for _, tag := range tags {
		c := clusters[tag]
		c.proc = startInNetNS(t, c.ns, "coredns-"+tag, witnessCorefile(c, clusters, za.Addr(0)),
			map[string]string{"hosts/hosts.yaml": clusterHosts(tag, targetsOf[tag])})
	}
	eu, us, ap := clusters["eu"], clusters["us"], clusters["ap"]
	explain := func(c *witnessCluster) string {
		m, err := harness.Ask(c.addr, "_gslb-explain."+hostFailover, dns.TypeTXT, harness.TCP)
		if err != nil {
			return fmt.Sprintf("no explain from %s: %v", c.tag, err)
		}
		var out []string
		for _, rr := range m.Answer {
			if txt, ok := rr.(*dns.TXT); ok {
				out = append(out, txt.Txt...)
			}
		}
		return strings.Join(out, "\n")
	}
	// failover primary eu,us,ap: every cluster answers eu's targets.
	for _, c := range []*witnessCluster{eu, us, ap} {
		testkit.Eventually(t, startTimeout, c.tag+" answers eu's targets", func() (bool, string) {
			got, err := ask(c.addr, hostFailover, dns.TypeA)
			return err == nil && equal(got, targetsOf["eu"]), fmt.Sprintf("%s: %v (%v); %s", c.tag, got, err, explain(c))
		})
	}
	// The clusters start together, so a first check may find a peer not
	// listening yet: every peer is up within the backoff that follows.
	testkit.Eventually(t, startTimeout, "every peer up at us", func() (bool, string) {
		peers, rcode, err := askTXTFrom("", us.addr, "_gslb-peers."+zone)
		return err == nil && rcode == dns.RcodeSuccess && len(peers) == 3 && strings.HasPrefix(peers[0], "peer=ap state=up age=") &&
				strings.HasPrefix(peers[1], "peer=eu state=up age=") && strings.HasPrefix(peers[2], "peer=za state=up age="),
			fmt.Sprintf("us's _gslb-peers: %q, rcode %d, %v", peers, rcode, err)
	})

	// Cut us -> eu: eu's namespace drops DNS from us's address only.
	rules := fmt.Sprintf(`table inet witness {
	chain input {
		type filter hook input priority 0;
		ip saddr %[1]s udp dport 53 drop
		ip saddr %[1]s tcp dport 53 drop
	}
}
`, us.ns.Addr(0))
	cmd := exec.Command("ip", "netns", "exec", eu.ns.Name, nft, "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft: %v: %s", err, out)
	}
	cut := time.Now()
	// Past split_brain_threshold and more: us keeps answering eu's targets
	// all along.
	for time.Since(cut) < splitBrain+2*peerRefresh {
		if got, err := ask(us.addr, hostFailover, dns.TypeA); err != nil || !equal(got, targetsOf["eu"]) {
			t.Fatalf("%v after the cut, us answers %v (%v), want eu's targets: %s", time.Since(cut).Round(time.Millisecond), got, err, explain(us))
		}
		time.Sleep(100 * time.Millisecond)
	}
	x := explain(us)
	if !strings.Contains(x, "tag eu peer "+eu.ns.Addr(0)+":53 state partitioned") || !strings.Contains(x, "vouched for by ap, not by -, no view from za") {
		t.Fatalf("us's explain does not show eu partitioned, vouched for by ap, za not counted:\n%s", x)
	}
	if !us.proc.WaitLog("Peer eu ("+eu.ns.Addr(0)+":53) of "+zone+". is partitioned from this cluster: ap of 1 peers", time.Second) {
		t.Error("us logged no partitioned line for eu")
	}
	if peers, _, _ := askTXTFrom("", us.addr, "_gslb-peers."+zone); len(peers) != 3 || !strings.HasPrefix(peers[1], "peer=eu state=partitioned age=") {
		t.Errorf("us's _gslb-peers: %q, want eu partitioned", peers)
	}
	for _, c := range []*witnessCluster{ap, eu} {
		if got, err := ask(c.addr, hostFailover, dns.TypeA); err != nil || !equal(got, targetsOf["eu"]) {
			t.Errorf("%s answers %v (%v), want eu's targets", c.tag, got, err)
		}
	}

	// eu stops for everyone: us and ap fail over to us's targets.
	eu.proc.Signal(syscall.SIGSTOP)
	stop := time.Now()
	// The fleet's SOA check times out after 2 s (the gslb timeout without
	// it). ap finds eu silent at its first check after eu's last answer
	// (within refresh + 2 s), and down at the first witness round (every
	// second, its query within witnessTimeout) once that answer is
	// split_brain_threshold old: within 3 + 1 + 1 s of the stop. us fails
	// over at its first round after ap finds eu silent: within 1 + 2 + 1 + 1 s.
	bound := splitBrain + peerRefresh + 2*time.Second
	const slack = 2 * time.Second // a loaded machine's scheduling
	pending := map[string]*witnessCluster{"us": us, "ap": ap}
	for len(pending) > 0 {
		for tag, c := range pending {
			if got, err := ask(c.addr, hostFailover, dns.TypeA); err == nil && equal(got, targetsOf["us"]) {
				t.Logf("%s failed over %v after eu stopped (bound %v)", tag, time.Since(stop).Round(10*time.Millisecond), bound)
				delete(pending, tag)
			}
		}
		if time.Since(stop) > bound+slack {
			for _, c := range pending {
				t.Errorf("%s did not fail over within %v of eu's stop: %s", c.tag, bound+slack, explain(c))
			}
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
}
