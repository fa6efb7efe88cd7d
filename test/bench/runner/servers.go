package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/fleetdns/fleetdns/test/bench/benchkit"
	"github.com/miekg/dns"
)

// server is one contestant: a process listening on its own loopback address.
type server struct {
	Name  string
	Addr  string // ip
	Port  int
	Probe string // a name that answers NOERROR once the server has loaded

	cmd     *exec.Cmd
	started time.Time
	ready   time.Duration
	log     *os.File
}

func (s *server) hostport() string { return fmt.Sprintf("%s:%d", s.Addr, s.Port) }

// start runs argv pinned to the server CPU set and waits until it answers.
func (s *server) start(dir string, cpus string, argv ...string) error {
	cmd, lf, err := benchkit.Command(dir, filepath.Join(dir, s.Name+".log"), cpus, argv...)
	if err != nil {
		return err
	}
	s.log = lf
	s.cmd = cmd
	s.started = time.Now()
	if err := benchkit.Start(s.cmd); err != nil {
		return fmt.Errorf("%s: %v", s.Name, err)
	}
	deadline := time.Now().Add(120 * time.Second)
	c := &dns.Client{Timeout: 500 * time.Millisecond}
	m := new(dns.Msg)
	m.SetQuestion(s.Probe, dns.TypeA)
	for time.Now().Before(deadline) {
		if r, _, err := c.Exchange(m, s.hostport()); err == nil && r.Rcode == dns.RcodeSuccess && len(r.Answer) > 0 {
			s.ready = time.Since(s.started)
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.stop()
	b, _ := os.ReadFile(lf.Name())
	return fmt.Errorf("%s did not answer %s within 120s; log:\n%s", s.Name, s.Probe, b)
}

func (s *server) stop() {
	benchkit.Stop(s.cmd)
	if s.log != nil {
		s.log.Close()
	}
}

// pid is the server process itself, not taskset (taskset execs it, so they
// are the same process).
func (s *server) pid() int { return s.cmd.Process.Pid }

// cpuTicks is user+system time, in clock ticks (USER_HZ=100), of every
// process in the server's process group: NSD and Knot answer from forked
// children or threads, which the parent's own counters would miss.
func (s *server) cpuTicks() (int64, error) { return benchkit.GroupCPUTicks(s.pid()) }

// rssKiB is the resident set size of the server now.
func (s *server) rssKiB() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.pid()))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			v, _ := strconv.ParseInt(strings.Fields(l)[1], 10, 64)
			return v
		}
	}
	return 0
}

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o644) }

// coredns serves the dataset with one plugin configuration.
func corednsServer(name, addr string, port int, bin, dir, cpus, probe, body string) (*server, error) {
	s := &server{Name: name, Addr: addr, Port: port, Probe: probe}
	conf := filepath.Join(dir, name+".Corefile")
	corefile := fmt.Sprintf("example.bench:%d {\n    bind %s\n%s}\n", port, addr, body)
	if err := writeFile(conf, corefile); err != nil {
		return nil, err
	}
	return s, s.start(dir, cpus, bin, "-conf", conf)
}

func nsdServer(addr string, port int, d *dataset, dir, cpus, probe string) (*server, error) {
	s := &server{Name: "nsd", Addr: addr, Port: port, Probe: probe}
	nd := filepath.Join(dir, "nsd")
	os.MkdirAll(nd, 0o755)
	conf := fmt.Sprintf(`server:
    ip-address: %s
    port: %d
    username: ""
    chroot: ""
    database: ""
    zonelistfile: "%[3]s/zone.list"
    xfrdfile: "%[3]s/xfrd.state"
    xfrdir: "%[3]s"
    pidfile: "%[3]s/nsd.pid"
    server-count: 1
    verbosity: 1
    # Response rate limiting would drop a benchmark's load; off, as for the others.
    rrl-ratelimit: 0
    rrl-whitelist-ratelimit: 0
remote-control:
    control-enable: no
zone:
    name: example.bench
    zonefile: %[4]s
`, addr, port, nd, d.ZoneFile)
	cf := filepath.Join(nd, "nsd.conf")
	if err := writeFile(cf, conf); err != nil {
		return nil, err
	}
	return s, s.start(dir, cpus, "nsd", "-d", "-c", cf)
}

func knotServer(addr string, port int, d *dataset, dir, cpus, probe string) (*server, error) {
	s := &server{Name: "knot", Addr: addr, Port: port, Probe: probe}
	kd := filepath.Join(dir, "knot")
	os.MkdirAll(kd, 0o755)
	conf := fmt.Sprintf(`server:
    listen: %s@%d
    rundir: %[3]s
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
database:
    storage: %[3]s
template:
  - id: default
    storage: %[3]s
    semantic-checks: off
    journal-content: none
    zonefile-sync: -1
zone:
  - domain: example.bench
    file: %[4]s
log:
  - target: stderr
    any: warning
`, addr, port, kd, d.ZoneFile)
	cf := filepath.Join(kd, "knot.conf")
	if err := writeFile(cf, conf); err != nil {
		return nil, err
	}
	return s, s.start(dir, cpus, "knotd", "-c", cf)
}

func bareServer(addr string, port int, bin, dir, cpus, probe string) (*server, error) {
	s := &server{Name: "bare-miekg", Addr: addr, Port: port, Probe: probe}
	return s, s.start(dir, cpus, bin, "-addr", s.hostport())
}
