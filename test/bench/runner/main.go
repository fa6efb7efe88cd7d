// Command runner measures fleetdns's authoritative serving side by side with
// the servers users would otherwise run, on one machine in one run: each
// server on its own loopback address, driven in turn by dnsperf, alternating
// A/B over several rounds, reporting medians and ratios (never a lone time).
//
//	go run ./test/bench/runner -records 10000 -rounds 5 -seconds 10
//
// Placement on a 2-core machine: every server is pinned to CPU 0 and dnsperf
// to CPU 1 (-pin=false to let the scheduler place them), so the load
// generator does not steal the server's core.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/fleetdns/fleetdns/test/bench/benchkit"
)

var (
	flagRecords = flag.Int("records", 10000, "hosts in the zone (each with A; every 2nd AAAA; every 10th a CNAME alias)")
	flagRounds  = flag.Int("rounds", 5, "alternating rounds over all servers")
	flagSeconds = flag.Int("seconds", 10, "dnsperf run length per server per round")
	flagClients = flag.Int("clients", 10, "dnsperf -c")
	flagPin     = flag.Bool("pin", true, "pin servers to CPU 0 and dnsperf to CPU 1")
	flagCoreDNS = flag.String("coredns", "", "coredns binary (default: build ./cmd/coredns)")
	flagOnly    = flag.String("only", "", "comma list of servers to run (default all)")
	flagOut     = flag.String("out", "", "append the markdown report to this file (default stdout only)")
	flagResperf = flag.Int("resperf", 0, "after the dnsperf rounds, ramp resperf up to this many q/s on the hits file, once per round and server (0: no resperf)")
	flagRamp    = flag.Int("ramp", 10, "resperf ramp-up time in seconds")
)

type result struct {
	qps       float64
	usPerQ    float64 // server CPU (user+sys) per answered query, microseconds
	lost      float64 // fraction of queries lost
	latencyMs float64
}

