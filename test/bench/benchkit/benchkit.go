// Package benchkit holds what fleetdns's benchmark programs and benchmark
// tests share: reading dnsperf's report, a process's CPU time from /proc,
// medians, ranges and percentiles, the load average, building a package of
// the module, and running a server pinned to a CPU in its own process group.
//
// It measures nothing by itself: each benchmark decides what to run, where
// to pin it and how to report it.
package benchkit

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// DNSPerf is what one dnsperf run reports. A line missing from the output
// leaves its field zero.
type DNSPerf struct {
	QPS        float64 // Queries per second
	Completed  float64 // Queries completed
	Lost       float64 // Queries lost, a count
	LostPct    float64 // Queries lost, percent (0-100)
	AvgLatency float64 // Average Latency, seconds
}

var (
	reQPS     = regexp.MustCompile(`Queries per second:\s+([0-9.]+)`)
	reDone    = regexp.MustCompile(`Queries completed:\s+([0-9]+)`)
	reLost    = regexp.MustCompile(`Queries lost:\s+([0-9]+) \(([0-9.]+)%\)`)
	reLatency = regexp.MustCompile(`Average Latency \(s\):\s+([0-9.]+)`)
)

// ParseDNSPerf reads dnsperf's statistics from its output.
func ParseDNSPerf(out []byte) DNSPerf {
	var p DNSPerf
	p.QPS = submatch(reQPS, out, 1)
	p.Completed = submatch(reDone, out, 1)
	p.Lost = submatch(reLost, out, 1)
	p.LostPct = submatch(reLost, out, 2)
	p.AvgLatency = submatch(reLatency, out, 1)
	return p
}

func submatch(re *regexp.Regexp, out []byte, i int) float64 {
	m := re.FindSubmatch(out)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(string(m[i]), 64)
	return v
}

// USPerQuery is ticks of CPU time (as from CPUTicks) spent over the run in
// microseconds per completed query, or 0 when none completed.
func (p DNSPerf) USPerQuery(ticks int64) float64 {
	if p.Completed == 0 {
		return 0
	}
	return float64(ticks) * 1e4 / p.Completed // a tick is 10 ms = 1e4 us
}

// Pinned is argv run under `taskset -c cpu`, or argv itself when cpu is "".
// taskset execs the program: the process started is the program's own.
func Pinned(cpu string, argv ...string) []string {
	if cpu == "" {
		return argv
	}
	return append([]string{"taskset", "-c", cpu}, argv...)
}

// CPUTicks is the user+system time of pid, all its threads, in clock ticks
// (USER_HZ = 100, a tick is 10 ms).
func CPUTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	f, ok := statFields(b)
	if !ok {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	return utimeStime(f), nil
}

// CPUSeconds is CPUTicks in seconds, failing the test when pid's counters
// cannot be read.
func CPUSeconds(t testing.TB, pid int) float64 {
	t.Helper()
	n, err := CPUTicks(pid)
	if err != nil {
		t.Fatal(err)
	}
	return float64(n) / 100 // USER_HZ
}

// GroupCPUTicks is CPUTicks summed over every process in the process group
// pgid: servers such as NSD answer from forked children, which the parent's
// own counters miss. Processes that exited are not counted.
func GroupCPUTicks(pgid int) (int64, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	want := strconv.Itoa(pgid)
	var total int64
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f, ok := statFields(b)
		if !ok || f[2] != want {
			continue
		}
		total += utimeStime(f)
	}
	return total, nil
}

// statFields are the fields of a /proc/<pid>/stat after the parenthesised
// command name: state is f[0], pgrp f[2], utime f[11], stime f[12].
func statFields(b []byte) ([]string, bool) {
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 > len(b) {
		return nil, false
	}
	f := strings.Fields(string(b[i+2:]))
	return f, len(f) >= 13
}

func utimeStime(f []string) int64 {
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s
}

// Median is the median of v (the mean of the middle two when len(v) is
// even), 0 for no values. v is not modified.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Stat is a median with its range.
type Stat struct{ Med, Min, Max float64 }

// StatOf is the median, minimum and maximum of v, zero for no values.
func StatOf(v []float64) Stat {
	if len(v) == 0 {
		return Stat{}
	}
	return Stat{Median(v), slices.Min(v), slices.Max(v)}
}

// Format is "med (min-max)" with format for each number.
func (s Stat) Format(format string) string {
	return fmt.Sprintf(format+" ("+format+"-"+format+")", s.Med, s.Min, s.Max)
}

// Percentile is the nearest-rank percentile p (0-100) of ds: the smallest
// value with at least p% of the values at or below it; 0 for no values.
func Percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[min(max(i-1, 0), len(s)-1)]
}

// Loadavg is the 1, 5 and 15 minute load averages ("0.52 0.61 0.70"), "?"
// when /proc/loadavg cannot be read: the machine is shared, so every report
// says how busy it was.
func Loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// ModuleRoot is the directory of the go.mod of the module the go command
// runs in, or an error outside any module.
func ModuleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(out))
	if err != nil || gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("run from inside the fleetdns module")
	}
	return filepath.Dir(gomod), nil
}

// BuildCmd is `go build -trimpath <flags> -o out pkg` in root with
// CGO_ENABLED=0 (a static binary), not yet run: the caller adds to its Env
// and chooses where its output goes.
func BuildCmd(root, out, pkg string, flags ...string) *exec.Cmd {
	args := append([]string{"build", "-trimpath"}, flags...)
	cmd := exec.Command("go", append(args, "-o", out, pkg)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	return cmd
}

// Command prepares argv, pinned to cpu when set (see Pinned), to run in dir
// in its own process group (so Stop reaches its children), its stdout and
// stderr to the file logPath, which the caller closes. The caller starts it
// (with Start, so that StopAllOnSignal reaches it), after adding to
// SysProcAttr if it wants (Pdeathsig).
func Command(dir, logPath, cpu string, argv ...string) (*exec.Cmd, *os.File, error) {
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, nil, err
	}
	argv = Pinned(cpu, argv...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd, lf, nil
}

// Stop sends SIGTERM to cmd's process group, waits up to 5 s, then sends
// SIGKILL and waits for it. It does nothing for a command never started.
func Stop(cmd *exec.Cmd) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	defer forget(cmd)
	syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}
