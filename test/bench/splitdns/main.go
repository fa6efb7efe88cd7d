// Command splitdns measures forwarding through the splitdns plugin side by
// side with what users run without it, in one run on one machine:
//
//   - splitdns-R: one server block, `splitdns` with R routes and a default;
//   - forward-R:  stock CoreDNS, one server block with `forward` per zone
//     (R of them) plus a "." block, the hand-written sidecar;
//
// every route and the default pointing at the same upstream (the bare
// miekg/dns server from test/bench/bare, so that the upstream is not what is
// measured). dnsperf drives each server in turn, alternating A/B over several
// rounds; the report gives medians and the ratios splitdns-R/forward-R and
// splitdns-1000/splitdns-1.
//
//	go run ./test/bench/splitdns -routes 1,10,1000 -rounds 5 -seconds 10
//
// Placement on a 2-core machine: the server under test is pinned to CPU 0,
// dnsperf and the upstream to CPU 1 (-pin=false to let the scheduler place them).
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
	flagRoutes      = flag.String("routes", "1,10,1000", "route counts to measure (comma list)")
	flagRounds      = flag.Int("rounds", 5, "alternating rounds over all servers")
	flagSeconds     = flag.Int("seconds", 10, "dnsperf run length per server per round")
	flagClients     = flag.Int("clients", 20, "dnsperf -c")
	flagOutstanding = flag.Int("outstanding", 100, "dnsperf -q: queries in flight, enough to keep the server busy")
	flagPin         = flag.Bool("pin", true, "pin the server under test to CPU 0, dnsperf and the upstream to CPU 1")
	flagCoreDNS     = flag.String("coredns", "", "coredns binary (default: build ./cmd/coredns)")
	flagBase        = flag.String("net", "127.0.77", "first three octets of the loopback addresses to use")
	flagOut         = flag.String("out", "", "append the markdown report to this file")
	flagMode        = flag.String("mode", "concurrent", "concurrent: A and B loaded at the same time, sharing CPU 0 (external load hits both alike); sequential: back to back")
)

// queryZones is how many zones the query names spread over; names in zones
// a configuration does not route go to its default route (same upstream).
const queryZones = 1000

type server struct {
	name   string
	addr   string // ip
	proc   *exec.Cmd
	qps    []float64
	lost   []float64
	usPerQ []float64 // server CPU (user+sys) per answered query, microseconds
	route  int
}

// pair is one A/B comparison; ratios are per round, A then B back to back
// (order swapped every round), so that load drifting on a shared machine
// hits both alike.
type pair struct {
	a, b   *server
	goal   float64
	ratios []float64
}

var ()

