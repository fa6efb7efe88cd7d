// Command dnsdist measures per-zone forwarding through the splitdns plugin
// side by side with dnsdist, what people run for per-zone routing at scale,
// in one run on one machine:
//
//   - splitdns-R: one coredns server block, `splitdns` with R routes and a
//     default;
//   - dnsdist-R:  dnsdist with one pool per zone, each chosen by a
//     SuffixMatchNodeRule -> PoolAction (R rules), unmatched names to the
//     default pool;
//
// every route, pool and default pointing at the same upstream, the bare
// miekg/dns server of test/bench/bare (it answers every query with a fixed A,
// so that the upstream is not what is measured). dnsperf drives each server
// in turn; each round runs every pair back to back (order swapped every
// round) and the report gives medians with ranges and the medians of the
// per-round ratios splitdns-R/dnsdist-R and R=max/R=1 for each server.
//
//	go run ./test/bench/dnsdist -routes 1,1000 -rounds 5 -seconds 10
//
// Placement on a 2-core machine: the server under test on CPU 0, dnsperf
// and the upstream on CPU 1 (-pin=false lets the scheduler place them).
// Neither side caches: dnsdist has no packet cache unless one is configured,
// and the Corefile has no `cache`.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fleetdns/fleetdns/test/bench/benchkit"
	"github.com/miekg/dns"
)

var (
	flagRoutes      = flag.String("routes", "1,1000", "route (zone) counts to measure, comma list")
	flagRounds      = flag.Int("rounds", 5, "alternating rounds over all pairs")
	flagSeconds     = flag.Int("seconds", 10, "dnsperf run length per server per round")
	flagClients     = flag.Int("clients", 10, "dnsperf -c")
	flagOutstanding = flag.Int("outstanding", 100, "dnsperf -q: queries in flight")
	flagPin         = flag.Bool("pin", true, "pin the server under test to CPU 0, dnsperf and the upstream to CPU 1")
	flagCoreDNS     = flag.String("coredns", "", "coredns binary (default: build ./cmd/coredns)")
	flagDNSDist     = flag.String("dnsdist", "dnsdist", "dnsdist binary (Debian's package)")
	flagNet         = flag.String("net", "127.0.79", "first three octets of the loopback addresses to use")
	flagOut         = flag.String("out", "", "append the markdown report to this file")
)

// queryZones is how many zones the query names spread over: names in zones
// a configuration does not route go to its default (the same upstream).
const queryZones = 1000

// cleanups run at the end of main and on a fatal error, last first: the
// servers are stopped and the work folder removed either way.
var cleanups []func()

func atExit(f func()) { cleanups = append(cleanups, f) }

func runAtExit() {
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	cleanups = nil
}

func fatalf(format string, args ...any) {
	log.Printf(format, args...)
	runAtExit()
	os.Exit(1)
}

// server is one contestant listening on its own loopback address, port 53.
type server struct {
	name   string
	kind   string // splitdns or dnsdist
	routes int
	ip     string
	cmd    *exec.Cmd

	qps, usPerQ, lost []float64
}

