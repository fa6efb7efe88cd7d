// Command instr measures what a query costs fleetdns in instructions: the
// real coredns binary, run under valgrind's callgrind, answers real DNS
// queries over loopback sockets, and callgrind counts the instructions it
// executed (Ir) while exactly N queries were answered. Instruction counts do
// not move with the load of a shared machine the way queries per second and
// CPU time do, so two runs agree to a fraction of a percent.
//
//	go run ./test/bench/instr -coredns bin/coredns [-queries 5000] [-runs 2] [-out FILE]
//	go run ./test/bench/instr -coredns bin/coredns -quick
//
// Three comparisons, each server under callgrind, everything else (peers,
// upstreams, this client) native:
//
//   - authoritative: k8scrd (a folder of DNSEndpoint manifests) against the
//     stock `file` plugin with the same zone and `hosts` with the same names
//     (benchkit's dataset: hits, and a mix of hits, NODATA, CNAME chains and
//     NXDOMAIN);
//   - gslb: a roundRobin gslb host with two peers (native coredns processes
//     serving localtargets-<host>), and the server's own localtargets-<host>
//     answer, against a plain k8scrd host with as many targets, in the same
//     server block;
//   - splitdns: splitdns with one route against stock `forward` with one
//     zone block, and splitdns with 1,000 routes; the upstream is
//     test/bench/bare.
//
// One window: warm-up queries (once per row, instrumentation off), a forced
// garbage collection through the pprof plugin, instrumentation on and
// counters zeroed (callgrind_control -i on, -z), the N queries one at a time
// with every reply checked, then callgrind_control -d (the dump) and -i off.
// Ir per query is the dump's total over N. Each server also gets an idle
// window of the same kind with no queries, which shows what the background
// (Go's sysmon, gslb's peer refreshes) adds to a window.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fleetdns/fleetdns/test/bench/benchkit"
	"github.com/miekg/dns"
)

var (
	flagCoreDNS    = flag.String("coredns", "", "coredns binary (default: build ./cmd/coredns)")
	flagQueries    = flag.Int("queries", 5000, "queries per measured window")
	flagWarm       = flag.Int("warmup", 1000, "warm-up queries per row, before its first window, instrumentation off")
	flagRuns       = flag.Int("runs", 2, "windows per row (the spread between them is reported)")
	flagRecords    = flag.Int("records", 10000, "hosts in the authoritative zone")
	flagRoutes     = flag.Int("routes", 1000, "routes of the large splitdns configuration")
	flagIdle       = flag.Duration("idle", 3*time.Second, "idle window per server and run (0: none)")
	flagClients    = flag.Int("clients", 1, "concurrent clients, each with one query outstanding")
	flagSettle     = flag.Bool("settle", true, "send each measured query only when every server thread sleeps")
	flagGOGC       = flag.String("gogc", "", "GOGC of the servers under callgrind (\"off\": no collection in any window)")
	flagOnly       = flag.String("only", "auth,gslb,sources,splitdns", "comparisons to run")
	flagQuick      = flag.Bool("quick", false, "a short run: -records 1000 -queries 1000 -warmup 200 -idle 1s")
	flagGOMAXPROCS = flag.String("gomaxprocs", "1", "GOMAXPROCS of the servers under callgrind (\"\": Go's default)")
	flagGODEBUG    = flag.String("godebug", "asyncpreemptoff=1,cpu.rdtscp=off", "GODEBUG of the servers under callgrind (valgrind 3.19 cannot decode the RDTSCP that Go's runtime.cputicks uses where the CPU has it)")
	flagNet        = flag.String("net", "127.0.78", "first three octets of the loopback addresses to use")
	flagPort       = flag.Int("port", 5378, "DNS port of every server")
	flagWindow     = flag.Duration("window-timeout", 10*time.Minute, "longest one window may take")
	flagVGArgs     = flag.String("valgrind-args", "", "more valgrind options (space separated), e.g. --fair-sched=yes")
	flagOut        = flag.String("out", "", "append the markdown report to this file")
	flagKeep       = flag.Bool("keep", false, "keep the work folder (Corefiles, logs, callgrind dumps)")
)

