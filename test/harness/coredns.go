package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// ModuleRoot returns the directory of the fleetdns go.mod, found upward from
// the test's working directory.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	dir, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(b), "module github.com/fleetdns/fleetdns\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no fleetdns go.mod above the working directory")
		}
		dir = parent
	}
}

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// CoreDNSBinary returns the coredns binary under test: $FLEETDNS_COREDNS, or
// ./cmd/coredns built once per test process (static, as `make build` does).
func CoreDNSBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("FLEETDNS_COREDNS"); p != "" {
		if st, err := os.Stat(p); err != nil || st.IsDir() {
			Missing(t, "FLEETDNS_COREDNS=%s: not a file", p)
		}
		return p
	}
	root := ModuleRoot(t)
	buildOnce.Do(func() {
		gobin, err := exec.LookPath("go")
		if err != nil {
			buildErr = fmt.Errorf("no go toolchain to build ./cmd/coredns: %w", err)
			return
		}
		// One stable place per module root: a later process reuses nothing
		// stale because it builds again (cheap from the build cache) and
		// renames atomically over the previous binary.
		dir := filepath.Join(os.TempDir(), "fleetdns-coredns-build", strings.ReplaceAll(strings.Trim(root, "/"), "/", "_"))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			buildErr = err
			return
		}
		tmp := filepath.Join(dir, fmt.Sprintf("coredns.%d", os.Getpid()))
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, gobin, "build", "-trimpath", "-o", tmp, "./cmd/coredns")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOTOOLCHAIN=local")
		out, err := cmd.CombinedOutput()
		if err != nil {
			os.Remove(tmp)
			buildErr = fmt.Errorf("go build ./cmd/coredns: %v\n%s", err, out)
			return
		}
		buildPath = filepath.Join(dir, "coredns")
		buildErr = os.Rename(tmp, buildPath)
	})
	if buildErr != nil {
		if errors.Is(buildErr, exec.ErrNotFound) {
			Missing(t, "%v", buildErr)
		}
		t.Fatal(buildErr)
	}
	return buildPath
}

// CoreDNS is a coredns process serving a Corefile.
type CoreDNS struct {
	*Process
	// Addr is the DNS address "ip:port" that readiness was checked on (the
	// first bind address and port of the Corefile, or WithDNSAddr).
	Addr string
	// Corefile is the path of the Corefile in Dir.
	Corefile string

	o options
}

type options struct {
	files    map[string]string
	env      []string
	dnsAddr  string
	readyURL string
	probe    *dns.Msg
	timeout  time.Duration
	noWait   bool
	args     []string
}

// Option changes how StartCoreDNS starts and waits.
type Option func(*options)

// WithFile writes a file (relative to the Corefile's directory, which is the
// process's working directory) before start.
func WithFile(name, content string) Option {
	return func(o *options) { o.files[name] = content }
}

// WithEnv adds environment variables ("KEY=value") to the process.
func WithEnv(kv ...string) Option { return func(o *options) { o.env = append(o.env, kv...) } }

// WithArgs adds command-line arguments after -conf.
func WithArgs(args ...string) Option { return func(o *options) { o.args = append(o.args, args...) } }

// WithDNSAddr sets the "ip:port" that readiness is checked on and Addr
// reports, when the Corefile does not name it in a way StartCoreDNS finds.
func WithDNSAddr(addr string) Option { return func(o *options) { o.dnsAddr = addr } }

// WithReadyURL waits for an HTTP 200 from url (the `ready` plugin's
// http://ip:port/ready, or `health`'s /health) instead of a DNS answer.
func WithReadyURL(url string) Option { return func(o *options) { o.readyURL = url } }

// WithProbe waits until this query gets an answer whose rcode is not
// SERVFAIL (the default probe is ". SOA", any rcode counts).
func WithProbe(name string, qtype uint16) Option {
	return func(o *options) {
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(name), qtype)
		o.probe = m
	}
}

