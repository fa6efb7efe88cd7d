package scale_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/test/bench/benchkit"
	"github.com/fleetdns/fleetdns/test/harness"
	"github.com/miekg/dns"
)

// zone is the zone every benchmark server is authoritative for.
const zone = "scale.bench."

// perObject is how many endpoints each DNSEndpoint object carries.
const perObject = 100

// needBench skips the test unless FLEETDNS_BENCH=1: these are minutes of
// load on a real API server, never part of CI.
func needBench(t *testing.T) {
	t.Helper()
	if os.Getenv("FLEETDNS_BENCH") != "1" {
		t.Skip("benchmark: set FLEETDNS_BENCH=1 to run")
	}
}

func envInt(t *testing.T, name string, def int) int {
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

// sizes are the endpoint counts to measure, each a multiple of perObject.
func sizes(t *testing.T) []int {
	t.Helper()
	s := os.Getenv("FLEETDNS_BENCH_SIZES")
	if s == "" {
		s = "1000,10000,100000"
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < perObject || n%perObject != 0 {
			t.Fatalf("FLEETDNS_BENCH_SIZES: %q is not a multiple of %d", f, perObject)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func strict() bool { return os.Getenv("FLEETDNS_BENCH_STRICT") == "1" }

// hostName and hostAddr are endpoint j of object i; every size uses the same
// shape of names, in a namespace of its own.
func hostName(i, j int) string         { return fmt.Sprintf("h%d.o%d.scale.bench", j, i) }
func hostAddr(i, j int) string         { return fmt.Sprintf("10.%d.%d.%d", i/256, i%256, j+1) }
func namespaceOf(endpoints int) string { return fmt.Sprintf("scale-%d", endpoints) }

// dataset is one size loaded into the API server.
type dataset struct {
	endpoints int
	objects   int
	ns        string
	created   time.Duration // wall time of all the creates
	creators  int
}

var (
	loadMu sync.Mutex
	loaded = map[int]*dataset{}
)

// load creates endpoints/perObject DNSEndpoint objects of perObject A
// endpoints each in their own namespace, with parallel creates, once per
// test process, and returns how long that took.
func load(t *testing.T, k *harness.Kube, endpoints int) *dataset {
	t.Helper()
	loadMu.Lock()
	defer loadMu.Unlock()
	if d := loaded[endpoints]; d != nil {
		return d
	}
	d := &dataset{endpoints: endpoints, objects: endpoints / perObject, ns: namespaceOf(endpoints),
		creators: envInt(t, "FLEETDNS_BENCH_CREATORS", 8)}
	k.EnsureNamespace(t, d.ns)
	start := time.Now()
	work := make(chan int)
	errs := make(chan error, d.objects)
	var wg sync.WaitGroup
	for range d.creators {
		wg.Go(func() {
			eps := make([]harness.Endpoint, perObject)
			for i := range work {
				for j := range eps {
					eps[j] = harness.Endpoint{DNSName: hostName(i, j), RecordType: "A", Targets: []string{hostAddr(i, j)}}
				}
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				_, err := k.TryCreate(ctx, harness.DNSEndpointObject(d.ns, fmt.Sprintf("o%d", i), nil, eps...))
				cancel()
				if err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range d.objects {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	d.created = time.Since(start)
	t.Logf("created %d DNSEndpoint objects (%d endpoints) in namespace %s in %v with %d parallel creates",
		d.objects, d.endpoints, d.ns, d.created.Round(time.Millisecond), d.creators)
	loaded[endpoints] = d
	return d
}

// writeZone writes the dataset as an RFC 1035 zone file for the file plugin.
func writeZone(t *testing.T, d *dataset) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "$ORIGIN %s\n@ 30 IN SOA ns1.%[1]s hostmaster.%[1]s 1 7200 1800 86400 30\n@ 30 IN NS ns1.%[1]s\nns1 30 IN A 127.0.0.1\n", zone)
	for i := range d.objects {
		for j := range perObject {
			fmt.Fprintf(&b, "h%d.o%d 30 IN A %s\n", j, i, hostAddr(i, j))
		}
	}
	p := filepath.Join(t.TempDir(), fmt.Sprintf("db.scale-%d", d.endpoints))
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// writeQueries writes the dnsperf query file for a dataset: n A queries of
// names present in it, drawn uniformly (seeded, so every run asks the same).
// Every size gets the same shape and length of file.
func writeQueries(t *testing.T, d *dataset, n int) string {
	t.Helper()
	r := rand.New(rand.NewPCG(uint64(d.endpoints), 1))
	var b strings.Builder
	for range n {
		i, j := r.IntN(d.objects), r.IntN(perObject)
		fmt.Fprintf(&b, "%s A\n", hostName(i, j))
	}
	p := filepath.Join(t.TempDir(), fmt.Sprintf("queries-%d.txt", d.endpoints))
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// pinning is where servers and the load generator run: the server on CPU 0,
// dnsperf on CPU 1, when the machine has two CPUs or more.
func pinning() (server, load string) {
	if runtime.NumCPU() >= 2 {
		return "0", "1"
	}
	return "", ""
}

// server is a coredns process serving k8scrd for some namespaces.
type server struct {
	*harness.Process
	addr     string // DNS ip:port
	ip       string
	port     int
	readyURL string
	ready    time.Duration // process start to `ready` 200
	pprof    string        // host:port of the pprof plugin, when FLEETDNS_BENCH_PPROF is set
}

// startK8sCRD starts coredns with k8scrd reading namespaces from the API
// server; see startServer.
func startK8sCRD(t *testing.T, k *harness.Kube, ip, cpu string, namespaces ...string) *server {
	t.Helper()
	return startServer(t, ip, cpu, fmt.Sprintf("k8scrd {\n        kubeconfig %s\n        namespaces %s\n    }", k.Kubeconfig, strings.Join(namespaces, " ")))
}

// startFile starts coredns with the stock file plugin on a zone file: the
// control that shows how much of a change with size is the machine's
// (caches, memory) rather than k8scrd's.
func startFile(t *testing.T, ip, cpu, zonefile string) *server {
	t.Helper()
	return startServer(t, ip, cpu, "file "+zonefile)
}

// startServer starts coredns serving zone with the plugin stanza (pinned to
// cpu with taskset when cpu is set) and waits for `ready`, measuring the
// time from exec to the first 200 with the zone's SOA answering, polled
// every 10 ms.
func startServer(t *testing.T, ip, cpu, stanza string) *server {
	t.Helper()
	return startServerBin(t, harness.CoreDNSBinary(t), ip, cpu, stanza)
}

// startServerBin is startServer with the coredns binary bin.
func startServerBin(t *testing.T, bin, ip, cpu, stanza string) *server {
	t.Helper()
	s := &server{ip: ip, port: harness.FreePort(t, ip)}
	s.addr = net.JoinHostPort(ip, strconv.Itoa(s.port))
	readyAddr := harness.HostPort(t, ip)
	s.readyURL = "http://" + readyAddr + "/ready"
	if os.Getenv("FLEETDNS_BENCH_PPROF") != "" {
		s.pprof = harness.HostPort(t, ip)
		stanza += "\n    pprof " + s.pprof
	}
	dir := t.TempDir()
	cf := filepath.Join(dir, "Corefile")
	corefile := fmt.Sprintf(`%s:%d {
    bind %s
    %s
    ready %s
}
`, zone, s.port, ip, stanza, readyAddr)
	if err := os.WriteFile(cf, []byte(corefile), 0o644); err != nil {
		t.Fatal(err)
	}
	path, args := bin, []string{"-conf", cf}
	if cpu != "" {
		// taskset execs coredns: the pid is coredns's own.
		path, args = harness.LookPath(t, "taskset"), append([]string{"-c", cpu, bin}, args...)
	}
	start := time.Now()
	s.Process = harness.StartProcess(t, "coredns", path, args, dir)
	cl := http.Client{Timeout: time.Second}
	for {
		if !s.Running() {
			t.Fatalf("coredns exited before ready: %v\n%s", s.ExitErr(), s.Log())
		}
		if resp, err := cl.Get(s.readyURL); err == nil {
			resp.Body.Close()
			// `ready` can say 200 a few milliseconds before the DNS socket
			// is bound: ready means both.
			if resp.StatusCode == http.StatusOK && soaAnswers(s.addr) {
				s.ready = time.Since(start)
				break
			}
		}
		if time.Since(start) > 3*time.Minute {
			t.Fatalf("coredns not ready within 3 minutes\n%s", s.Log())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return s
}

// soaAnswers reports whether the zone's SOA answers NOERROR at addr.
func soaAnswers(addr string) bool {
	m, q := harness.NewMsg(zone, dns.TypeSOA, harness.NoRD, harness.Timeout(200*time.Millisecond), harness.Attempts(1))
	r, err := harness.AskMsg(addr, m, q)
	return err == nil && r.Rcode == dns.RcodeSuccess
}

// answerA returns the A targets of name at addr, or an error.
func answerA(addr, name string) ([]string, error) {
	m, q := harness.NewMsg(name, dns.TypeA, harness.NoRD, harness.Timeout(500*time.Millisecond), harness.Attempts(3))
	r, err := harness.AskMsg(addr, m, q)
	if err != nil {
		return nil, err
	}
	if r.Rcode != dns.RcodeSuccess {
		return nil, fmt.Errorf("%s: %s", name, dns.RcodeToString[r.Rcode])
	}
	return harness.Targets(r, dns.TypeA), nil
}

// checkServes fails the test unless the first and last endpoints of the
// first and last objects answer with their addresses.
func checkServes(t *testing.T, s *server, d *dataset) {
	t.Helper()
	for _, i := range []int{0, d.objects - 1} {
		for _, j := range []int{0, perObject - 1} {
			got, err := answerA(s.addr, hostName(i, j))
			if err != nil || len(got) != 1 || got[0] != hostAddr(i, j) {
				t.Fatalf("%d endpoints: %s A = %v (%v), want %s", d.endpoints, hostName(i, j), got, err, hostAddr(i, j))
			}
		}
	}
}

// cpuTicks is the user+system time of pid in clock ticks (USER_HZ = 100).
func cpuTicks(t *testing.T, pid int) int64 {
	t.Helper()
	n, err := benchkit.CPUTicks(pid)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// perf is one dnsperf run against one server.
type perf struct {
	qps, lost float64
	done      float64
	usPerQ    float64 // server user+sys CPU microseconds per completed query
}

// dnsperf drives s with the query file for seconds (pinned to cpu when set)
// and reads the server's CPU time around the run.
func dnsperf(t *testing.T, s *server, queries, cpu string, seconds int) perf {
	t.Helper()
	argv := []string{harness.LookPath(t, "dnsperf"), "-s", s.ip, "-p", strconv.Itoa(s.port), "-d", queries,
		"-l", strconv.Itoa(seconds), "-c", "10", "-T", "1", "-t", "2"}
	if cpu != "" {
		argv = append([]string{harness.LookPath(t, "taskset"), "-c", cpu}, argv...)
	}
	before := cpuTicks(t, s.Pid())
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(seconds+30)*time.Second)
	defer cancel()
	out, err := harness.Run(ctx, argv[0], argv[1:]...)
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	after := cpuTicks(t, s.Pid())
	r := benchkit.ParseDNSPerf([]byte(out))
	p := perf{qps: r.QPS, done: r.Completed, lost: r.LostPct}
	if p.qps == 0 || p.done == 0 {
		t.Fatalf("dnsperf answered nothing:\n%s", out)
	}
	p.usPerQ = r.USPerQuery(after - before)
	return p
}

// percentile is p (0..1) of ds at rank round(p*len(ds)), clamped to
// 1..len(ds). It rounds where benchkit.Percentile (nearest rank) rounds up,
// so it stays here: the propagation numbers in BENCHMARKS.md were computed
// this way.
func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

// loadavg is the 1, 5 and 15 minute load averages: the machine is shared,
// so every report says how busy it was.
func loadavg() string { return benchkit.Loadavg() }

// report prints a markdown section (go test -v shows it) and appends it to $FLEETDNS_BENCH_OUT.
func report(t *testing.T, md string) {
	t.Helper()
	fmt.Println(md)
	if out := os.Getenv("FLEETDNS_BENCH_OUT"); out != "" {
		f, err := os.OpenFile(out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		f.WriteString(md + "\n")
	}
}

// machine is one line on where and how a benchmark ran.
func machine() string {
	host, _ := os.Hostname()
	kernel, _ := exec.Command("uname", "-r").Output()
	return fmt.Sprintf("Machine: %s, %d CPUs, Linux %s, %s.", host, runtime.NumCPU(), strings.TrimSpace(string(kernel)), runtime.Version())
}

// saveHeap writes the server's heap profile (go tool pprof
// -sample_index=inuse_space) to FLEETDNS_BENCH_PPROF/heap-NAME.pb.gz, when
// that folder is set.
func (s *server) saveHeap(t *testing.T, name string) {
	t.Helper()
	dir := os.Getenv("FLEETDNS_BENCH_PPROF")
	if dir == "" || s.pprof == "" {
		return
	}
	cl := http.Client{Timeout: 30 * time.Second}
	resp, err := cl.Get("http://" + s.pprof + "/debug/pprof/heap?gc=1")
	if err != nil {
		t.Fatalf("heap profile: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("heap profile: %v", err)
	}
	f := filepath.Join(dir, "heap-"+name+".pb.gz")
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("heap profile: %s", f)
}

// memory is one reading of a server's memory: /proc/PID/status (bytes) and,
// with FLEETDNS_BENCH_PPROF, the Go runtime's MemStats of the same moment.
type memory struct {
	rss, anon, file, hwm int64 // VmRSS, RssAnon, RssFile, VmHWM (the peak VmRSS so far)
	stats                map[string]int64
}

// readMemory reads s's memory; the MemStats (from the pprof plugin's heap
// page, which forces no collection without gc=1) only when pprof is on.
func (s *server) readMemory(t *testing.T) memory {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	var m memory
	fields := map[string]*int64{"VmRSS": &m.rss, "RssAnon": &m.anon, "RssFile": &m.file, "VmHWM": &m.hwm}
	for _, line := range strings.Split(string(b), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if p := fields[name]; ok && p != nil {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb); err != nil {
				t.Fatalf("/proc/%d/status: %q: %v", s.Pid(), line, err)
			}
			*p = kb * 1024
		}
	}
	if s.pprof == "" {
		return m
	}
	m.stats = s.memStats(t, false)
	return m
}

// memStats reads the runtime's MemStats from the pprof plugin's heap page,
// after a collection when gc is set (its HeapAlloc is then the live heap).
func (s *server) memStats(t *testing.T, gc bool) map[string]int64 {
	t.Helper()
	q := "debug=1"
	if gc {
		q += "&gc=1"
	}
	cl := http.Client{Timeout: 30 * time.Second}
	resp, err := cl.Get("http://" + s.pprof + "/debug/pprof/heap?" + q)
	if err != nil {
		t.Fatalf("heap page: %v", err)
	}
	defer resp.Body.Close()
	page, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("heap page: %v", err)
	}
	stats := map[string]int64{}
	for _, line := range strings.Split(string(page), "\n") {
		var name string
		var v int64
		if _, err := fmt.Sscanf(line, "# %s = %d", &name, &v); err == nil {
			stats[name] = v
		}
	}
	return stats
}

// String is the reading in MiB.
func (m memory) String() string {
	mib := func(v int64) float64 { return float64(v) / (1 << 20) }
	out := fmt.Sprintf("VmRSS %.1f (anon %.1f, file %.1f), VmHWM %.1f MiB", mib(m.rss), mib(m.anon), mib(m.file), mib(m.hwm))
	if m.stats != nil {
		out += fmt.Sprintf("; heap alloc %.1f, in use %.1f, idle %.1f, released %.1f, next GC %.1f, stacks %.1f, Go sys %.1f MiB, %d GCs",
			mib(m.stats["HeapAlloc"]), mib(m.stats["HeapInuse"]), mib(m.stats["HeapIdle"]), mib(m.stats["HeapReleased"]), mib(m.stats["NextGC"]),
			mib(m.stats["StackInuse"]), mib(m.stats["Sys"]), m.stats["NumGC"])
	}
	return out
}