func main() {
	flag.Parse()
	log.SetFlags(0)
	work, err := os.MkdirTemp("", "fleetdns-bench-dnsdist-")
	if err != nil {
		fatalf("%v", err)
	}
	atExit(func() { os.RemoveAll(work) })
	benchkit.StopAllOnSignal(func() { os.RemoveAll(work) })
	defer runAtExit()
	root, err := benchkit.ModuleRoot()
	if err != nil {
		fatalf("%v", err)
	}

	bin := *flagCoreDNS
	if bin == "" {
		bin = filepath.Join(work, "coredns")
		build(root, bin, "./cmd/coredns")
	}
	bare := filepath.Join(work, "bare")
	build(root, bare, "./test/bench/bare")
	dnsdist, err := exec.LookPath(*flagDNSDist)
	if err != nil {
		fatalf("dnsdist is not installed (Debian package dnsdist; scripts/test-deps.sh installs it): %v", err)
	}
	version, _ := exec.Command(dnsdist, "--version").Output()

	var routes []int
	for _, s := range strings.Split(*flagRoutes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fatalf("-routes: %q", s)
		}
		routes = append(routes, n)
	}
	serverCPU, loadCPU := "", ""
	if *flagPin && runtime.NumCPU() >= 2 {
		serverCPU, loadCPU = "0", "1"
	}

	upstream := *flagNet + ".1"
	up := start(work, "upstream", loadCPU, bare, "-addr", upstream+":53")
	atExit(func() { benchkit.Stop(up) })
	waitAnswer(work, "upstream", upstream)

	var servers []*server
	atExit(func() {
		for _, s := range servers {
			benchkit.Stop(s.cmd)
		}
	})
	next := 2
	for _, r := range routes {
		for _, kind := range []string{"splitdns", "dnsdist"} {
			s := &server{name: fmt.Sprintf("%s-%d", kind, r), kind: kind, routes: r, ip: fmt.Sprintf("%s.%d", *flagNet, next)}
			next++
			switch kind {
			case "splitdns":
				cf := filepath.Join(work, "Corefile."+s.name)
				writeFile(cf, corefile(r, s.ip, upstream))
				s.cmd = start(work, s.name, serverCPU, bin, "-conf", cf)
			case "dnsdist":
				conf := filepath.Join(work, s.name+".conf")
				writeFile(conf, dnsdistConf(r, s.ip, upstream))
				s.cmd = start(work, s.name, serverCPU, dnsdist, "--supervised", "--disable-syslog", "-C", conf)
			}
			servers = append(servers, s)
		}
	}
	queries := filepath.Join(work, "queries.txt")
	writeQueries(queries)
	for _, s := range servers {
		waitAnswer(work, s.name, s.ip)
		checkRouting(s)
		dnsperf(s, queries, loadCPU, 2) // warm-up: upstream sockets, health checks, Go's heap
	}

	by := map[string]*server{}
	for _, s := range servers {
		by[s.name] = s
	}
	// pair is A/B measured back to back each round.
	type pair struct {
		a, b   *server
		ratios []float64 // q/s A over q/s B, per round
		cpu    []float64 // CPU/query B over CPU/query A, per round
	}
	var pairs []*pair
	for _, r := range routes {
		pairs = append(pairs, &pair{a: by[fmt.Sprintf("splitdns-%d", r)], b: by[fmt.Sprintf("dnsdist-%d", r)]})
	}
	lo, hi := slices.Min(routes), slices.Max(routes)
	// Scaling ratios come from the same rounds: R=hi and R=lo of one kind
	// ran within minutes of each other.
	type scaling struct {
		kind   string
		ratios []float64
	}
	scalings := []*scaling{{kind: "splitdns"}, {kind: "dnsdist"}}

	loads := []string{benchkit.Loadavg()}
	for round := range *flagRounds {
		got := map[string]float64{}
		for i := range pairs {
			p := pairs[(i+round)%len(pairs)]
			first, second := p.a, p.b
			if round%2 == 1 {
				first, second = p.b, p.a
			}
			for _, s := range []*server{first, second} {
				q, us, lost := dnsperf(s, queries, loadCPU, *flagSeconds)
				s.qps, s.usPerQ, s.lost = append(s.qps, q), append(s.usPerQ, us), append(s.lost, lost)
				got[s.name] = q
				log.Printf("round %d %-14s %8.0f q/s %6.1f us CPU/query lost %.2f%% (load %s)", round+1, s.name, q, us, lost, benchkit.Loadavg())
			}
			p.ratios = append(p.ratios, p.a.qps[round]/p.b.qps[round])
			p.cpu = append(p.cpu, p.b.usPerQ[round]/p.a.usPerQ[round])
		}
		if hi > lo {
			for _, sc := range scalings {
				sc.ratios = append(sc.ratios, got[fmt.Sprintf("%s-%d", sc.kind, hi)]/got[fmt.Sprintf("%s-%d", sc.kind, lo)])
			}
		}
		loads = append(loads, benchkit.Loadavg())
	}

	var b strings.Builder
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "\n### splitdns vs dnsdist, per-zone forwarding (%s)\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "Versions: %s.\n\n", benchkit.Versions(bin, "dnsdist", "dnsperf"))
	fmt.Fprintf(&b, "Machine: %s, %d CPUs, %s; %s. Load average (1/5/15 min) at each round boundary: %s. Server under test pinned to CPU %q, dnsperf (`-c %d -q %d -T 1`, %d s per run) and the upstream (test/bench/bare) to CPU %q; %d rounds, each pair back to back, order swapped every round. Queries: 20,000 A names, 90%% under zone-0.corp ... zone-%d.corp, 10%% outside every zone (to the default). dnsdist: one newServer in every pool, R rules `SuffixMatchNodeRule(zone) -> PoolAction(zone)`, no packet cache. CPU/query: the server's utime+stime (/proc/<pid>/stat, all threads) over queries completed.\n\n",
		host, runtime.NumCPU(), runtime.Version(), strings.TrimSpace(firstLine(string(version))), strings.Join(loads, " | "),
		serverCPU, *flagClients, *flagOutstanding, *flagSeconds, loadCPU, *flagRounds, queryZones-1)
	fmt.Fprintf(&b, "Command: `go run ./test/bench/dnsdist -routes %s -rounds %d -seconds %d -clients %d -outstanding %d`\n\n",
		*flagRoutes, *flagRounds, *flagSeconds, *flagClients, *flagOutstanding)
	b.WriteString("| server | q/s median (min-max) | CPU us/query median (min-max) | lost % max |\n|---|---|---|---:|\n")
	for _, s := range servers {
		fmt.Fprintf(&b, "| %s | %s | %s | %.2f |\n", s.name, statf(s.qps, "%.0f"), statf(s.usPerQ, "%.1f"), slices.Max(s.lost))
	}
	b.WriteString("\n| ratio | per-round median (min-max) | CPU/query inverse ratio, median |\n|---|---|---|\n")
	for _, p := range pairs {
		fmt.Fprintf(&b, "| q/s %s / %s | %s | %.2f |\n", p.a.name, p.b.name, statf(p.ratios, "%.2f"), benchkit.Median(p.cpu))
	}
	if hi > lo {
		for _, sc := range scalings {
			fmt.Fprintf(&b, "| q/s %s-%d / %s-%d | %s | |\n", sc.kind, hi, sc.kind, lo, statf(sc.ratios, "%.2f"))
		}
	}
	fmt.Print(b.String())
	if *flagOut != "" {
		f, err := os.OpenFile(*flagOut, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			fatalf("%v", err)
		}
		defer f.Close()
		f.WriteString(b.String())
	}
}