// WithStartTimeout bounds the wait for readiness (default 30 s).
func WithStartTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithoutWait returns as soon as the process has started (for tests of
// start-up failures and start-up timing).
func WithoutWait() Option { return func(o *options) { o.noWait = true } }

// StartCoreDNS writes corefile (and WithFile files) into a temp dir, starts
// the coredns binary on it, and waits until it answers DNS on Addr (or
// WithReadyURL). The process is stopped in t.Cleanup and its log is dumped
// if the test failed.
func StartCoreDNS(t testing.TB, corefile string, opts ...Option) *CoreDNS {
	t.Helper()
	bin := CoreDNSBinary(t)
	o := options{files: map[string]string{}, timeout: 30 * time.Second}
	for _, f := range opts {
		f(&o)
	}
	dir := t.TempDir()
	for name, content := range o.files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cf := filepath.Join(dir, "Corefile")
	if err := os.WriteFile(cf, []byte(corefile), 0o644); err != nil {
		t.Fatal(err)
	}
	if o.dnsAddr == "" {
		o.dnsAddr = corefileDNSAddr(corefile)
	}
	args := append([]string{"-conf", cf}, o.args...)
	c := &CoreDNS{Addr: o.dnsAddr, Corefile: cf, o: o}
	c.Process = StartProcess(t, "coredns", bin, args, dir, o.env...)
	if !o.noWait {
		if err := c.WaitReady(o.timeout); err != nil {
			t.Fatalf("coredns did not become ready: %v\n--- log ---\n%s", err, c.Log())
		}
	}
	return c
}

// Restart stops coredns and starts it again on the same Corefile, waiting
// for readiness as StartCoreDNS did.
func (c *CoreDNS) Restart() {
	c.Process.Restart()
	if !c.o.noWait {
		if err := c.WaitReady(c.o.timeout); err != nil {
			c.t.Fatalf("coredns did not become ready after restart: %v", err)
		}
	}
}

// WaitReady waits until the server answers its readiness probe.
func (c *CoreDNS) WaitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		if !c.Running() {
			return fmt.Errorf("coredns exited: %v", c.ExitErr())
		}
		last = c.probeOnce()
		if last == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("after %v: %v", timeout, last)
}

func (c *CoreDNS) probeOnce() error {
	if c.o.readyURL != "" {
		cl := http.Client{Timeout: time.Second}
		resp, err := cl.Get(c.o.readyURL)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", c.o.readyURL, resp.Status)
		}
		return nil
	}
	if c.Addr == "" {
		return errors.New("no DNS address to probe: use WithDNSAddr or WithReadyURL")
	}
	m := c.o.probe
	anyRcode := false
	if m == nil {
		m = new(dns.Msg)
		m.SetQuestion(".", dns.TypeSOA)
		anyRcode = true
	}
	cl := dns.Client{Net: "udp", Timeout: 300 * time.Millisecond}
	r, _, err := cl.Exchange(m.Copy(), c.Addr)
	if err != nil {
		return err
	}
	if !anyRcode && r.Rcode == dns.RcodeServerFailure {
		return fmt.Errorf("probe %s answered SERVFAIL", m.Question[0].Name)
	}
	return nil
}

var reBind = regexp.MustCompile(`(?m)^\s*bind\s+(\S+)`)

// corefileDNSAddr guesses the DNS address: the first `bind` address and the
// port of the first server block's first key (53 when it has none).
func corefileDNSAddr(corefile string) string {
	bm := reBind.FindStringSubmatch(corefile)
	if bm == nil {
		return ""
	}
	port := "53"
	for _, line := range strings.Split(corefile, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		keys := strings.FieldsFunc(line, func(r rune) bool { return r == ' ' || r == ',' || r == '{' || r == '\t' })
		if len(keys) == 0 {
			continue
		}
		key := keys[0]
		if i := strings.Index(key, "://"); i >= 0 {
			key = key[i+3:]
		}
		if i := strings.LastIndex(key, ":"); i >= 0 {
			port = key[i+1:]
		}
		break
	}
	return net.JoinHostPort(bm[1], port)
}

// RequirePlugins stops the test through Missing when the coredns binary
// under test lacks one of the plugins (a build from before they landed): a
// skip, or a failure under FLEETDNS_REQUIRE_ALL=1.
func RequirePlugins(t testing.TB, names ...string) {
	t.Helper()
	bin := CoreDNSBinary(t)
	out, err := Run(Context(t), bin, "-plugins")
	if err != nil {
		t.Fatalf("%s -plugins: %v\n%s", bin, err, out)
	}
	have := map[string]bool{}
	for _, l := range strings.Fields(out) {
		have[strings.TrimPrefix(l, "dns.")] = true
	}
	for _, n := range names {
		if !have[n] {
			Missing(t, "plugin %s is not in %s", n, bin)
		}
	}
}