// row is one line of the table: one kind of query to one server.
type row struct {
	group, name string
	baseline    string // the row whose Ir/query is the denominator of the ratio; "" for a baseline
	srv         *vgServer
	addr        string
	warm, qs    []query
	check       checker
	runs        []window
}

// window is one measured window.
type window struct {
	ir      int64
	n       int // queries answered in it
	gcs     int // garbage collections that completed in it
	elapsed time.Duration
	// Heap bytes and objects allocated in it (MemStats TotalAlloc, Mallocs;
	// the pprof requests around it add a little), and how far the heap
	// was from the next collection when it opened (NextGC - HeapAlloc).
	allocBytes, mallocs, headroom int64
	// The goroutine stacks copied to grow them (runtime.copystack): how
	// many, and their Ir; n < 0 when not counted.
	copies calls
}

func (w window) perQuery() float64 { return float64(w.ir) / float64(max(w.n, 1)) }

// copiesPerQuery is how many goroutine stacks were copied to grow them,
// per query, and their Ir per query: "0.77 (23.5k Ir)"; "?" when not
// counted.
func (w window) copiesPerQuery() string {
	if w.copies.n < 0 {
		return "?"
	}
	n := float64(max(w.n, 1))
	return fmt.Sprintf("%.2f (%.1fk Ir)", float64(w.copies.n)/n, float64(w.copies.ir)/n/1000)
}

// group is one comparison: its servers (under callgrind), the native
// processes they need, and its rows.
type group struct {
	name    string
	servers []*vgServer
	helpers []*exec.Cmd
	rows    []*row
	idle    map[*vgServer][]window
}

func (g *group) stop() {
	for _, s := range g.servers {
		s.stop()
	}
	for _, h := range g.helpers {
		benchkit.Stop(h)
	}
}

// env is what every group's setup needs.
type env struct {
	bin, bare, dir string
	next           int               // last octet of the next address handed out
	isCopy         func(string) bool // runtime.copystack's name in bin's dumps; nil: unknown
}

func (e *env) ip() string {
	e.next++
	return fmt.Sprintf("%s.%d", *flagNet, e.next)
}

func (e *env) hostport(ip string) string { return fmt.Sprintf("%s:%d", ip, *flagPort) }

func main() {
	flag.Parse()
	log.SetFlags(log.Ltime)
	if *flagQuick { // the short run's sizes, where not given explicitly
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for name, v := range map[string]string{"records": "1000", "queries": "1000", "warmup": "200", "idle": "1s"} {
			if !set[name] {
				flag.Set(name, v)
			}
		}
	}
	for _, tool := range []string{"valgrind", "callgrind_control"} {
		if _, err := exec.LookPath(tool); err != nil {
			log.Fatalf("%s not found: install valgrind", tool)
		}
	}
	root, err := benchkit.ModuleRoot()
	if err != nil {
		log.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "fleetdns-instr-")
	if err != nil {
		log.Fatal(err)
	}
	if *flagKeep {
		log.Printf("work folder: %s", dir)
		benchkit.StopAllOnSignal(nil)
	} else {
		defer os.RemoveAll(dir)
		benchkit.StopAllOnSignal(func() { os.RemoveAll(dir) })
	}
	e := &env{dir: dir, next: 9}
	e.bin = *flagCoreDNS
	if e.bin == "" {
		e.bin = filepath.Join(dir, "coredns")
		build(root, e.bin, "./cmd/coredns")
	} else if e.bin, err = filepath.Abs(e.bin); err != nil {
		log.Fatal(err)
	}
	if e.isCopy, err = stackCopyNames(e.bin); err != nil {
		log.Printf("stack copies will not be counted: %v", err)
	}
	e.bare = filepath.Join(dir, "bare")
	build(root, e.bare, "./test/bench/bare")

	setups := map[string]func(*env) (*group, error){"auth": authGroup, "gslb": gslbGroup, "sources": sourcesGroup, "splitdns": splitdnsGroup}
	var groups []*group
	start := time.Now()
	for _, name := range strings.Split(*flagOnly, ",") {
		setup, ok := setups[strings.TrimSpace(name)]
		if !ok {
			log.Fatalf("-only: unknown comparison %q (auth, gslb, sources, splitdns)", name)
		}
		g, err := setup(e)
		if err == nil {
			err = measure(g)
		}
		g.stop()
		if err != nil {
			log.Fatalf("%s: %v", name, err)
		}
		groups = append(groups, g)
	}
	report(root, e.bin, groups, time.Since(start))
}

