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
		shipped := normalize(shippedCorefile(t, root, c.manifest, c.configMap))
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

var reRepoPath = regexp.MustCompile("`((?:deploy|docs|plugin|examples|test)/[A-Za-z0-9_./-]+)`")

// TestDocsNameFilesThatExist checks every repository path that the docs name
// in backquotes.
func TestDocsNameFilesThatExist(t *testing.T) {
	root := harness.ModuleRoot(t)
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(docs) < 5 {
		t.Fatalf("docs/*.md: %v %v", docs, err)
	}
	n := 0
	for _, d := range docs {
		b, err := os.ReadFile(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range reRepoPath.FindAllStringSubmatch(string(b), -1) {
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
	t.Logf("%d paths named in %d docs", n, len(docs))
}
