package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/fleetdns/fleetdns/test/harness"
)

// fencedBlocks returns the contents of the ``` blocks of a Markdown file.
func fencedBlocks(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	var cur []string
	in := false
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			if in {
				blocks = append(blocks, strings.Join(cur, "\n"))
				cur = nil
			}
			in = !in
			continue
		}
		if in {
			cur = append(cur, l)
		}
	}
	return blocks
}

func normalize(s string) string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		out = append(out, strings.TrimRight(l, " \t"))
	}
	return strings.Join(out, "\n")
}

// TestDocsQuoteTheShippedCorefiles keeps the Corefiles that the deployment
// guides show identical to the ones in the manifests they tell users to apply.
func TestDocsQuoteTheShippedCorefiles(t *testing.T) {
	root := harness.ModuleRoot(t)
	for _, c := range []struct{ doc, manifest, configMap, first string }{
		{"docs/sidecar.md", "deploy/sidecar/configmap.yaml", "fleetdns-sidecar", ".:53 {"},
		{"docs/multicluster-gslb.md", "deploy/gslb/configmap.yaml", "fleetdns-gslb", "gslb.example.com:53 {"},
	} {
		shipped := normalize(harness.ShippedCorefile(t, c.manifest, c.configMap))
		found := false
		for _, b := range fencedBlocks(t, filepath.Join(root, c.doc)) {
			if strings.HasPrefix(strings.TrimSpace(b), c.first) {
				found = true
				if normalize(b) != shipped {
					t.Errorf("%s quotes a Corefile that differs from %s:\n--- doc ---\n%s\n--- shipped ---\n%s", c.doc, c.manifest, normalize(b), shipped)
				}
				break
			}
		}
		if !found {
			t.Errorf("%s quotes no Corefile starting %q", c.doc, c.first)
		}
	}
}

var reRepoPath = regexp.MustCompile("`((?:deploy|docs|plugin|examples|test)/[A-Za-z0-9_./-]*)`")

// reRepoPathStart is where a backquoted repository path begins: every one
// must be one reRepoPath reads, or a path would go unchecked.
var reRepoPathStart = regexp.MustCompile("`(?:deploy|docs|plugin|examples|test)/")

// TestDocsNameFilesThatExist checks every repository path that README.md and
// the docs name in backquotes.
func TestDocsNameFilesThatExist(t *testing.T) {
	root := harness.ModuleRoot(t)
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(docs) < 5 {
		t.Fatalf("docs/*.md: %v %v", docs, err)
	}
	docs = append(docs, filepath.Join(root, "README.md"))
	n := 0
	for _, d := range docs {
		b, err := os.ReadFile(d)
		if err != nil {
			t.Fatal(err)
		}
		found := reRepoPath.FindAllStringSubmatch(string(b), -1)
		if starts := len(reRepoPathStart.FindAllString(string(b), -1)); len(found) != starts {
			t.Errorf("%s: %d backquoted repository paths begin, the pattern reads %d: a path is left unchecked", filepath.Base(d), starts, len(found))
		}
		for _, m := range found {
			p := strings.TrimSuffix(m[1], "/")
			if strings.Contains(p, "<") || strings.HasSuffix(p, "/ap") {
				continue
			}
			n++
			if _, err := os.Stat(filepath.Join(root, p)); err != nil {
				t.Errorf("%s names %s, which does not exist", filepath.Base(d), p)
			}
		}
	}
	// The docs name dozens of paths: none found means the pattern, not the
	// docs, changed, and nothing was checked.
	if n == 0 {
		t.Fatalf("no repository path found in %d docs: the pattern matches nothing", len(docs))
	}
	t.Logf("%d paths named in %d docs", n, len(docs))
}

// The markers a shell block of README.md or docs/ carries: a command either
// runs in a test (named, so that this test can check it exists) or needs
// what the test machine has not. A marker on a line of its own covers the
// block; at the end of a command line, that command.
var (
	reRunBy = regexp.MustCompile(`#\s*run by (Test\w+|make [a-z][a-z0-9-]*)\b`)
	reNeeds = regexp.MustCompile(`#\s*needs (a real cluster|a registry|a container daemon)\b`)
)