// measure warms every row up, then runs -runs rounds: every row's window
// (the order rotated each round) and every server's idle window.
func measure(g *group) error {
	deadline := time.Now().Add(*flagWindow)
	for _, r := range g.rows {
		if res := send(r.addr, r.warm, *flagClients, 5*time.Second, deadline, r.check, 0); !res.ok() {
			return fmt.Errorf("%s: warm-up: %v", r.name, res)
		}
	}
	g.idle = map[*vgServer][]window{}
	for run := range *flagRuns {
		for i := range g.rows {
			r := g.rows[(i+run)%len(g.rows)]
			w, err := measureWindow(r.srv, func(deadline time.Time) (int, error) {
				pid := 0
				if *flagSettle {
					pid = r.srv.pid()
				}
				res := send(r.addr, r.qs, *flagClients, 5*time.Second, deadline, r.check, pid)
				if !res.ok() {
					return 0, fmt.Errorf("%s: %v", r.name, res)
				}
				if res.unsettled > 0 {
					log.Printf("%s: %d queries sent before the server settled (1 s)", r.name, res.unsettled)
				}
				return res.sent - res.lost, nil
			})
			if err != nil {
				return err
			}
			r.runs = append(r.runs, w)
			headroom := fmt.Sprintf("%d KiB", w.headroom>>10)
			if w.headroom >= 1<<49 {
				headroom = "GC off"
			}
			log.Printf("run %d %-28s %10.0f Ir/query  %6.0f B/query  %d GC (headroom %s)  stack copies/query %s  %v", run+1, r.name, w.perQuery(),
				float64(w.allocBytes)/float64(max(w.n, 1)), w.gcs, headroom, w.copiesPerQuery(), w.elapsed.Round(time.Millisecond))
		}
		if *flagIdle <= 0 {
			continue
		}
		for _, s := range g.servers {
			w, err := measureWindow(s, func(time.Time) (int, error) { time.Sleep(*flagIdle); return 0, nil })
			if err != nil {
				return err
			}
			g.idle[s] = append(g.idle[s], w)
			log.Printf("run %d %-28s %10.0f Ir/s idle", run+1, s.name+" idle", float64(w.ir)/w.elapsed.Seconds())
		}
	}
	return nil
}

// measureWindow forces a garbage collection, opens a window on s, runs
// load, closes the window and returns its count.
func measureWindow(s *vgServer, load func(deadline time.Time) (int, error)) (window, error) {
	m0, err := s.memStats(true)
	if err != nil {
		return window{}, fmt.Errorf("%s: pprof: %v", s.name, err)
	}
	if err := s.open(); err != nil {
		return window{}, err
	}
	start := time.Now()
	n, loadErr := load(start.Add(*flagWindow))
	elapsed := time.Since(start)
	totals, copies, err := s.close()
	if loadErr != nil {
		return window{}, loadErr
	}
	if err != nil {
		return window{}, err
	}
	m1, err := s.memStats(false)
	if err != nil {
		return window{}, fmt.Errorf("%s: pprof: %v", s.name, err)
	}
	return window{ir: totals["Ir"], n: n, elapsed: elapsed, gcs: int(m1["NumGC"] - m0["NumGC"]),
		allocBytes: m1["TotalAlloc"] - m0["TotalAlloc"], mallocs: m1["Mallocs"] - m0["Mallocs"],
		headroom: max(0, min(m0["NextGC"], 1<<50)-m0["HeapAlloc"]), // NextGC is huge with GOGC=off
		copies:   copies}, nil
}

