package image

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/fleetdns/fleetdns/internal/ociimage"
	"github.com/fleetdns/fleetdns/test/harness"
)

// securityContext is the part of a Kubernetes container's securityContext
// that decides whether coredns can start and bind its port, with the port
// its Corefile listens on.
type securityContext struct {
	capAdd   []string          // capabilities.add after drop: [ALL]
	sysctls  map[string]string // the pod's sysctls (namespaced: the container's netns)
	port     int
	wantBind bool // false: the bind must be refused (a negative control)
}

// TestImageServesUnderSecurityContexts unpacks the amd64 image and runs it
// under runc as a kubelet with containerd would: the image's numeric user, a
// read-only root filesystem, no_new_privs (allowPrivilegeEscalation: false),
// capabilities in the bounding, permitted and effective sets only (no
// ambient: a non-root process loses them at exec), its own network
// namespace. The Corefile (hosts stanza) is mounted read-only at
// /etc/coredns; the test asks from inside the namespace, over UDP and TCP.
func TestImageServesUnderSecurityContexts(t *testing.T) {
	if os.Geteuid() != 0 {
		harness.Missing(t, "root, to run an OCI runtime and create network namespaces")
	}
	// runc, not crun: Debian 12's crun refuses a hybrid cgroup layout with
	// a controller on the unified hierarchy (this machine's), runc does not.
	runc := harness.LookPath(t, "runc")
	ipCmd := harness.LookPath(t, "ip")
	dir := layoutDir(t)
	_, _, imgs := loadIndex(t, dir)
	pi, ok := imgs[runtime.GOARCH]
	if !ok {
		t.Fatalf("no %s image in the index", runtime.GOARCH)
	}
	rootfs := filepath.Join(t.TempDir(), "rootfs")
	unpack(t, pi.img, rootfs)

	cases := []struct {
		name string
		sc   securityContext
	}{
		// deploy/kube-system, deploy/gslb: drop ALL, add NET_BIND_SERVICE,
		// and the pod sysctl that makes port 53 unprivileged in the pod's
		// network namespace.
		{"shipped", securityContext{capAdd: []string{"CAP_NET_BIND_SERVICE"},
			sysctls: map[string]string{"net.ipv4.ip_unprivileged_port_start": "53"}, port: 53, wantBind: true}},
		// k8gb's chart: every capability dropped, nothing added, port 5353.
		{"k8gb chart", securityContext{port: 5353, wantBind: true}},
		// The shipped context without the sysctl: NET_BIND_SERVICE alone
		// does not let a non-root process bind 53 (no file capability in
		// the image, no ambient set), so the manifests need the sysctl.
		{"shipped without the sysctl", securityContext{capAdd: []string{"CAP_NET_BIND_SERVICE"}, port: 53}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNetns(t, ipCmd)
			c := startContainer(t, runc, rootfs, pi.config.Config.User, pi.config.Config.Entrypoint, pi.config.Config.Env, ns, tc.sc)
			addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(tc.sc.port))
			if !tc.sc.wantBind {
				select {
				case <-c.Exited():
				case <-time.After(30 * time.Second):
					t.Fatalf("coredns still runs; want the bind of port %d refused", tc.sc.port)
				}
				if !strings.Contains(c.Log(), "permission denied") {
					t.Errorf("want a bind permission error, log:\n%s", c.Log())
				}
				return
			}
			if err := waitDNS(c.Process, ns, addr, 30*time.Second); err != nil {
				t.Fatalf("no answer on %s in the container's namespace: %v", addr, err)
			}
			for _, network := range []string{"udp", "tcp"} {
				r, err := exchangeIn(ns, network, addr, "web.image.test.", dns.TypeA)
				if err != nil {
					t.Fatalf("%s: %v", network, err)
				}
				if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "198.18.0.7" {
					t.Errorf("%s web.image.test. A: rcode %s answer %v, want 198.18.0.7", network, dns.RcodeToString[r.Rcode], r.Answer)
				}
			}
			status := containerStatus(t, runc, c)
			if !regexp.MustCompile(`(?m)^Uid:\s+65532\s+65532\s+65532\s+65532$`).MatchString(status) ||
				!regexp.MustCompile(`(?m)^Gid:\s+65532\s`).MatchString(status) {
				t.Errorf("coredns does not run as 65532:65532:\n%s", status)
			}
			// Port 53 was bound with no capability at all: the sysctl did it.
			for _, set := range []string{"CapEff", "CapPrm", "CapAmb"} {
				if !regexp.MustCompile(`(?m)^` + set + `:\s+0+$`).MatchString(status) {
					t.Errorf("%s not empty:\n%s", set, status)
				}
			}
			if !regexp.MustCompile(`(?m)^NoNewPrivs:\s+1$`).MatchString(status) {
				t.Errorf("no_new_privs not set:\n%s", status)
			}
			checkBuildInfo(t, ns, pi.config.Config.Labels)
		})
	}
}

