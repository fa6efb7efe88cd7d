package harness

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Process is a real server process started by a test: its output (stdout and
// stderr together) is captured in memory and in a file beside it, it is
// stopped at the end of the test, and its log is dumped when the test failed.
type Process struct {
	Name string   // short name for messages, e.g. "coredns"
	Path string   // the executable
	Args []string // arguments, without the program name
	Dir  string   // working directory
	Env  []string // extra environment (added to os.Environ())

	t       logger
	mu      sync.Mutex
	log     bytes.Buffer
	logFile *os.File
	cmd     *exec.Cmd
	done    chan struct{} // closed when the current cmd has exited
	exitErr error
	starts  int
}

// StartProcess starts path with args in dir (a new temp dir when empty) and
// registers its stop with t.Cleanup. It does not wait for readiness.
func StartProcess(t testing.TB, name, path string, args []string, dir string, env ...string) *Process {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	p, err := newProcess(t, name, path, args, dir, env...)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	t.Cleanup(func() {
		p.end(syscall.SIGTERM, endGrace, false)
		if t.Failed() {
			p.dump(t)
		}
		p.logFile.Close()
	})
	return p
}

// endGrace is how long a process has to exit on SIGTERM once its test is
// over, before SIGKILL. No test looks at a process after its end (checks
// of its log are cleanups registered later, so they run before it stops),
// and a shipped Corefile's health lameduck would otherwise hold every test
// that runs one for 5 s a process.
const endGrace = time.Second

// logger is what a Process needs from its owner: a test, or for processes
// shared by a whole test package (the API server), stderr.
type logger interface {
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// stderrLogger serves processes started outside a test (TestMain).
type stderrLogger struct{}

func (stderrLogger) Logf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
func (stderrLogger) Errorf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "ERROR: "+format+"\n", args...)
}
func (stderrLogger) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

// newProcess starts a process whose stop is the caller's business.
func newProcess(l logger, name, path string, args []string, dir string, env ...string) (*Process, error) {
	p := &Process{Name: name, Path: path, Args: args, Dir: dir, Env: env, t: l}
	f, err := os.OpenFile(fmt.Sprintf("%s/%s.log", dir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("log file: %w", err)
	}
	p.logFile = f
	if err := p.start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start: %w", err)
	}
	return p, nil
}

type logWriter struct{ p *Process }

func (w logWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	w.p.log.Write(b)
	w.p.logFile.Write(b)
	return len(b), nil
}

func (p *Process) start() error {
	cmd := exec.Command(p.Path, p.Args...)
	cmd.Dir = p.Dir
	cmd.Env = append(os.Environ(), p.Env...)
	cmd.Stdout = logWriter{p}
	cmd.Stderr = logWriter{p}
	// Own process group, so that signals from the terminal to `go test` do not
	// reach it before the test's cleanup does, and Kill takes its children too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p.mu.Lock()
	p.starts++
	if p.starts > 1 {
		marker := fmt.Sprintf("\n=== harness: %s restarted (start #%d) ===\n", p.Name, p.starts)
		p.log.WriteString(marker)
		p.logFile.WriteString(marker)
	}
	p.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.done, p.exitErr = cmd, done, nil
	p.mu.Unlock()
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.exitErr = err
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// Pid is the current process id.
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Pid
}

// Log returns everything the process has written so far (all starts).
func (p *Process) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// LogFile is the path of the file that holds the same output.
func (p *Process) LogFile() string { return p.logFile.Name() }

// WaitLog waits until the log contains substr, and reports whether it did
// within timeout.
func (p *Process) WaitLog(substr string, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		if strings.Contains(p.Log(), substr) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Running reports whether the current process has not exited.
func (p *Process) Running() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// Exited returns a channel closed when the current process exits.
func (p *Process) Exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// ExitErr is the error from the process's exit (nil while running or after a
// clean exit).
func (p *Process) ExitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitErr
}