// corefile routes zone-0.corp ... zone-(R-1).corp and the default to upstream.
func corefile(routes int, ip, upstream string) string {
	var b strings.Builder
	fmt.Fprintf(&b, ".:53 {\n    bind %s\n    splitdns {\n", ip)
	for i := range routes {
		fmt.Fprintf(&b, "        route zone-%d.corp %s:53\n", i, upstream)
	}
	fmt.Fprintf(&b, "        default %s:53\n    }\n}\n", upstream)
	return b.String()
}

// dnsdistConf is the dnsdist configuration for the same routing: one pool
// per zone chosen by a suffix rule, the default pool for everything else,
// one backend (the upstream) in every pool.
func dnsdistConf(routes int, ip, upstream string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "setSecurityPollSuffix(\"\")\nsetLocal(%q)\n", ip+":53")
	pools := []string{`""`}
	for i := range routes {
		pools = append(pools, fmt.Sprintf(`"zone-%d"`, i))
	}
	fmt.Fprintf(&b, "newServer({address=%q, pool={%s}})\n", upstream+":53", strings.Join(pools, ", "))
	for i := range routes {
		fmt.Fprintf(&b, "do local z = newSuffixMatchNode(); z:add(\"zone-%d.corp.\"); addAction(SuffixMatchNodeRule(z), PoolAction(\"zone-%d\")) end\n", i, i)
	}
	return b.String()
}

