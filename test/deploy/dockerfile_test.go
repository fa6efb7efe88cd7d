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

	"github.com/fleetdns/fleetdns/internal/ociimage"
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
	// make image's flags (cmd/fleetdns-image), with the build arguments.
	wantArgs := []string{"build", "-trimpath", "-ldflags", ociimage.LDFlags("${VERSION}", "${COMMIT}"), "-o", "/out/coredns", "./cmd/coredns"}
	if fmt.Sprintf("%q", b.args) != fmt.Sprintf("%q", wantArgs) {
		t.Errorf("Dockerfile go arguments = %q, want %q", b.args, wantArgs)
	}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	mkText := strings.ReplaceAll(string(mk), "\\\n\t", "")
	if !strings.Contains(mkText, `GOBUILD_FLAGS := -trimpath -ldflags "$(LDFLAGS)"`) ||
		!strings.Contains(mkText, "LDFLAGS := "+ociimage.LDFlags("$(VERSION)", "$(COMMIT)")+"\n") {
		t.Errorf("Makefile's GOBUILD_FLAGS/LDFLAGS are no longer -trimpath -ldflags %q", ociimage.LDFlags("$(VERSION)", "$(COMMIT)"))
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

	// It runs: both version lines, our plugins compiled in, and it serves.
	v, err := exec.Command(out, "-version").CombinedOutput()
	for _, want := range []string{"CoreDNS-1.15.0\n", "fleetdns-" + dockerVersion + "\n", ", " + dockerCommit + "\n"} {
		if err != nil || !strings.Contains(string(v), want) {
			t.Errorf("coredns -version: %v, %q; want %q in it", err, v, want)
		}
	}
	ip := harness.NewIP(t)
	srv := startBinary(t, out, fmt.Sprintf(".:53 {\n    bind %s\n    whoami\n}\n", ip))
	r := harness.Exchange(t, srv, "example.org.", dns.TypeA)
	if r.Rcode != dns.RcodeSuccess || len(r.Extra) == 0 {
		t.Fatalf("whoami through the Dockerfile's binary: rcode %s, extra %v", dns.RcodeToString[r.Rcode], r.Extra)
	}
}

// The build arguments the test gives the Dockerfile's RUN line.
const (
	dockerVersion = "0.0.0-dockerfile"
	dockerCommit  = "89abcdef0123456789abcdef0123456789abcdef"
)

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
			args[i] = strings.NewReplacer("${VERSION}", dockerVersion, "${COMMIT}", dockerCommit).Replace(args[i])
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

// TestDockerfileImageShape: the Dockerfile's final stage is make image's
// shape (internal/ociimage): a numeric user, so that a Pod with only
// runAsNonRoot: true can verify it, and no file capability, which fails to
// exec under capabilities drop ALL (test/image runs make image's image under
// both securityContexts; port 53 comes from the pod sysctl).
func TestDockerfileImageShape(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(harness.ModuleRoot(t), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var user, entry []string
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") {
			continue
		}
		if strings.Contains(line, "setcap") {
			t.Errorf("Dockerfile sets a file capability: %q", line)
		}
		if strings.HasPrefix(line, "USER ") {
			user = append(user, line)
		}
		if strings.HasPrefix(line, "ENTRYPOINT ") {
			entry = append(entry, line)
		}
	}
	want := fmt.Sprintf("USER %d:%d", ociimage.UID, ociimage.GID)
	if len(user) != 1 || user[0] != want {
		t.Errorf("Dockerfile USER lines %q, want exactly %q", user, want)
	}
	if len(entry) != 1 || entry[0] != `ENTRYPOINT ["`+ociimage.Entrypoint+`"]` {
		t.Errorf("Dockerfile ENTRYPOINT lines %q, want [%q]", entry, ociimage.Entrypoint)
	}
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