func main() {
	flag.Parse()
	log.SetFlags(0)
	root, err := benchkit.ModuleRoot()
	if err != nil {
		log.Fatal(err)
	}
	work, err := os.MkdirTemp("", "fleetdns-bench-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(work)
	benchkit.StopAllOnSignal(func() { os.RemoveAll(work) })

	bin := *flagCoreDNS
	if bin == "" {
		bin = filepath.Join(work, "coredns")
		build(root, bin, "./cmd/coredns")
	}
	bare := filepath.Join(work, "bare")
	build(root, bare, "./test/bench/bare")

	d, err := genDataset(work, *flagRecords)
	if err != nil {
		log.Fatal(err)
	}
	serverCPU, loadCPU := "", ""
	if *flagPin && runtime.NumCPU() >= 2 {
		serverCPU, loadCPU = "0", "1"
	}
	probe := hostName(0)

	type contestant struct {
		name  string
		start func(addr string, port int) (*server, error)
		mix   bool // can answer the mixed query file authoritatively
	}
	all := []contestant{
		{"k8scrd", func(a string, p int) (*server, error) {
			return corednsServer("k8scrd", a, p, bin, work, serverCPU, probe,
				fmt.Sprintf("    k8scrd {\n        directory %s\n    }\n", d.ManifestDir))
		}, true},
		{"file", func(a string, p int) (*server, error) {
			return corednsServer("file", a, p, bin, work, serverCPU, probe, fmt.Sprintf("    file %s\n", d.ZoneFile))
		}, true},
		{"hosts", func(a string, p int) (*server, error) {
			return corednsServer("hosts", a, p, bin, work, serverCPU, probe, fmt.Sprintf("    hosts %s {\n        no_reverse\n    }\n", d.HostsFile))
		}, false},
		{"nsd", func(a string, p int) (*server, error) { return nsdServer(a, p, d, work, serverCPU, probe) }, true},
		{"knot", func(a string, p int) (*server, error) { return knotServer(a, p, d, work, serverCPU, probe) }, true},
		{"bare-miekg", func(a string, p int) (*server, error) { return bareServer(a, p, bare, work, serverCPU, probe) }, false},
	}
	only := map[string]bool{}
	for _, n := range strings.Split(*flagOnly, ",") {
		if n != "" {
			only[n] = true
		}
	}

	var servers []*server
	mixable := map[string]bool{}
	for i, c := range all {
		if len(only) > 0 && !only[c.name] {
			continue
		}
		s, err := c.start(fmt.Sprintf("127.0.%d.%d", 77, 10+i), 5353)
		if err != nil {
			log.Printf("skipping %s: %v", c.name, err)
			continue
		}
		defer s.stop()
		servers = append(servers, s)
		mixable[s.Name] = c.mix
		log.Printf("%s ready in %v, RSS %d MiB", s.Name, s.ready.Round(time.Millisecond), s.rssKiB()/1024)
	}

	type key struct{ server, mix string }
	results := map[key][]result{}
	mixes := []struct{ name, file string }{{"hits", d.Hits}, {"mix", d.Mix}}
	for r := 0; r < *flagRounds; r++ {
		for _, q := range mixes {
			// Rotate the order each round so no server always runs first.
			for i := range servers {
				s := servers[(i+r)%len(servers)]
				if q.name == "mix" && !mixable[s.Name] {
					continue
				}
				res, err := runDNSPerf(s, q.file, loadCPU)
				if err != nil {
					log.Fatalf("%s/%s: %v", s.Name, q.name, err)
				}
				log.Printf("round %d %-10s %-5s %8.0f q/s %6.1f us/q lost %.2f%%", r+1, s.Name, q.name, res.qps, res.usPerQ, res.lost*100)
				results[key{s.Name, q.name}] = append(results[key{s.Name, q.name}], res)
			}
		}
	}

	// resperf offers an open-loop rate that rises until the server falls
	// behind: the peak response rate is the server's maximum, as opposed to
	// dnsperf's closed loop (a fixed number of queries outstanding).
	peaks := map[string][]benchkit.Resperf{}
	for r := 0; *flagResperf > 0 && r < *flagRounds; r++ {
		for i := range servers {
			s := servers[(i+r)%len(servers)]
			p, err := runResperf(s, d.Hits, loadCPU, work)
			if err != nil {
				log.Fatalf("%s/resperf: %v", s.Name, err)
			}
			log.Printf("round %d %-10s resperf peak %8.0f q/s, lost %.2f%% at that point", r+1, s.Name, p.MaxQPS, p.LostPct)
			peaks[s.Name] = append(peaks[s.Name], p)
		}
	}

	var b strings.Builder
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "\n### Authoritative serving, %d hosts (%s)\n\n", *flagRecords, time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "Versions: %s.\n\n", benchkit.Versions(bin, "nsd", "knotd", "dnsperf", "resperf"))
	fmt.Fprintf(&b, "Machine: %s, %d CPUs, %s. Servers pinned to CPU %q, dnsperf to CPU %q. dnsperf -c %d -T 1, %d s per run, %d alternating rounds.\n\n",
		host, runtime.NumCPU(), runtime.Version(), serverCPU, loadCPU, *flagClients, *flagSeconds, *flagRounds)
	resperfFlags := ""
	if *flagResperf > 0 {
		resperfFlags = fmt.Sprintf(" -resperf %d -ramp %d", *flagResperf, *flagRamp)
	}
	fmt.Fprintf(&b, "Command: `go run ./test/bench/runner -records %d -rounds %d -seconds %d%s`; load average at the end %s\n\n", *flagRecords, *flagRounds, *flagSeconds, resperfFlags, benchkit.Loadavg())
	for _, q := range mixes {
		base := median(results[key{"k8scrd", q.name}], func(r result) float64 { return r.qps })
		fmt.Fprintf(&b, "Query mix **%s** (k8scrd / server: the median of the per-round ratios, each round measuring both back to back):\n\n| server | q/s median (min-max) | k8scrd / server q/s | server / k8scrd CPU per query | CPU us/query median | lost | ready | RSS MiB |\n|---|---|---|---|---|---|---|---|\n", q.name)
		for _, s := range servers {
			rs := results[key{s.Name, q.name}]
			if len(rs) == 0 {
				continue
			}
			med := median(rs, func(r result) float64 { return r.qps })
			qs := benchkit.StatOf(column(rs, func(r result) float64 { return r.qps }))
			lo, hi := qs.Min, qs.Max
			ratio, cpuRatio := "-", "-"
			if ks := results[key{"k8scrd", q.name}]; base > 0 && s.Name != "k8scrd" && len(ks) == len(rs) {
				var qr, cr []float64
				for i := range rs {
					qr = append(qr, ks[i].qps/rs[i].qps)
					if ks[i].usPerQ > 0 {
						cr = append(cr, rs[i].usPerQ/ks[i].usPerQ)
					}
				}
				ratio = fmt.Sprintf("%.2f", benchkit.Median(qr))
				if len(cr) > 0 {
					cpuRatio = fmt.Sprintf("%.2f", benchkit.Median(cr))
				}
			}
			fmt.Fprintf(&b, "| %s | %.0f (%.0f-%.0f) | %s | %s | %.1f | %.2f%% | %v | %d |\n", s.Name, med, lo, hi, ratio, cpuRatio,
				median(rs, func(r result) float64 { return r.usPerQ }), 100*median(rs, func(r result) float64 { return r.lost }),
				s.ready.Round(time.Millisecond), s.rssKiB()/1024)
		}
		b.WriteString("\n")
	}
	if len(peaks) > 0 {
		fmt.Fprintf(&b, "Maximum rate, hits (`resperf -m %d -r %d -c 0 -t 1 -F 0 -R`, pinned as above, once per round; the peak response rate of any 0.5 s interval while the offered rate ramped up, and the loss at that point):\n\n", *flagResperf, *flagRamp)
		b.WriteString("| server | peak q/s median (min-max) | k8scrd / server, paired | lost at the peak, median |\n|---|---|---|---|\n")
		ks := peaks["k8scrd"]
		for _, s := range servers {
			ps := peaks[s.Name]
			qs := make([]float64, len(ps))
			lost := make([]float64, len(ps))
			var paired []float64
			for i, p := range ps {
				qs[i], lost[i] = p.MaxQPS, p.LostPct
				if len(ks) == len(ps) && p.MaxQPS > 0 {
					paired = append(paired, ks[i].MaxQPS/p.MaxQPS)
				}
			}
			ratio := "-"
			if s.Name != "k8scrd" && len(paired) > 0 {
				ratio = fmt.Sprintf("%.2f", benchkit.Median(paired))
			}
			st := benchkit.StatOf(qs)
			fmt.Fprintf(&b, "| %s | %.0f (%.0f-%.0f) | %s | %.1f%% |\n", s.Name, st.Med, st.Min, st.Max, ratio, benchkit.Median(lost))
		}
		b.WriteString("\n")
	}
	fmt.Print(b.String())
	if *flagOut != "" {
		f, err := os.OpenFile(*flagOut, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			log.Fatal(err)
		}
		f.WriteString(b.String())
		f.Close()
	}
}