// writeQueries writes 20,000 A queries: nine in ten two labels under
// zone-0.corp ... zone-999.corp, one in ten outside every zone.
func writeQueries(path string) {
	var b strings.Builder
	for i := range 20000 {
		if i%10 == 9 {
			fmt.Fprintf(&b, "host-%d.example.com A\n", i)
			continue
		}
		fmt.Fprintf(&b, "host-%d.svc.zone-%d.corp A\n", i, i%queryZones)
	}
	writeFile(path, b.String())
}

// checkRouting asks one name in the last routed zone, one in an unrouted
// zone and one outside every zone: each must come back with the upstream's
// fixed answer, or the comparison would be of different work.
func checkRouting(s *server) {
	for _, name := range []string{
		fmt.Sprintf("a.svc.zone-%d.corp.", s.routes-1),
		fmt.Sprintf("a.svc.zone-%d.corp.", s.routes),
		"a.example.com.",
	} {
		r, err := ask(s.ip, name)
		if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			fatalf("%s: %s: %v %v", s.name, name, r, err)
		}
		if a, ok := r.Answer[0].(*dns.A); !ok || !a.A.Equal(net.ParseIP("192.0.2.1")) {
			fatalf("%s: %s answered %v, not the upstream's 192.0.2.1", s.name, name, r.Answer[0])
		}
	}
}

func ask(ip, name string) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	c := dns.Client{Timeout: 500 * time.Millisecond}
	r, _, err := c.Exchange(m, net.JoinHostPort(ip, "53"))
	return r, err
}

// waitAnswer waits until the server named name answers on ip:53, and stops
// the run with its log (dir/name.log) if it does not within 60 s.
func waitAnswer(dir, name, ip string) {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if r, err := ask(ip, "probe.zone-0.corp."); err == nil && r.Rcode == dns.RcodeSuccess && len(r.Answer) > 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	b, _ := os.ReadFile(filepath.Join(dir, name+".log"))
	fatalf("%s on %s:53 does not answer within 60 s; its log:\n%s", name, ip, b)
}

// dnsperf runs one load run against s and returns q/s, the server's CPU
// microseconds per completed query and the lost percentage.
func dnsperf(s *server, queries, cpu string, seconds int) (qps, usPerQ, lost float64) {
	argv := benchkit.Pinned(cpu, "dnsperf", "-s", s.ip, "-d", queries, "-l", strconv.Itoa(seconds),
		"-c", strconv.Itoa(*flagClients), "-q", strconv.Itoa(*flagOutstanding), "-T", "1", "-t", "2")
	before := cpuTicks(s.cmd.Process.Pid)
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	after := cpuTicks(s.cmd.Process.Pid)
	p := benchkit.ParseDNSPerf(out)
	if p.QPS == 0 || p.Completed == 0 {
		fatalf("%s: dnsperf completed nothing:\n%s", s.name, out)
	}
	return p.QPS, p.USPerQuery(after - before), p.LostPct
}

// cpuTicks is user+system time of pid (all its threads) in clock ticks.
func cpuTicks(pid int) int64 {
	t, err := benchkit.CPUTicks(pid)
	if err != nil {
		fatalf("%v", err)
	}
	return t
}

// statf is "median (min-max)" with format for each number.
func statf(v []float64, format string) string { return benchkit.StatOf(v).Format(format) }

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// start runs argv (pinned to cpu when set) in its own process group, its
// output in dir/name.log. taskset execs the program: the pid is its own.
func start(dir, name, cpu, bin string, args ...string) *exec.Cmd {
	cmd, _, err := benchkit.Command(dir, filepath.Join(dir, name+".log"), cpu, append([]string{bin}, args...)...)
	if err != nil {
		fatalf("%v", err)
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := benchkit.Start(cmd); err != nil {
		fatalf("%s: %v", name, err)
	}
	return cmd
}

func writeFile(path, content string) {
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		fatalf("%v", err)
	}
}

func build(root, out, pkg string) {
	cmd := benchkit.BuildCmd(root, out, pkg)
	cmd.Env = append(cmd.Env, "GOTOOLCHAIN=local")
	if b, err := cmd.CombinedOutput(); err != nil {
		fatalf("go build %s: %v\n%s", pkg, err, b)
	}
}