// TestDocsShellBlocksRunOrAreMarked checks every ```sh/```bash/```shell
// block of README.md and docs/*.md: it carries, on a line of its own or at
// the end of each command, `# run by TestName` (a test function of this
// repository that runs it), `# run by make TARGET` (a Makefile target), or
// `# needs a real cluster` (or a registry, or a container daemon). A new
// command with neither fails here.
func TestDocsShellBlocksRunOrAreMarked(t *testing.T) {
	root := harness.ModuleRoot(t)
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, filepath.Join(root, "README.md"))
	tests := testFuncs(t, root)
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	n, run := 0, 0
	for _, d := range docs {
		rel, _ := filepath.Rel(root, d)
		for _, b := range shellBlocks(t, d) {
			n++
			wholeBlock := false
			var unmarked []string
			continued := false // the line before ended in a backslash
			for _, l := range strings.Split(b.text, "\n") {
				l = strings.TrimSpace(l)
				marked := false
				if m := reRunBy.FindStringSubmatch(l); m != nil {
					marked = true
					run++
					if target, ok := strings.CutPrefix(m[1], "make "); ok {
						if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(target) + `:`).Match(mk) {
							t.Errorf("%s:%d: %q names no Makefile target", rel, b.line, l)
						}
					} else if !tests[m[1]] {
						t.Errorf("%s:%d: %q names no test function of this repository", rel, b.line, l)
					}
				} else if reNeeds.MatchString(l) {
					marked = true
				}
				isCommand := l != "" && !strings.HasPrefix(l, "#") && !continued
				if marked && strings.HasPrefix(l, "#") {
					wholeBlock = true
				} else if isCommand && !marked && !strings.HasSuffix(l, "\\") {
					unmarked = append(unmarked, l)
				}
				continued = strings.HasSuffix(l, "\\")
			}
			if !wholeBlock && len(unmarked) > 0 {
				t.Errorf("%s:%d: commands neither run by a test (`# run by TestName`, `# run by make TARGET`) nor marked `# needs a real cluster`: %q", rel, b.line, unmarked)
			}
		}
	}
	if n < 10 {
		t.Fatalf("found only %d shell blocks in %d files", n, len(docs))
	}
	t.Logf("%d shell blocks, %d markers naming a test or make target", n, run)
}

type block struct {
	line int // of the opening fence
	text string
}

// shellBlocks returns the ```sh, ```bash and ```shell blocks of a Markdown
// file (indented ones, in list items, too).
func shellBlocks(t *testing.T, path string) []block {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []block
	var cur *block
	inOther := false
	for i, l := range strings.Split(string(b), "\n") {
		tl := strings.TrimSpace(l)
		if !strings.HasPrefix(tl, "```") {
			if cur != nil {
				cur.text += l + "\n"
			}
			continue
		}
		switch {
		case cur != nil:
			blocks = append(blocks, *cur)
			cur = nil
		case inOther:
			inOther = false
		default:
			switch strings.TrimPrefix(tl, "```") {
			case "sh", "bash", "shell":
				cur = &block{line: i + 1}
			default:
				inOther = true
			}
		}
	}
	return blocks
}

var reTestFunc = regexp.MustCompile(`(?m)^func (Test\w+)\(t \*testing\.T\)`)

// testFuncs lists the test functions of every _test.go file of the module.
func testFuncs(t *testing.T, root string) map[string]bool {
	t.Helper()
	funcs := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, de os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if de.IsDir() && (de.Name() == ".git" || de.Name() == "bin") {
			return filepath.SkipDir
		}
		if de.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range reTestFunc.FindAllStringSubmatch(string(b), -1) {
			funcs[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return funcs
}

// TestREADMEGoVersionIsGoMods keeps README's "Go X or later" at go.mod's go
// line: an older toolchain refuses the module (GOTOOLCHAIN=local).
func TestREADMEGoVersionIsGoMods(t *testing.T) {
	root := harness.ModuleRoot(t)
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "Go " + string(m[1]) + " or later"; !strings.Contains(string(readme), want) {
		t.Errorf("README.md does not say %q (go.mod: go %s)", want, m[1])
	}
}
