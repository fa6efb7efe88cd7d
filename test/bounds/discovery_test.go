package bounds_test

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

// parentZone is a coredns process serving the parent zone from a manifest
// folder: the delegation of the GSLB zone and its glue.
type parentZone struct {
	*harness.CoreDNS
	dir         string
	zone, child string // the parent zone and the delegated zone
}

func startParent(t *testing.T, delegation map[string]string) *parentZone {
	t.Helper()
	return startParentAt(t, harness.NewIP(t), zone, delegation)
}

// startParentAt serves the parent of child (its zone less the first label)
// on ip.
func startParentAt(t *testing.T, ip, child string, delegation map[string]string) *parentZone {
	t.Helper()
	_, par, _ := strings.Cut(child, ".")
	p := &parentZone{dir: t.TempDir(), zone: par, child: child}
	p.set(t, delegation)
	p.CoreDNS = harness.StartCoreDNS(t, fmt.Sprintf(`%s:53 {
    bind %s
    k8scrd %s {
        directory %s
    }
    errors
}
`, par, ip, par, p.dir), harness.WithProbe("www."+par, dns.TypeA))
	return p
}

// set rewrites the delegation: name server name -> glue address.
func (p *parentZone) set(t *testing.T, delegation map[string]string) {
	t.Helper()
	parent, zone := p.zone, p.child
	var ns []string
	eps := []testkit.Endpoint{{DNSName: "www." + parent, RecordType: "A", TTL: 60, Targets: []string{"127.0.0.1"}}}
	for _, n := range slices.Sorted(func(yield func(string) bool) {
		for n := range delegation {
			if !yield(n) {
				return
			}
		}
	}) {
		ns = append(ns, n)
		eps = append(eps, testkit.Endpoint{DNSName: n, RecordType: "A", TTL: 60, Targets: []string{delegation[n]}})
	}
	eps = append(eps, testkit.Endpoint{DNSName: zone, RecordType: "NS", TTL: 60, Targets: ns})
	testkit.WriteFile(t, p.dir, "delegation.yaml", testkit.DNSEndpoint("dns", "delegation", nil, eps...))
}

// manyNS are n name servers of tags <prefix>0000..., each with glue at addr.
func manyNS(prefix string, n int, addr string) map[string]string {
	out := map[string]string{}
	for i := range n {
		out[fmt.Sprintf("gslb-ns-%s%04d.%s", prefix, i, zone)] = addr
	}
	return out
}

var rePeerLabel = regexp.MustCompile(`peer="([^"]*)"`)

// peerLabels returns the distinct peer label values in /metrics and the
// number of series that carry one.
func peerLabels(text string) (map[string]bool, int) {
	tags := map[string]bool{}
	n := 0
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		if m := rePeerLabel.FindStringSubmatch(line); m != nil {
			tags[m[1]] = true
			n++
		}
	}
	return tags, n
}

