package main

import (
	"bufio"
	"debug/elf"
	"debug/gosym"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fleetdns/fleetdns/test/bench/benchkit"
)

// vgServer is one coredns process run under callgrind with instrumentation
// off until a window opens. Its Corefile serves pprof on pprofAddr, which
// forces a garbage collection before each window and reads how many ran in it.
type vgServer struct {
	name      string
	pprofAddr string
	cmd       *exec.Cmd
	log       *os.File
	outBase   string // callgrind's output file; dumps are outBase.1, outBase.2, ...
	dumps     int
	// isCopy names runtime.copystack in the dumps (see stackCopyNames);
	// nil: stack copies are not counted.
	isCopy func(string) bool
}

// startValgrind runs `valgrind --tool=callgrind --instr-atstart=no bin -conf
// corefile` in dir, in its own process group (valgrind runs the program in
// its own process, so the pid is the server's).
func startValgrind(dir, name, bin, corefile, pprofAddr string, env []string) (*vgServer, error) {
	s := &vgServer{name: name, pprofAddr: pprofAddr, outBase: filepath.Join(dir, "callgrind."+name+".out")}
	argv := append([]string{"valgrind", "--tool=callgrind", "--instr-atstart=no", "--callgrind-out-file=" + s.outBase},
		strings.Fields(*flagVGArgs)...)
	argv = append(argv, bin, "-conf", corefile)
	cmd, lf, err := benchkit.Command(dir, filepath.Join(dir, name+".log"), "", argv...)
	if err != nil {
		return nil, err
	}
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	s.cmd, s.log = cmd, lf
	if err := benchkit.Start(cmd); err != nil {
		lf.Close()
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	return s, nil
}

func (s *vgServer) pid() int { return s.cmd.Process.Pid }

// exited reports whether the server has exited (gone, or a zombie not yet
// reaped: stop reaps it).
func (s *vgServer) exited() bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.pid()))
	if err != nil {
		return true
	}
	st := string(b)
	i := strings.LastIndexByte(st, ')')
	return i < 0 || i+2 >= len(st) || st[i+2] == 'Z'
}

func (s *vgServer) stop() {
	benchkit.Stop(s.cmd)
	s.log.Close()
}

// logTail is the end of the server's log, for error messages.
func (s *vgServer) logTail() string {
	b, _ := os.ReadFile(s.log.Name())
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// control runs callgrind_control with args on the server.
func (s *vgServer) control(args ...string) error {
	out, err := exec.Command("callgrind_control", append(args, strconv.Itoa(s.pid()))...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "OK") {
		return fmt.Errorf("callgrind_control %s %s: %v\n%s", strings.Join(args, " "), s.name, err, out)
	}
	return nil
}

// open switches instrumentation on and zeroes the counters.
func (s *vgServer) open() error {
	if err := s.control("-i", "on"); err != nil {
		return err
	}
	return s.control("-z")
}

// close dumps the counters (which zeroes them), switches instrumentation
// off and returns the dump's totals and its calls of runtime.copystack.
func (s *vgServer) close() (map[string]int64, calls, error) {
	if err := s.control("-d"); err != nil {
		return nil, calls{}, err
	}
	s.dumps++
	path := fmt.Sprintf("%s.%d", s.outBase, s.dumps)
	var totals map[string]int64
	var err error
	// callgrind_control returns once the dump is requested; the file is
	// complete when its totals line is there.
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var f *os.File
		if f, err = os.Open(path); err != nil {
			continue
		}
		totals, err = parseDump(f)
		f.Close()
		if err == nil {
			break
		}
	}
	if err != nil {
		return nil, calls{}, fmt.Errorf("%s: %v", path, err)
	}
	copies := calls{n: -1}
	if s.isCopy != nil {
		f, err := os.Open(path)
		if err != nil {
			return nil, calls{}, err
		}
		copies, err = parseCalls(f, s.isCopy)
		f.Close()
		if err != nil {
			return nil, calls{}, fmt.Errorf("%s: %v", path, err)
		}
	}
	return totals, copies, s.control("-i", "off")
}

// calls is how often a function was called in a window and the Ir of
// those calls (inclusive: the function and what it called).
type calls struct{ n, ir int64 }

// parseCalls adds up, in a callgrind dump, the calls of the functions
// whose name isFn accepts: every `calls=` line under a `cfn=` such a name
// and the Ir on the line after it (the call's inclusive cost). Names may be
// compressed (`cfn=(12) name` once, `cfn=(12)` after) and carry
// callgrind's recursion suffix (`name'2`).
// The inclusive cost is sound for a function that returns to its caller
// on the same stack (runtime.copystack does); for Go code that switches
// goroutines (newstack, mcall) callgrind's call graph is not.
func parseCalls(r io.Reader, isFn func(string) bool) (calls, error) {
	var out calls
	names := map[string]string{}
	ir, posCols := -1, 1
	callee, counting := "", false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if counting { // the line after calls=: positions, then the costs
			counting = false
			f := strings.Fields(line)
			if ir >= 0 && posCols+ir < len(f) {
				v, err := strconv.ParseInt(f[posCols+ir], 10, 64)
				if err != nil {
					return calls{}, fmt.Errorf("cost of a call: %q: %v", line, err)
				}
				out.ir += v
			}
			continue
		}
		switch {
		case strings.HasPrefix(line, "events:"):
			ir = slices.Index(strings.Fields(strings.TrimPrefix(line, "events:")), "Ir")
		case strings.HasPrefix(line, "positions:"):
			posCols = len(strings.Fields(strings.TrimPrefix(line, "positions:")))
		case strings.HasPrefix(line, "fn="), strings.HasPrefix(line, "cfn="):
			k, v, _ := strings.Cut(line, "=")
			name := v
			if strings.HasPrefix(v, "(") {
				id, rest, _ := strings.Cut(v, ")")
				if name = strings.TrimSpace(rest); name != "" {
					names[id] = name
				} else {
					name = names[id]
				}
			}
			if k == "cfn" {
				callee, _, _ = strings.Cut(name, "'")
			}
		case strings.HasPrefix(line, "calls="):
			if callee != "" && isFn(callee) {
				f := strings.Fields(strings.TrimPrefix(line, "calls="))
				if len(f) == 0 {
					return calls{}, fmt.Errorf("%q", line)
				}
				n, err := strconv.ParseInt(f[0], 10, 64)
				if err != nil {
					return calls{}, fmt.Errorf("%q: %v", line, err)
				}
				out.n += n
				counting = true
			}
		}
	}
	return out, sc.Err()
}