func runDNSPerf(s *server, queries, cpus string) (result, error) {
	before, err := s.cpuTicks()
	if err != nil {
		return result{}, err
	}
	argv := benchkit.Pinned(cpus, "dnsperf", "-s", s.Addr, "-p", strconv.Itoa(s.Port), "-d", queries,
		"-l", strconv.Itoa(*flagSeconds), "-c", strconv.Itoa(*flagClients), "-T", "1", "-t", "2")
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return result{}, fmt.Errorf("dnsperf: %v\n%s", err, out)
	}
	after, err := s.cpuTicks()
	if err != nil {
		return result{}, err
	}
	p := benchkit.ParseDNSPerf(out)
	res := result{qps: p.QPS, usPerQ: p.USPerQuery(after - before), lost: p.LostPct / 100, latencyMs: p.AvgLatency * 1000}
	if res.qps == 0 {
		return res, fmt.Errorf("no rate in dnsperf output:\n%s", out)
	}
	return res, nil
}

// runResperf ramps the offered rate up to -resperf q/s over -ramp seconds.
// A query unanswered after 1 s is lost. -F 0: resperf itself falling behind
// the ramp (its CPU is shared) does not end the run; 65,536 queries
// outstanding does (the server is far past its maximum by then).
func runResperf(s *server, queries, cpus, work string) (benchkit.Resperf, error) {
	argv := benchkit.Pinned(cpus, "resperf", "-s", s.Addr, "-p", strconv.Itoa(s.Port), "-d", queries, "-R",
		"-m", strconv.Itoa(*flagResperf), "-r", strconv.Itoa(*flagRamp), "-c", "0", "-t", "1", "-F", "0",
		"-P", filepath.Join(work, "resperf-"+s.Name+".gnuplot"))
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return benchkit.Resperf{}, fmt.Errorf("resperf: %v\n%s", err, out)
	}
	p := benchkit.ParseResperf(out)
	if p.MaxQPS == 0 {
		return p, fmt.Errorf("no maximum throughput in resperf output:\n%s", out)
	}
	return p, nil
}

// column is f of every result.
func column(rs []result, f func(result) float64) []float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	return v
}

func median(rs []result, f func(result) float64) float64 { return benchkit.Median(column(rs, f)) }

func build(root, out, pkg string) {
	cmd := benchkit.BuildCmd(root, out, pkg, "-ldflags", "-s -w")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		log.Fatalf("go build %s: %v", pkg, err)
	}
}