// TestThousandNameServersInTheParent (finding 2): the parent, a coredns
// process, delegates the GSLB zone to 1,000 name servers whose glue is one
// silent peer process. The cluster takes max_peers (64) of them: the
// discovered peers gauge, goroutines, per-peer series and the queries the
// silent peer receives stay bounded; when the parent names 1,000 other
// servers every second, the series of the peers gone are deleted.
func TestThousandNameServersInTheParent(t *testing.T) {
	sink := startFake(t, roleSilentPeer, harness.NewIP(t))
	sinkIP := strings.Split(sink.Addr, ":")[0]
	own := harness.NewIP(t)
	p := startParent(t, map[string]string{"gslb-ns-eu." + zone: own})
	c := startCluster(t, fmt.Sprintf(`        peers_from_ns %s {
            refresh 1s
            allow 127.0.0.0/8
        }
        timeout 200ms
        refresh 30s`, p.Addr),
		testkit.DNSEndpoint("apps", "www", nil, testkit.Endpoint{DNSName: host, RecordType: "A", TTL: 5, Targets: []string{"127.41.0.1"}}),
		harness.WithProbe(host, dns.TypeA))
	time.Sleep(1500 * time.Millisecond)
	base := harness.Scrape(t, c.metrics)
	baseG := base.Sum("go_goroutines")

	ns := manyNS("p", 1000, sinkIP)
	ns["gslb-ns-eu."+zone] = own
	p.set(t, ns)
	testkit.Eventually(t, 10*time.Second, "64 discovered peers", func() (bool, string) {
		v := harness.Scrape(t, c.metrics).Sum("coredns_gslb_discovered_peers")
		return v == 64, fmt.Sprintf("coredns_gslb_discovered_peers = %v, want 64 (max_peers)", v)
	})
	start, _ := sink.count()
	time.Sleep(6 * time.Second)
	end, _ := sink.count()
	text := harness.Scrape(t, c.metrics)
	g := text.Sum("go_goroutines")
	ignored := text.Sum("coredns_gslb_discovery_ignored_peers")
	tags, n := peerLabels(text.Text)
	rate := float64(end-start) / 6
	t.Logf("1,000 NS names: %d peers in /metrics, %d per-peer series, %d series in all, /metrics %d bytes; %v ignored; goroutines %v -> %v; the silent peer asked %.1f times/s (%d queries from 1 s to 7 s after discovery)",
		len(tags), n, text.Series("coredns_"), len(text.Text), ignored, baseG, g, rate, end-start)
	if len(tags) > 64 || ignored != 936 {
		t.Errorf("%d peers in /metrics, %v ignored; want at most 64 and 936", len(tags), ignored)
	}
	if g-baseG > 100 {
		t.Errorf("goroutines %v -> %v with 1,000 NS names: more than 100 more", baseG, g)
	}
	// A peer's lines: its state gauges, failure counters and the query
	// duration histogram's buckets; a fixed number for each of 64 peers.
	if n > 64*32 {
		t.Errorf("%d per-peer lines in /metrics, want at most 32 a peer for 64 peers", n)
	}
	// Every peer fails (nothing answers): backed off, the 64 peers are not
	// asked every tick of the peer loop (1 s; A and AAAA: 128 queries a
	// second).
	if rate > 64 {
		t.Errorf("the silent peer was asked %.1f times a second, want the failing peers backed off (< 64/s)", rate)
	}
	if !strings.Contains(c.Log(), "names more than max_peers 64 peers: 936 ignored") {
		t.Errorf("no log line for the ignored peers")
	}

	// The parent names other servers every second: only the current ones
	// keep series.
	gen := ""
	for i := range 4 {
		gen = fmt.Sprintf("g%d", i)
		ns := manyNS(gen, 1000, sinkIP)
		ns["gslb-ns-eu."+zone] = own
		p.set(t, ns)
		time.Sleep(1200 * time.Millisecond)
	}
	testkit.Eventually(t, 10*time.Second, "series of the last generation only", func() (bool, string) {
		text := harness.Scrape(t, c.metrics)
		tags, n := peerLabels(text.Text)
		var stale []string
		for tag := range tags {
			if !strings.HasPrefix(tag, gen) {
				stale = append(stale, tag)
			}
		}
		g := text.Sum("go_goroutines")
		t.Logf("after 4 generations of 1,000 names: %d peers in /metrics (%d stale), %d per-peer series, goroutines %v, /metrics %d bytes", len(tags), len(stale), n, g, len(text.Text))
		return len(stale) == 0 && len(tags) <= 64 && g-baseG <= 100, fmt.Sprintf("%d peers in /metrics, %d of earlier generations (%v...), goroutines %v", len(tags), len(stale), stale[:min(3, len(stale))], g)
	})
}

// TestGlueOfThisHostIsRefused (finding 2): glue at 169.254.169.254 (the
// cloud metadata service), on loopback, and in a range that `deny` names
// (a cluster's service range, here a loopback /16 standing in for it) makes
// no peer unless `allow` names it; deny wins over allow.
func TestGlueOfThisHostIsRefused(t *testing.T) {
	peerIP := harness.NewIP(t)
	startFake(t, rolePeer, peerIP, "127.40.0.9")
	own := harness.NewIP(t)
	p := startParent(t, map[string]string{
		"gslb-ns-eu." + zone:    own,
		"gslb-ns-meta." + zone:  "169.254.169.254",
		"gslb-ns-loop." + zone:  peerIP,
		"gslb-ns-svc." + zone:   "127.96.0.10",
		"gslb-ns-zero." + zone:  "0.0.0.0",
		"gslb-ns-mcast." + zone: "224.0.0.1",
	})
	for _, c := range []struct {
		name    string
		lines   string
		peers   float64
		refused float64
		served  bool
	}{
		{"default: no glue of this host or its link", "", 0, 5, false},
		{"allow 127.0.0.0/8, deny 127.96.0.0/16 (the service range)", "            allow 127.0.0.0/8\n            deny 127.96.0.0/16\n", 1, 4, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := startCluster(t, fmt.Sprintf(`        peers_from_ns %s {
            refresh 1s
%s        }
        timeout 200ms
        refresh 1s`, p.Addr, c.lines),
				testkit.DNSEndpoint("apps", "www", nil, testkit.Endpoint{DNSName: host, RecordType: "A", TTL: 5, Targets: []string{"127.41.0.1"}}),
				harness.WithProbe(host, dns.TypeA))
			testkit.Eventually(t, 10*time.Second, "the delegation read", func() (bool, string) {
				text := harness.Scrape(t, cl.metrics)
				peers := text.Sum("coredns_gslb_discovered_peers")
				refused := text.Sum("coredns_gslb_discovery_refused_glue")
				return peers == c.peers && refused == c.refused, fmt.Sprintf("discovered_peers %v, refused_glue %v; want %v, %v", peers, refused, c.peers, c.refused)
			})
			if !strings.Contains(cl.Log(), "169.254.169.254") {
				t.Errorf("no log line names the refused glue 169.254.169.254")
			}
			testkit.Eventually(t, 5*time.Second, "the answer", func() (bool, string) {
				got := harness.Targets(answer(t, cl.Addr, host, dns.TypeA), dns.TypeA)
				return slices.Contains(got, "127.40.0.9") == c.served && !slices.Contains(got, "169.254.169.254"),
					fmt.Sprintf("%s = %v; the loopback peer's 127.40.0.9 served: want %v", host, got, c.served)
			})
		})
	}
}