// stackCopyNames returns what accepts runtime.copystack's name in bin's
// callgrind dumps: the name, and, as callgrind says a function of a binary
// without a symbol table (go build -ldflags "-s -w", as make build does),
// its entry address, read from the Go function table that every Go binary
// keeps (.gopclntab).
func stackCopyNames(bin string) (func(string) bool, error) {
	return funcNames(bin, "runtime.copystack")
}

// funcNames returns what accepts the function name of bin in callgrind's
// dumps: the name or its entry address.
func funcNames(bin, name string) (func(string) bool, error) {
	f, err := elf.Open(bin)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	pcln, text := f.Section(".gopclntab"), f.Section(".text")
	if pcln == nil || text == nil {
		return nil, fmt.Errorf("%s: no .gopclntab or .text section", bin)
	}
	data, err := pcln.Data()
	if err != nil {
		return nil, err
	}
	tab, err := gosym.NewTable(nil, gosym.NewLineTable(data, text.Addr))
	if err != nil {
		return nil, err
	}
	fn := tab.LookupFunc(name)
	if fn == nil {
		return nil, fmt.Errorf("%s: no %s in its function table", bin, name)
	}
	entry := fn.Entry
	return func(s string) bool {
		if s == name {
			return true
		}
		hex, ok := strings.CutPrefix(s, "0x")
		if !ok {
			return false
		}
		v, err := strconv.ParseUint(hex, 16, 64)
		return err == nil && v == entry
	}, nil
}

// parseDump reads the event counts of a callgrind dump: the names from the
// `events:` line and the numbers from `totals:` (or, missing that,
// `summary:`), both in the header and trailer of the format
// (https://valgrind.org/docs/manual/cl-format.html).
func parseDump(r io.Reader) (map[string]int64, error) {
	var events []string
	var totals, summary []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "events:"):
			events = strings.Fields(strings.TrimPrefix(line, "events:"))
		case strings.HasPrefix(line, "totals:"):
			totals = strings.Fields(strings.TrimPrefix(line, "totals:"))
		case strings.HasPrefix(line, "summary:"):
			summary = strings.Fields(strings.TrimPrefix(line, "summary:"))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if totals == nil {
		totals = summary
	}
	if len(events) == 0 || totals == nil {
		return nil, fmt.Errorf("no events: or totals: line (incomplete dump?)")
	}
	if len(totals) > len(events) {
		return nil, fmt.Errorf("%d totals for %d events", len(totals), len(events))
	}
	out := make(map[string]int64, len(events))
	for i, e := range events {
		if i >= len(totals) { // trailing zero counts may be left out
			out[e] = 0
			continue
		}
		v, err := strconv.ParseInt(totals[i], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("totals: %q: %v", totals[i], err)
		}
		out[e] = v
	}
	if !slices.Contains(events, "Ir") {
		return nil, fmt.Errorf("no Ir event in %v", events)
	}
	return out, nil
}

var reMemStat = regexp.MustCompile(`(?m)^# ([A-Za-z]+) = ([0-9]+)$`)

// memStats asks the server's pprof for its heap profile, which ends with
// runtime.MemStats, and returns its numeric fields (NumGC, TotalAlloc,
// Mallocs, HeapAlloc, NextGC, ...). With gc set the handler first runs a
// garbage collection to completion (runtime.GC).
func (s *vgServer) memStats(gc bool) (map[string]int64, error) {
	u := "http://" + s.pprofAddr + "/debug/pprof/heap?debug=1"
	if gc {
		u += "&gc=1"
	}
	c := &http.Client{Timeout: 2 * time.Minute}
	resp, err := c.Get(u)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return parseMemStats(b)
}

func parseMemStats(b []byte) (map[string]int64, error) {
	out := map[string]int64{}
	for _, m := range reMemStat.FindAllSubmatch(b, -1) {
		v, err := strconv.ParseInt(string(m[2]), 10, 64)
		if err != nil { // beyond int64: NextGC with GOGC=off can be
			v = math.MaxInt64
		}
		out[string(m[1])] = v
	}
	for _, k := range []string{"NumGC", "TotalAlloc", "Mallocs"} {
		if _, ok := out[k]; !ok {
			return nil, fmt.Errorf("no %s in the heap profile", k)
		}
	}
	return out, nil
}