// checkBuildInfo reads the running instance's /metrics (the prometheus
// plugin, in the namespace) and wants both build_info metrics to name the
// image's version and commit.
func checkBuildInfo(t *testing.T, ns string, labels map[string]string) {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(_ context.Context, network, addr string) (net.Conn, error) { return dialIn(ns, network, addr) },
	}}
	resp, err := hc.Get("http://127.0.0.1:9153/metrics")
	if err != nil {
		t.Fatalf("/metrics: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	rev, ver := labels[ociimage.LabelRevision], labels[ociimage.LabelVersion]
	fleet := fmt.Sprintf(`coredns_fleetdns_build_info{goversion="%s",revision="%s",version="%s"} 1`, runtime.Version(), rev, ver)
	core := fmt.Sprintf(`coredns_build_info{goversion="%s",revision="%s",version="1.15.0"} 1`, runtime.Version(), rev)
	for _, want := range []string{fleet, core} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s; build_info lines:\n%s", want, harness.GrepLines(string(body), "build_info{"))
		}
	}
}

var nsSeq atomic.Int32

// newNetns creates a network namespace with only loopback, up, and removes it
// at the end of the test. It returns the namespace's path.
func newNetns(t *testing.T, ipCmd string) string {
	t.Helper()
	name := fmt.Sprintf("fleetdns-image-%d-%d", os.Getpid(), nsSeq.Add(1))
	run := func(args ...string) {
		if o, err := exec.Command(ipCmd, args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, o)
		}
	}
	run("netns", "add", name)
	t.Cleanup(func() { exec.Command(ipCmd, "netns", "del", name).Run() })
	run("-n", name, "link", "set", "lo", "up")
	return "/run/netns/" + name
}

// dialIn opens a connection from inside the network namespace at ns: the
// socket is made on a thread switched into it, and keeps the namespace after
// the thread switches back.
func dialIn(ns, network, addr string) (net.Conn, error) {
	var conn net.Conn
	err := harness.InNetNS(ns, func() (err error) {
		conn, err = net.DialTimeout(network, addr, 2*time.Second)
		return err
	})
	if err != nil && conn != nil {
		conn.Close()
		conn = nil
	}
	return conn, err
}

// exchangeIn asks one question from inside the namespace.
func exchangeIn(ns, network, addr, name string, qtype uint16) (*dns.Msg, error) {
	conn, err := dialIn(ns, network, addr)
	if err != nil {
		return nil, err
	}
	co := &dns.Conn{Conn: conn}
	defer co.Close()
	co.SetDeadline(time.Now().Add(2 * time.Second))
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	if err := co.WriteMsg(m); err != nil {
		return nil, err
	}
	return co.ReadMsg()
}

func waitDNS(c *harness.Process, ns, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		if !c.Running() {
			return fmt.Errorf("container exited: %v", c.ExitErr())
		}
		if _, last = exchangeIn(ns, "udp", addr, ".", dns.TypeSOA); last == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return last
}

// container is a runc container run in the foreground by a harness.Process.
type container struct {
	*harness.Process
	id, state string // runc's container id and --root
}