func main() {
	flag.Parse()
	log.SetFlags(0)
	root := moduleRoot()
	work, err := os.MkdirTemp("", "fleetdns-bench-splitdns-")
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
	versions = benchkit.Versions(bin, "dnsperf")
	bare := filepath.Join(work, "bare")
	build(root, bare, "./test/bench/bare")

	var routes []int
	for _, s := range strings.Split(*flagRoutes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			log.Fatalf("-routes: %q", s)
		}
		routes = append(routes, n)
	}

	upstream := *flagBase + ".1"
	up := start(work, "upstream", "1", bare, "-addr", upstream+":53")
	defer stop(up)

	var servers []*server
	next := 2
	for _, r := range routes {
		for _, kind := range []string{"splitdns", "forward"} {
			s := &server{name: fmt.Sprintf("%s-%d", kind, r), addr: fmt.Sprintf("%s.%d", *flagBase, next), route: r}
			next++
			cf := filepath.Join(work, "Corefile."+s.name)
			if err := os.WriteFile(cf, []byte(corefile(kind, r, s.addr, upstream)), 0o644); err != nil {
				log.Fatal(err)
			}
			s.proc = start(work, s.name, "0", bin, "-conf", cf)
			servers = append(servers, s)
		}
	}
	defer func() {
		for _, s := range servers {
			stop(s.proc)
		}
	}()

	queries := filepath.Join(work, "queries.txt")
	writeQueries(queries)
	for _, s := range servers {
		waitAnswer(s)
		_, _, _ = dnsperf(s, queries, 2) // warm-up: connections to the upstream, caches
	}

	by := map[string]*server{}
	for _, s := range servers {
		by[s.name] = s
	}
	var pairs []*pair
	for _, r := range routes {
		pairs = append(pairs, &pair{a: by[fmt.Sprintf("splitdns-%d", r)], b: by[fmt.Sprintf("forward-%d", r)], goal: 1.0})
	}
	if one, ok := by["splitdns-1"]; ok {
		for _, r := range routes {
			if r != 1 {
				pairs = append(pairs, &pair{a: by[fmt.Sprintf("splitdns-%d", r)], b: one, goal: 0.95})
			}
		}
	}
	measure := func(s *server, round int) float64 {
		cpu0 := cpuTime(s.proc.Process.Pid)
		qps, done, lost := dnsperf(s, queries, *flagSeconds)
		us := float64(cpuTime(s.proc.Process.Pid)-cpu0) / float64(time.Microsecond) / max(done, 1)
		s.qps = append(s.qps, qps)
		s.lost = append(s.lost, lost)
		s.usPerQ = append(s.usPerQ, us)
		log.Printf("round %d %-16s %10.0f qps  %6.1f us CPU/query  lost %.2f%%", round+1, s.name, qps, us, lost)
		return qps
	}
	for round := range *flagRounds {
		for _, p := range pairs {
			var qa, qb float64
			switch {
			case *flagMode == "concurrent":
				done := make(chan struct{})
				go func() { qb = measure(p.b, round); close(done) }()
				qa = measure(p.a, round)
				<-done
			case round%2 == 0:
				qa, qb = measure(p.a, round), measure(p.b, round)
			default:
				qb, qa = measure(p.b, round), measure(p.a, round)
			}
			p.ratios = append(p.ratios, qa/qb)
		}
	}
	report(servers, pairs)
}

// cpuTime is the user+system CPU time of pid so far.
func cpuTime(pid int) time.Duration {
	ticks, err := benchkit.CPUTicks(pid)
	if err != nil {
		return 0
	}
	return time.Duration(ticks) * 10 * time.Millisecond // USER_HZ=100
}

func corefile(kind string, routes int, ip, upstream string) string {
	var b strings.Builder
	switch kind {
	case "splitdns":
		fmt.Fprintf(&b, ".:53 {\n    bind %s\n    splitdns {\n", ip)
		for i := range routes {
			fmt.Fprintf(&b, "        route zone-%d.corp %s:53\n", i, upstream)
		}
		fmt.Fprintf(&b, "        default %s:53\n    }\n}\n", upstream)
	case "forward":
		for i := range routes {
			fmt.Fprintf(&b, "zone-%d.corp:53 {\n    bind %s\n    forward . %s:53\n}\n", i, ip, upstream)
		}
		fmt.Fprintf(&b, ".:53 {\n    bind %s\n    forward . %s:53\n}\n", ip, upstream)
	}
	return b.String()
}

// writeQueries writes 20,000 A queries: nine in ten under zone-0.corp ...
// zone-999.corp (two labels below the zone), one in ten outside every zone.
func writeQueries(path string) {
	var b strings.Builder
	for i := range 20000 {
		if i%10 == 9 {
			fmt.Fprintf(&b, "host-%d.example.com A\n", i)
			continue
		}
		fmt.Fprintf(&b, "host-%d.svc.zone-%d.corp A\n", i, i%queryZones)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		log.Fatal(err)
	}
}

func dnsperf(s *server, queries string, seconds int) (qps, done, lost float64) {
	argv := []string{"dnsperf", "-s", s.addr, "-d", queries, "-l", strconv.Itoa(seconds), "-c", strconv.Itoa(*flagClients), "-q", strconv.Itoa(*flagOutstanding), "-T", "1", "-t", "2"}
	if *flagPin {
		argv = append([]string{"taskset", "-c", "1"}, argv...)
	}
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		log.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	r := benchkit.ParseDNSPerf(out)
	if r.QPS == 0 {
		log.Fatalf("no rate in dnsperf output:\n%s", out)
	}
	return r.QPS, r.Completed, r.LostPct
}

