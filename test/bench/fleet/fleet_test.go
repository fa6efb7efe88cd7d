package fleet

import (
	"fmt"
	"math"
	mrand "math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/plugin/gslb/fleet/fleettest"
	"github.com/fleetdns/fleetdns/test/bench/benchkit"
	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

const (
	zone    = "example.org."
	refresh = 30 * time.Second // the shipped refresh
	chgHost = "chg." + zone    // the host whose target the readiness changes move
)

func knob(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a number", name, s)
	}
	return n
}

type cluster struct {
	tag, ip, addr, metrics, dir string
	target                      string // this cluster's target of every host
	srv                         *harness.CoreDNS
}

// result is one mode's measurements.
type result struct {
	mode                 string
	clusters, hosts      int
	converged            time.Duration // 0: not within the bound
	queriesPerSec        []float64     // per cluster
	cpuPerMin            []float64     // per cluster
	rssMiB               []float64     // per cluster
	changes              []time.Duration
	changesLost          int // changes not seen everywhere within the bound
	window               time.Duration
	stale, down, unknown float64 // peer states summed over the clusters at the end of the idle window
}

func TestFleetBench(t *testing.T) {
	if os.Getenv("FLEETDNS_BENCH") != "1" {
		t.Skip("a benchmark: set FLEETDNS_BENCH=1 (see doc.go)")
	}
	harness.RequirePlugins(t, "k8scrd", "localtargets", "gslb")
	n := knob(t, "FLEETDNS_BENCH_CLUSTERS", 8)
	h := knob(t, "FLEETDNS_BENCH_HOSTS", 10000)
	idle := time.Duration(knob(t, "FLEETDNS_BENCH_IDLE", 60)) * time.Second
	converge := time.Duration(knob(t, "FLEETDNS_BENCH_CONVERGE", 120)) * time.Second
	modes := strings.Split(os.Getenv("FLEETDNS_BENCH_MODES"), ",")
	if os.Getenv("FLEETDNS_BENCH_MODES") == "" {
		modes = []string{"perhost", "fleet"}
	}
	var results []*result
	for _, mode := range modes {
		changes := knob(t, "FLEETDNS_BENCH_CHANGES", 200)
		if mode == "perhost" {
			changes = knob(t, "FLEETDNS_BENCH_PERHOST_CHANGES", 6)
		}
		t.Run(mode, func(t *testing.T) {
			results = append(results, run(t, mode, n, h, idle, converge, changes))
		})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n| protocol | clusters x hosts | converged | peer queries sent per cluster per s, idle (max) | CPU s per min per cluster, idle (mean, max) | RSS MiB per cluster (mean, max) | change -> every cluster's answer, p50 / p99 / max (n) | peers not up at the end |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		conv := "no, within the bound"
		if r.converged > 0 {
			conv = r.converged.Round(100 * time.Millisecond).String()
		}
		ch := "-"
		if len(r.changes) > 0 {
			ch = fmt.Sprintf("%v / %v / %v (%d", pct(r.changes, 50), pct(r.changes, 99), pct(r.changes, 100), len(r.changes))
			if r.changesLost > 0 {
				ch += fmt.Sprintf(", %d not seen within the bound", r.changesLost)
			}
			ch += ")"
		}
		fmt.Fprintf(&b, "| %s | %d x %d | %s | %.2f (%.2f) | %.2f, %.2f | %.0f, %.0f | %s | stale %.0f, down %.0f, unknown %.0f |\n",
			r.mode, r.clusters, r.hosts, conv, mean(r.queriesPerSec), slices.Max(r.queriesPerSec),
			mean(r.cpuPerMin), slices.Max(r.cpuPerMin), mean(r.rssMiB), slices.Max(r.rssMiB), ch, r.stale, r.down, r.unknown)
	}
	t.Log(b.String())
}