// startContainer writes an OCI bundle (config.json over rootfs, a Corefile
// with a hosts stanza in a folder mounted at /etc/coredns) and runs it.
func startContainer(t *testing.T, rt, rootfs, user string, entrypoint, env []string, ns string, sc securityContext) *container {
	t.Helper()
	uid, gid := numericUser(t, user)
	bundle := t.TempDir()
	cfgDir := filepath.Join(bundle, "config")
	if err := os.Mkdir(cfgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(cfgDir, "Corefile"), []byte(fmt.Sprintf(`image.test:%d {
    hosts /etc/coredns/hosts
    prometheus 127.0.0.1:9153
    errors
}
.:%d {
    whoami
}
`, sc.port, sc.port)))
	writeFile(t, filepath.Join(cfgDir, "hosts"), []byte("198.18.0.7 web.image.test\n"))

	caps := sc.capAdd
	if caps == nil {
		caps = []string{}
	}
	spec := map[string]any{
		"ociVersion": "1.0.2",
		"process": map[string]any{
			"terminal": false,
			"user":     map[string]any{"uid": uid, "gid": gid},
			"args":     append(append([]string(nil), entrypoint...), "-conf", "/etc/coredns/Corefile"),
			"env":      env,
			"cwd":      "/",
			// drop: [ALL] + add: what containerd gives a container: the
			// bounding, permitted and effective sets, never ambient.
			"capabilities": map[string]any{
				"bounding": caps, "permitted": caps, "effective": caps,
				"inheritable": []string{}, "ambient": []string{},
			},
			"noNewPrivileges": true,
		},
		"root":     map[string]any{"path": rootfs, "readonly": true},
		"hostname": "fleetdns",
		"mounts": []map[string]any{
			{"destination": "/proc", "type": "proc", "source": "proc"},
			{"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{"destination": "/dev/pts", "type": "devpts", "source": "devpts", "options": []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
			{"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
			{"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": []string{"nosuid", "noexec", "nodev", "ro"}},
			{"destination": "/etc/coredns", "type": "bind", "source": cfgDir, "options": []string{"rbind", "ro", "nosuid", "nodev", "noexec"}},
		},
		"linux": map[string]any{
			"namespaces": []map[string]any{
				{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"},
				{"type": "network", "path": ns},
			},
			"sysctl":        sc.sysctls,
			"maskedPaths":   []string{"/proc/kcore", "/proc/keys", "/proc/timer_list", "/sys/firmware"},
			"readonlyPaths": []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"},
		},
	}
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(bundle, "config.json"), data)

	state := filepath.Join(bundle, "state")
	id := filepath.Base(ns)
	global := []string{"--root", state}
	p := harness.StartProcess(t, "runc "+id, rt, append(global, "run", "--bundle", bundle, id), bundle)
	t.Cleanup(func() {
		exec.Command(rt, append(global, "kill", id, "KILL")...).Run()
		exec.Command(rt, append(global, "delete", "--force", id)...).Run()
	})
	return &container{Process: p, id: id, state: state}
}

// numericUser parses the image's User as a kubelet with runAsNonRoot does:
// it must be numeric and not 0.
func numericUser(t *testing.T, user string) (int, int) {
	t.Helper()
	u, g, ok := strings.Cut(user, ":")
	uid, err1 := strconv.Atoi(u)
	gid, err2 := strconv.Atoi(g)
	if !ok || err1 != nil || err2 != nil || uid == 0 {
		t.Fatalf("image User %q: runAsNonRoot needs a numeric non-zero uid:gid", user)
	}
	return uid, gid
}

// containerStatus is /proc/<pid>/status of the container's process.
func containerStatus(t *testing.T, rt string, c *container) string {
	t.Helper()
	out, err := exec.Command(rt, "--root", c.state, "state", c.id).Output()
	if err != nil {
		t.Fatalf("runc state: %v", err)
	}
	var st struct{ Pid int }
	if err := json.Unmarshal(out, &st); err != nil || st.Pid == 0 {
		t.Fatalf("runc state %s: %v", out, err)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", st.Pid))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeFile(t *testing.T, p string, data []byte) {
	t.Helper()
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