func waitAnswer(s *server) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		out, err := exec.Command("dig", "+short", "+time=1", "+tries=1", "@"+s.addr, "host-1.svc.zone-0.corp", "A").Output()
		if err == nil && strings.TrimSpace(string(out)) != "" {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	log.Fatalf("%s on %s does not answer", s.name, s.addr)
}

// versions of the coredns measured and of dnsperf, for the report.
var versions string

func report(servers []*server, pairs []*pair) {
	var b strings.Builder
	fmt.Fprintf(&b, "\n### splitdns vs stock forward (%s)\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, "Versions: %s. %d CPUs, %s; load average at the end %s.\n\n", versions, runtime.NumCPU(), runtime.Version(), benchkit.Loadavg())
	pin := "no pinning"
	if *flagPin {
		pin = "server under test on CPU 0, dnsperf and upstream on CPU 1"
	}
	fmt.Fprintf(&b, "Command: `go run ./test/bench/splitdns -routes %s -rounds %d -seconds %d -clients %d -outstanding %d -mode %s`; %s; upstream: test/bench/bare; 20,000 A query names, 90%% under %d zones, 10%% outside every zone. Mode %s (concurrent: A and B under load at the same time, both servers on CPU 0; sequential: back to back); a ratio is the median of per-round ratios.\n\n",
		*flagRoutes, *flagRounds, *flagSeconds, *flagClients, *flagOutstanding, *flagMode, pin, queryZones, *flagMode)
	b.WriteString("| server | median qps | median CPU us/query | runs (qps) | max lost |\n|---|---:|---:|---|---:|\n")
	for _, s := range servers {
		runs := make([]string, len(s.qps))
		for i, q := range s.qps {
			runs[i] = fmt.Sprintf("%.0f", q)
		}
		maxLost := 0.0
		for _, l := range s.lost {
			maxLost = max(maxLost, l)
		}
		fmt.Fprintf(&b, "| %s | %.0f | %.1f | %s | %.2f%% |\n", s.name, benchkit.Median(s.qps), benchkit.Median(s.usPerQ), strings.Join(runs, ", "), maxLost)
	}
	b.WriteString("\n| ratio A/B (qps) | median | per round | CPU/query B/A | goal |\n|---|---:|---|---:|---:|\n")
	for _, p := range pairs {
		rs := make([]string, len(p.ratios))
		for i, r := range p.ratios {
			rs[i] = fmt.Sprintf("%.2f", r)
		}
		fmt.Fprintf(&b, "| %s / %s | %.3f | %s | %.3f | >= %.2f |\n", p.a.name, p.b.name, benchkit.Median(p.ratios), strings.Join(rs, ", "), benchkit.Median(p.b.usPerQ)/benchkit.Median(p.a.usPerQ), p.goal)
	}
	fmt.Print(b.String())
	if *flagOut != "" {
		f, err := os.OpenFile(*flagOut, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			log.Fatal(err)
		}
		defer f.Close()
		f.WriteString(b.String())
	}
}

func start(dir, name, cpu, bin string, args ...string) *exec.Cmd {
	if !*flagPin {
		cpu = ""
	}
	cmd, _, err := benchkit.Command(dir, filepath.Join(dir, name+".log"), cpu, append([]string{bin}, args...)...)
	if err != nil {
		log.Fatal(err)
	}
	if err := benchkit.Start(cmd); err != nil {
		log.Fatalf("%s: %v", name, err)
	}
	return cmd
}

func stop(cmd *exec.Cmd) { benchkit.Stop(cmd) }

func build(root, out, pkg string) {
	cmd := benchkit.BuildCmd(root, out, pkg)
	cmd.Env = append(cmd.Env, "GOTOOLCHAIN=local")
	if b, err := cmd.CombinedOutput(); err != nil {
		log.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
}

func moduleRoot() string {
	root, err := benchkit.ModuleRoot()
	if err != nil {
		log.Fatal(err)
	}
	return root
}
