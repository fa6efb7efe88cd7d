package dnssec_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/bench/benchkit"
	"github.com/fleetdns/fleetdns/test/harness"
	"github.com/miekg/dns"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// TestBenchmarkSignedAgainstUnsigned measures, side by side in one run,
// the shipped GSLB Corefile signed (deploy/gslb/dnssec) against the same
// Corefile unsigned (deploy/gslb), on the same objects: a geoip host's A
// answer and NXDOMAIN for 10,000 names, asked with DO by dnsperf in
// alternating rounds. rrl is taken out of both (dnsperf asks from one
// address) and 127.0.0.0/8 is mapped to the cluster's own region, so the
// geo answer is a real geo lookup with no peer. FLEETDNS_BENCH=1 runs it.
func TestBenchmarkSignedAgainstUnsigned(t *testing.T) {
	if os.Getenv("FLEETDNS_BENCH") != "1" {
		t.Skip("benchmark: FLEETDNS_BENCH=1")
	}
	rounds, seconds := envInt("FLEETDNS_BENCH_ROUNDS", 5), envInt("FLEETDNS_BENCH_SECONDS", 5)
	dnsperf := harness.LookPath(t, "dnsperf")
	k := harness.SharedKube(t)
	k.EnsureNamespace(t, "dnssec-bench")
	k.Apply(t, testkit.DNSEndpoint("dnssec-bench", "zone", nil,
		testkit.Endpoint{DNSName: "geo.gslb.example.com", RecordType: "A", TTL: 30, Targets: []string{"198.18.5.1", "198.18.5.2"},
			ProviderSpecific: [][2]string{{"gslb/strategy", "geoip"}}}))
	keys := newKeySet(t)
	parent := startParent(t, map[string]string{"eu": "127.0.0.1"})
	parentIP, _, _ := strings.Cut(parent, ":")
	geo := func(cf string) string {
		return strings.Replace(reRRL.ReplaceAllString(cf, ""), "strategy roundRobin", "strategy roundRobin\n           geo cidr 127.0.0.0/8 eu", 1)
	}
	servers := map[string]*cluster{
		"signed":   startCluster(t, k, geo(signedCorefile(t)), "eu", harness.NewIP(t), "dnssec-bench", parentIP, keys.dir),
		"unsigned": startCluster(t, k, geo(harness.ShippedCorefile(t, "deploy/gslb/configmap.yaml", "fleetdns-gslb")), "eu", harness.NewIP(t), "dnssec-bench", parentIP, ""),
	}
	for name, c := range servers {
		m := harness.Exchange(t, c.Addr, "geo.gslb.example.com.", dns.TypeA, harness.DO, harness.NoRD)
		signed := false
		for _, rr := range m.Answer {
			signed = signed || rr.Header().Rrtype == dns.TypeRRSIG
		}
		if len(harness.Targets(m, dns.TypeA)) != 2 || signed != (name == "signed") {
			t.Fatalf("%s: %v", name, m)
		}
	}
	dir := t.TempDir()
	var nx strings.Builder
	for i := range 10000 {
		fmt.Fprintf(&nx, "nx-%d.gslb.example.com A\n", i)
	}
	files := map[string]string{"geo A": "geo.gslb.example.com A\n", "NXDOMAIN": nx.String()}
	for name, text := range files {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		files[name] = p
	}
	order := []string{"signed", "unsigned"}
	variants := []string{"geo A", "NXDOMAIN"}
	qps := map[string][]float64{}
	for r := range rounds {
		for _, v := range variants {
			for i := range order {
				s := order[(i+r)%2]
				c := servers[s]
				out, err := exec.Command(dnsperf, "-s", c.ip, "-p", "53", "-d", files[v], "-l", strconv.Itoa(seconds), "-c", "10", "-T", "1", "-t", "2", "-D").CombinedOutput()
				if err != nil {
					t.Fatalf("dnsperf: %v\n%s", err, out)
				}
				p := benchkit.ParseDNSPerf(out)
				if p.Completed == 0 {
					t.Fatalf("dnsperf completed no query:\n%s", out)
				}
				qps[s+" "+v] = append(qps[s+" "+v], p.QPS)
				t.Logf("round %d %-8s %-9s %8.0f q/s (lost %.2f%%)", r+1, v, s, p.QPS, p.LostPct)
			}
		}
	}
	m := harness.Scrape(t, servers["signed"].metrics)
	var b strings.Builder
	fmt.Fprintf(&b, "Versions: %s. %d rounds of %d s, dnsperf -c 10 -T 1 -D, load average at the end %s, %s.\n",
		benchkit.Versions(harness.CoreDNSBinary(t), dnsperf), rounds, seconds, benchkit.Loadavg(), time.Now().UTC().Format("2006-01-02 15:04 MST"))
	for _, v := range variants {
		var ratios []float64
		for r := range rounds {
			ratios = append(ratios, qps["signed "+v][r]/qps["unsigned "+v][r])
		}
		fmt.Fprintf(&b, "| %s, signed / unsigned | %.2fx (median of paired rounds; %s against %s q/s) |\n", v,
			benchkit.Median(ratios), benchkit.StatOf(qps["signed "+v]).Format("%.0f"), benchkit.StatOf(qps["unsigned "+v]).Format("%.0f"))
	}
	fmt.Fprintf(&b, "signature cache: %.0f hits, %.0f misses\n", m.Sum("coredns_dnssec_cache_hits_total"), m.Sum("coredns_dnssec_cache_misses_total"))
	t.Log("\n" + b.String())
}