func run(t *testing.T, mode string, n, h int, idle, converge time.Duration, changes int) *result {
	r := &result{mode: mode, clusters: n, hosts: h, window: idle}
	key := fleettest.Key("fleet.example.")
	cs := make([]*cluster, n)
	for i := range cs {
		ip := harness.NewIP(t)
		cs[i] = &cluster{tag: fmt.Sprintf("c%d", i), ip: ip, addr: net.JoinHostPort(ip, "53"), metrics: harness.HostPort(t, ip),
			dir: t.TempDir(), target: fmt.Sprintf("198.18.%d.1", i)}
	}
	for _, c := range cs {
		testkit.WriteFile(t, c.dir, "hosts.yaml", manifest(h, c.target))
		testkit.WriteFile(t, c.dir, "chg.yaml", chgManifest(c.target))
	}
	start := time.Now()
	for _, c := range cs {
		c.srv = harness.StartCoreDNS(t, corefile(c, cs, mode == "fleet"), harness.WithFile("fleet.key", key), harness.WithStartTimeout(2*time.Minute))
	}
	started := time.Since(start)
	all := make([]string, n)
	for i, c := range cs {
		all[i] = c.target
	}
	// Converged: every cluster answers the first and the last host and the
	// changing one with every cluster's target.
	probe := []string{"h0." + zone, fmt.Sprintf("h%d.%s", h-1, zone), chgHost}
	deadline := time.Now().Add(converge)
	for time.Now().Before(deadline) {
		ok := true
		for _, c := range cs {
			for _, name := range probe {
				if !slices.Equal(answer(c.addr, name), sorted(all)) {
					ok = false
				}
			}
		}
		if ok {
			r.converged = time.Since(start)
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("%s: %d clusters x %d hosts started in %v; converged: %v", mode, n, h, started.Round(time.Millisecond), r.converged.Round(time.Millisecond))

	// Idle: nothing changes for the window (after one refresh, so that the
	// start-up transfers are over).
	time.Sleep(min(refresh, idle/2))
	q0, cpu0 := make([]float64, n), make([]float64, n)
	for i, c := range cs {
		q0[i] = peerQueries(t, c.metrics)
		cpu0[i] = benchkit.CPUSeconds(t, c.srv.Pid())
	}
	t0 := time.Now()
	time.Sleep(idle)
	w := time.Since(t0)
	for i, c := range cs {
		q := peerQueries(t, c.metrics) - q0[i]
		cpu := benchkit.CPUSeconds(t, c.srv.Pid()) - cpu0[i]
		r.queriesPerSec = append(r.queriesPerSec, q/w.Seconds())
		r.cpuPerMin = append(r.cpuPerMin, cpu*float64(time.Minute)/float64(w))
		rss, err := c.srv.RSS()
		if err != nil {
			t.Fatal(err)
		}
		r.rssMiB = append(r.rssMiB, float64(rss)/(1<<20))
		m := harness.Scrape(t, c.metrics)
		r.stale += m.Sum("coredns_gslb_peer_state", "state", "stale")
		r.down += m.Sum("coredns_gslb_peer_state", "state", "down")
		r.unknown += m.Sum("coredns_gslb_peer_state", "state", "unknown")
	}
	t.Logf("%s: idle %v: peer queries/s per cluster %v; CPU s/min %v; RSS MiB %v; peers stale %v down %v unknown %v",
		mode, w.Round(time.Millisecond), round(r.queriesPerSec), round(r.cpuPerMin), round(r.rssMiB), r.stale, r.down, r.unknown)

	// Readiness changes: the first cluster's target of chgHost moves; the
	// time until every other cluster answers the new one. Each change at a
	// random moment up to 500 ms after the last was seen; each bounded by
	// two refreshes.
	bound := 2*refresh + 5*time.Second
	others := cs[1:]
	for k := 1; k <= changes; k++ {
		time.Sleep(time.Duration(mrand.IntN(500)) * time.Millisecond)
		target := fmt.Sprintf("198.19.%d.%d", k/250, k%250+1)
		cs[0].target = target
		start := time.Now()
		testkit.WriteFile(t, cs[0].dir, "chg.yaml", chgManifest(target))
		pending := slices.Clone(others)
		for len(pending) > 0 && time.Since(start) < bound {
			pending = slices.DeleteFunc(pending, func(c *cluster) bool { return slices.Contains(answer(c.addr, chgHost), target) })
			if len(pending) > 0 {
				time.Sleep(5 * time.Millisecond)
			}
		}
		if len(pending) > 0 {
			r.changesLost++
			continue
		}
		r.changes = append(r.changes, time.Since(start))
	}
	if len(r.changes) > 0 {
		t.Logf("%s: %d changes, every other cluster's new answer: p50 %v, p99 %v, max %v; %d not seen within %v",
			mode, len(r.changes), pct(r.changes, 50), pct(r.changes, 99), pct(r.changes, 100), r.changesLost, bound)
	}
	for _, c := range cs {
		c.srv.Stop() // before the next mode starts
	}
	return r
}

func corefile(c *cluster, cs []*cluster, fleet bool) string {
	var peers strings.Builder
	for _, p := range cs {
		if p != c {
			fmt.Fprintf(&peers, "        peer %s %s\n", p.tag, p.ip)
		}
	}
	fl := ""
	if fleet {
		fl = "        fleet {\n            key fleet.key\n        }\n"
	}
	return fmt.Sprintf(`%[1]s:53 {
    bind %[2]s
    prometheus %[3]s
    localtargets
    gslb %[1]s {
        geotag %[4]s
%[5]s        strategy roundRobin
        refresh %[6]s
%[7]s    }
    k8scrd %[1]s {
        directory %[8]s
    }
    errors
}
`, zone, c.ip, c.metrics, c.tag, peers.String(), refresh, fl, c.dir)
}

// manifest declares n roundRobin hosts h0..h<n-1> with this cluster's
// target, in objects of 500 endpoints.
func manifest(n int, target string) string {
	var docs []string
	for i := 0; i < n; i += 500 {
		var eps []testkit.Endpoint
		for j := i; j < min(n, i+500); j++ {
			eps = append(eps, testkit.Endpoint{DNSName: fmt.Sprintf("h%d.%s", j, strings.TrimSuffix(zone, ".")), RecordType: "A", TTL: 30, Targets: []string{target}})
		}
		docs = append(docs, testkit.DNSEndpoint("apps", fmt.Sprintf("hosts-%d", i), nil, eps...))
	}
	return strings.Join(docs, "\n---\n")
}

func chgManifest(target string) string {
	return testkit.DNSEndpoint("apps", "chg", nil, testkit.Endpoint{DNSName: strings.TrimSuffix(chgHost, "."), RecordType: "A", TTL: 30, Targets: []string{target}})
}

// answer is the A targets a cluster answers name with, sorted (nil on
// failure).
func answer(addr, name string) []string {
	m, err := harness.Ask(addr, name, dns.TypeA, harness.TCP)
	if err != nil {
		return nil
	}
	var out []string
	for _, rr := range m.Answer {
		if a, ok := rr.(*dns.A); ok {
			out = append(out, a.A.String())
		}
	}
	return sorted(out)
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

// peerQueries is what a cluster has sent its peers: per-host queries and
// fleet view checks (each an SOA query, and a transfer when it moved).
func peerQueries(t *testing.T, metrics string) float64 {
	m := harness.Scrape(t, metrics)
	return m.Sum("coredns_gslb_peer_query_duration_seconds_count") + m.Sum("coredns_gslb_fleet_checks_total")
}

func pct(d []time.Duration, p int) time.Duration {
	return benchkit.Percentile(d, p).Round(time.Millisecond)
}

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(max(len(v), 1))
}

func round(v []float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = math.Round(x*100) / 100
	}
	return out
}
