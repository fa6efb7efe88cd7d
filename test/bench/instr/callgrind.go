package main

import (
	"bufio"
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
// off and returns the dump's totals.
func (s *vgServer) close() (map[string]int64, error) {
	if err := s.control("-d"); err != nil {
		return nil, err
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
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return totals, s.control("-i", "off")
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