// Signal sends sig to the process (e.g. syscall.SIGSTOP, SIGCONT, SIGHUP).
func (p *Process) Signal(sig syscall.Signal) {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if err := cmd.Process.Signal(sig); err != nil && p.Running() {
		p.t.Errorf("%s: signal %v: %v", p.Name, sig, err)
	}
}

// Pause stops the process with SIGSTOP: it keeps its sockets but answers
// nothing. It returns once every thread of the process is stopped.
func (p *Process) Pause() {
	p.Signal(syscall.SIGSTOP)
	deadline := time.Now().Add(2 * time.Second)
	for !p.allThreadsStopped() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
}

func (p *Process) allThreadsStopped() bool {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", p.Pid()))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			return false
		}
		// pid (comm) STATE ...: comm may hold spaces, so look after the last ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
			return false
		}
	}
	return true
}

// Resume continues a paused process with SIGCONT.
func (p *Process) Resume() { p.Signal(syscall.SIGCONT) }

// Stop ends the process: SIGTERM, then SIGKILL after 10 s. It is safe to call
// on a stopped process.
func (p *Process) Stop() { p.stop(syscall.SIGTERM, 10*time.Second) }

// Kill ends the process with SIGKILL at once (a crash, as seen from outside).
func (p *Process) Kill() { p.stop(syscall.SIGKILL, 0) }

func (p *Process) stop(sig syscall.Signal, grace time.Duration) { p.end(sig, grace, true) }

// end sends sig, waits up to grace for the exit, then kills the process
// group; say logs that it had to.
func (p *Process) end(sig syscall.Signal, grace time.Duration, say bool) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	select {
	case <-done:
		return
	default:
	}
	// A paused process cannot act on SIGTERM.
	cmd.Process.Signal(syscall.SIGCONT)
	cmd.Process.Signal(sig)
	if grace > 0 {
		select {
		case <-done:
			return
		case <-time.After(grace):
			if say {
				p.t.Logf("%s: did not stop on %v within %v, killing", p.Name, sig, grace)
			}
		}
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	cmd.Process.Kill()
	<-done
}

// Restart stops the process (SIGTERM) and starts it again with the same
// arguments; the log continues in the same buffer after a marker line.
func (p *Process) Restart() {
	p.Stop()
	if err := p.start(); err != nil {
		p.t.Fatalf("%s: restart: %v", p.Name, err)
	}
}

// RSS returns the resident set size of the process in bytes (VmRSS).
func (p *Process) RSS() (int64, error) { return p.status("VmRSS") }

// AnonRSS returns the resident anonymous memory of the process in bytes
// (RssAnon): what it allocated, without the pages of its binary, whose
// count depends on the page cache (how the file was written and read
// ahead), not on the process.
func (p *Process) AnonRSS() (int64, error) { return p.status("RssAnon") }

// status returns a kB field of /proc/PID/status in bytes.
func (p *Process) status(field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Pid()))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb); err != nil {
				return 0, err
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, p.Pid())
}

// maxDump bounds how much of a log a failed test prints.
const maxDump = 64 << 10

func (p *Process) dump(l logger) {
	out := p.Log()
	if len(out) > maxDump {
		out = "...(" + fmt.Sprint(len(out)-maxDump) + " bytes cut, full log in " + p.LogFile() + ")\n" + out[len(out)-maxDump:]
	}
	l.Logf("--- %s log (%s %s) ---\n%s--- end of %s log ---", p.Name, p.Path, strings.Join(p.Args, " "), out, p.Name)
}

// Run runs a command to completion with a deadline and returns its combined
// output; for short-lived tools (dig, kubectl, nsd-checkzone).
func Run(ctx context.Context, path string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, path, args...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	return out.String(), err
}

var _ io.Writer = logWriter{}

// RunStdin is Run with stdin.
func RunStdin(ctx context.Context, stdin, path string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, path, args...)
	var out bytes.Buffer
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Stdout = &out
	cmd.Stderr = &out
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	return out.String(), err
}
