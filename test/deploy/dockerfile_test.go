package deploy

import (
	"bufio"
	"context"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/test/harness"
	"github.com/miekg/dns"
)

// dockerBuild is the Dockerfile's `go build` command: its environment
// assignments and its arguments, as the shell would split them.
type dockerBuild struct {
	env  []string // e.g. CGO_ENABLED=0
	args []string // after "go", e.g. build -trimpath -ldflags "-s -w" -o /out/coredns ./cmd/coredns
}

// readDockerBuild finds the one RUN line of the build stage that runs
// `go build` and splits it.
func readDockerBuild(t *testing.T, root string) dockerBuild {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var found []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "RUN ") && strings.Contains(line, "go build") {
			found = append(found, strings.TrimPrefix(line, "RUN "))
		}
	}
	if len(found) != 1 {
		t.Fatalf("Dockerfile: want exactly one RUN line with `go build`, found %d: %q", len(found), found)
	}
	words := shellSplit(t, found[0])
	var b dockerBuild
	i := 0
	for ; i < len(words) && regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`).MatchString(words[i]); i++ {
		b.env = append(b.env, words[i])
	}
	if i >= len(words) || words[i] != "go" {
		t.Fatalf("Dockerfile: build line %q does not run go after its environment", found[0])
	}
	b.args = words[i+1:]
	return b
}

// shellSplit splits a command line on blanks, honouring double and single
// quotes (all a Dockerfile RUN line of ours uses).
func shellSplit(t *testing.T, s string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case r == '&' || r == '|' || r == ';' || r == '\\':
			t.Fatalf("Dockerfile build line %q: shell operators are not expected in it", s)
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		t.Fatalf("Dockerfile build line %q: unterminated quote", s)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// TestDockerfileBuildsStaticBinary builds cmd/coredns with exactly the
// Dockerfile's command (only the output path differs), and checks that the
// result is what a distroless/static image needs: no interpreter, no dynamic
// section, stripped; and that it runs and serves.
func TestDockerfileBuildsStaticBinary(t *testing.T) {
	root := harness.ModuleRoot(t)
	b := readDockerBuild(t, root)

	// The flags the image is promised to have (issue 5, Makefile's
	// GOBUILD_FLAGS): a change to either side shows up here.
	if got, want := strings.Join(b.env, " "), "CGO_ENABLED=0"; got != want {
		t.Errorf("Dockerfile build environment = %q, want %q", got, want)
	}
	wantArgs := []string{"build", "-trimpath", "-ldflags", "-s -w", "-o", "/out/coredns", "./cmd/coredns"}
	if fmt.Sprintf("%q", b.args) != fmt.Sprintf("%q", wantArgs) {
		t.Errorf("Dockerfile go arguments = %q, want %q", b.args, wantArgs)
	}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mk), `GOBUILD_FLAGS := -trimpath -ldflags "-s -w"`) {
		t.Errorf("Makefile's GOBUILD_FLAGS are no longer the Dockerfile's -trimpath -ldflags \"-s -w\"")
	}

	out := dockerfileBinary(t)

	ef, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("binary has program header %v: not static (distroless/static has no libc or loader)", p.Type)
		}
	}
	if s := ef.Section(".dynamic"); s != nil {
		t.Errorf("binary has a .dynamic section: not static")
	}
	if s := ef.Section(".interp"); s != nil {
		t.Errorf("binary has an .interp section: not static")
	}
	if libs, _ := ef.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("binary imports shared libraries %v", libs)
	}
	if s := ef.Section(".symtab"); s != nil {
		t.Errorf("binary has a symbol table: -ldflags \"-s -w\" did not strip it")
	}

	// It runs: the version line, our plugins compiled in, and it serves.
	v, err := exec.Command(out, "-version").CombinedOutput()
	if err != nil || !strings.Contains(string(v), "CoreDNS-1.15.0") {
		t.Errorf("coredns -version: %v, %q; want CoreDNS-1.15.0", err, v)
	}
	ip := harness.NewIP(t)
	srv := startBinary(t, out, fmt.Sprintf(".:53 {\n    bind %s\n    whoami\n}\n", ip))
	r := harness.Exchange(t, srv, "example.org.", dns.TypeA)
	if r.Rcode != dns.RcodeSuccess || len(r.Extra) == 0 {
		t.Fatalf("whoami through the Dockerfile's binary: rcode %s, extra %v", dns.RcodeToString[r.Rcode], r.Extra)
	}
}

var (
	dockerOnce sync.Once
	dockerBin  string
	dockerErr  error
	dockerDir  string // removed by TestMain
)

// dockerfileBinary builds cmd/coredns once per test process with exactly the
// Dockerfile's build command; only the -o path differs. The folder is
// world-readable so that a non-root user can run the binary.
func dockerfileBinary(t *testing.T) string {
	t.Helper()
	root := harness.ModuleRoot(t)
	b := readDockerBuild(t, root)
	gobin, err := exec.LookPath("go")
	if err != nil {
		harness.Missing(t, "go toolchain: %v", err)
	}
	dockerOnce.Do(func() {
		dockerDir, dockerErr = os.MkdirTemp("", "fleetdns-dockerfile-")
		if dockerErr != nil {
			return
		}
		if dockerErr = os.Chmod(dockerDir, 0o755); dockerErr != nil {
			return
		}
		out := filepath.Join(dockerDir, "coredns")
		args := append([]string(nil), b.args...)
		for i := range args {
			if args[i] == "-o" && i+1 < len(args) {
				args[i+1] = out
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, gobin, args...)
		cmd.Dir = root
		// The golang image's environment plus the RUN line's assignments;
		// GOTOOLCHAIN=local because go.mod's go line is the image's Go.
		cmd.Env = append(append(os.Environ(), "GOTOOLCHAIN=local"), b.env...)
		if o, err := cmd.CombinedOutput(); err != nil {
			dockerErr = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, o)
			return
		}
		dockerBin = out
	})
	if dockerErr != nil {
		t.Fatal(dockerErr)
	}
	return dockerBin
}

// TestNonRootBindsPort53WithFileCapability runs the Dockerfile's binary as
// the image and the manifests run it: uid/gid 65532 (distroless nonroot),
// every capability dropped from the bounding set but NET_BIND_SERVICE,
// no_new_privs (allowPrivilegeEscalation: false). With the Dockerfile's
// setcap it binds port 53 and answers; without it the bind is refused, so the
// file capability is what makes the non-root image work.
func TestNonRootBindsPort53WithFileCapability(t *testing.T) {
	if os.Geteuid() != 0 {
		harness.Missing(t, "root, to switch to uid 65532 as the container runtime does")
	}
	setcap := harness.LookPath(t, "setcap")
	setpriv := harness.LookPath(t, "setpriv")
	built := dockerfileBinary(t)

	run := func(t *testing.T, withCap bool) (*harness.Process, string) {
		dir, err := os.MkdirTemp("", "fleetdns-nonroot-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		bin := filepath.Join(dir, "coredns")
		data, err := os.ReadFile(built)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, data, 0o755); err != nil {
			t.Fatal(err)
		}
		if withCap {
			// The Dockerfile's command, on the same binary.
			if o, err := exec.Command(setcap, "cap_net_bind_service=+ep", bin).CombinedOutput(); err != nil {
				t.Fatalf("setcap: %v\n%s", err, o)
			}
		}
		ip := harness.NewIP(t)
		cf := filepath.Join(dir, "Corefile")
		if err := os.WriteFile(cf, []byte(fmt.Sprintf(".:53 {\n    bind %s\n    whoami\n}\n", ip)), 0o644); err != nil {
			t.Fatal(err)
		}
		p := harness.StartProcess(t, "coredns-nonroot", setpriv, []string{
			"--reuid=65532", "--regid=65532", "--clear-groups",
			"--inh-caps=-all", "--bounding-set=-all,+net_bind_service", "--no-new-privs",
			bin, "-conf", cf,
		}, dir)
		return p, ip + ":53"
	}

	t.Run("with setcap", func(t *testing.T) {
		p, addr := run(t, true)
		if err := waitDNS(p, addr, 30*time.Second); err != nil {
			t.Fatalf("non-root coredns with cap_net_bind_service did not serve %s: %v\n%s", addr, err, p.Log())
		}
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Pid()))
		if err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`(?m)^Uid:\s+65532\s`).Match(st) {
			t.Errorf("coredns does not run as uid 65532:\n%s", st)
		}
	})
	t.Run("without setcap", func(t *testing.T) {
		p, _ := run(t, false)
		select {
		case <-p.Exited():
		case <-time.After(30 * time.Second):
			t.Fatalf("non-root coredns without the file capability still runs:\n%s", p.Log())
		}
		if !strings.Contains(p.Log(), "permission denied") {
			t.Errorf("want a bind permission error, log:\n%s", p.Log())
		}
	})
}

// startBinary starts a given coredns binary (not the harness's) on corefile
// and waits for DNS on the first bind address, port 53.
func startBinary(t *testing.T, bin, corefile string) string {
	t.Helper()
	dir := t.TempDir()
	cf := filepath.Join(dir, "Corefile")
	if err := os.WriteFile(cf, []byte(corefile), 0o644); err != nil {
		t.Fatal(err)
	}
	p := harness.StartProcess(t, "coredns", bin, []string{"-conf", cf}, dir)
	addr := bindAddr(t, corefile)
	if err := waitDNS(p, addr, 30*time.Second); err != nil {
		t.Fatalf("%s did not answer on %s: %v\n%s", bin, addr, err, p.Log())
	}
	return addr
}

var reBindLine = regexp.MustCompile(`(?m)^\s*bind\s+(\S+)`)

func bindAddr(t *testing.T, corefile string) string {
	t.Helper()
	m := reBindLine.FindStringSubmatch(corefile)
	if m == nil {
		t.Fatalf("no bind line in %q", corefile)
	}
	return m[1] + ":53"
}

// waitDNS waits until addr answers ". SOA" with any rcode.
func waitDNS(p *harness.Process, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		if !p.Running() {
			return fmt.Errorf("exited: %v", p.ExitErr())
		}
		_, last = harness.Ask(addr, ".", dns.TypeSOA, harness.Timeout(300*time.Millisecond))
		if last == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return last
}