// startAll starts every server of a group at once (start-up under valgrind
// is slow) and waits until each answers its probe correctly.
func startAll(e *env, g *group, specs []serverSpec) error {
	var env []string
	if *flagGOMAXPROCS != "" {
		env = append(env, "GOMAXPROCS="+*flagGOMAXPROCS)
	}
	if *flagGODEBUG != "" {
		env = append(env, "GODEBUG="+*flagGODEBUG)
	}
	if *flagGOGC != "" {
		env = append(env, "GOGC="+*flagGOGC)
	}
	var started []*vgServer
	for _, sp := range specs {
		cf := filepath.Join(e.dir, sp.name+".Corefile")
		body := strings.Replace(sp.corefile, "PPROF", "pprof "+sp.pprof, 1)
		if err := os.WriteFile(cf, []byte(body), 0o644); err != nil {
			return err
		}
		s, err := startValgrind(e.dir, sp.name, e.bin, cf, sp.pprof, env)
		if err != nil {
			return err
		}
		s.isCopy = e.isCopy
		g.servers = append(g.servers, s)
		started = append(started, s)
	}
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	for i, sp := range specs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = waitAnswer(sp.addr, sp.probe, sp.check, 10*time.Minute, started[i].exited)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("%s: %v; log:\n%s", sp.name, errs[i], started[i].logTail())
			} else {
				log.Printf("%s answers", sp.name)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// serverSpec is a server to run under callgrind: its Corefile has the
// placeholder PPROF where the pprof plugin goes (in one server block), and
// it is ready when probe gets the answer check accepts.
type serverSpec struct {
	name, corefile, addr, pprof string
	probe                       query
	check                       checker
}

// waitAnswer asks addr q until check accepts the reply, d has passed or
// exited (when not nil) reports that the server is gone (valgrind died:
// no use waiting).
func waitAnswer(addr string, q query, check checker, d time.Duration, exited func() bool) error {
	deadline := time.Now().Add(d)
	var last error
	for time.Now().Before(deadline) {
		if exited != nil && exited() {
			return fmt.Errorf("the server exited before it answered %s %s", q.name, q.qtype)
		}
		res := send(addr, []query{q}, 1, 2*time.Second, deadline, check, 0)
		if res.ok() {
			return nil
		}
		last = res.firstErr
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("no right answer to %s %s within %v: %v", q.name, q.qtype, d, last)
}

// startNative runs a helper process (a peer, an upstream) natively.
func startNative(e *env, g *group, name string, argv ...string) error {
	cmd, lf, err := benchkit.Command(e.dir, filepath.Join(e.dir, name+".log"), "", argv...)
	if err != nil {
		return err
	}
	defer lf.Close() // the child has its own descriptor
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := benchkit.Start(cmd); err != nil {
		return fmt.Errorf("%s: %v", name, err)
	}
	g.helpers = append(g.helpers, cmd)
	return nil
}

func repeat(q query, n int) []query {
	qs := make([]query, n)
	for i := range qs {
		qs[i] = q
	}
	return qs
}

func build(root, out, pkg string) {
	cmd := benchkit.BuildCmd(root, out, pkg, "-ldflags", "-s -w")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		log.Fatalf("go build %s: %v", pkg, err)
	}
}

// checkAll is a checker that accepts only the reply f gives for each query.
func checkAll(f func(q query) (string, []string)) checker {
	return func(q query, m *dns.Msg) error {
		rcode, answer := f(q)
		return want(rcode, answer)(m)
	}
}

// sameAnswer is a checker for rcode and answer whatever the query.
func sameAnswer(rcode string, answer ...string) checker {
	w := want(rcode, answer)
	return func(_ query, m *dns.Msg) error { return w(m) }
}

// oneOf accepts a reply that one of cs accepts.
func oneOf(cs ...checker) checker {
	return func(q query, m *dns.Msg) error {
		var first error
		for _, c := range cs {
			err := c(q, m)
			if err == nil {
				return nil
			}
			if first == nil {
				first = err
			}
		}
		return first
	}
}

// signedAnswer accepts a reply whose answer carries RRSIGs and which c
// accepts without them.
func signedAnswer(c checker) checker {
	return func(q query, m *dns.Msg) error {
		cp := m.Copy()
		cp.Answer = cp.Answer[:0]
		sigs := 0
		for _, rr := range m.Answer {
			if rr.Header().Rrtype == dns.TypeRRSIG {
				sigs++
				continue
			}
			cp.Answer = append(cp.Answer, rr)
		}
		if sigs == 0 {
			return fmt.Errorf("no RRSIG in the answer")
		}
		return c(q, cp)
	}
}
