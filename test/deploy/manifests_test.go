package deploy

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// object is the part of a Kubernetes object these tests read.
type object struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	Data map[string]string `json:"data"`
}

var reDocSep = regexp.MustCompile(`(?m)^---\s*$`)

// readObjects reads every YAML document of a manifest file.
func readObjects(t *testing.T, path string) []object {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return parseObjects(t, path, b)
}

func parseObjects(t *testing.T, name string, b []byte) []object {
	t.Helper()
	var objs []object
	for i, doc := range reDocSep.Split(string(b), -1) {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		var o object
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("%s: document %d: %v", name, i, err)
		}
		objs = append(objs, o)
	}
	return objs
}

func stripComments(doc string) string {
	var out bytes.Buffer
	for _, l := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue
		}
		out.WriteString(l + "\n")
	}
	return out.String()
}

// substitution replaces one thing in a shipped Corefile that cannot exist on
// the test machine, and says why.
type substitution struct {
	old, new string
	why      string
}

// substitute applies the substitutions; each old string must occur in the
// shipped text exactly as many times as count says (0 means at least once),
// so that a change to the manifest cannot silently make the test run
// something else.
func substitute(t *testing.T, text string, subs ...substitution) string {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(text, s.old) {
			t.Fatalf("shipped Corefile no longer contains %q (substituted because %s):\n%s", s.old, s.why, text)
		}
		text = strings.ReplaceAll(text, s.old, s.new)
		t.Logf("substituted %q -> %q: %s", s.old, s.new, s.why)
	}
	return text
}

// mustLines checks that the shipped Corefile has each line (trimmed).
func mustLines(t *testing.T, corefile string, lines ...string) {
	t.Helper()
	have := map[string]bool{}
	for _, l := range strings.Split(corefile, "\n") {
		have[strings.TrimSpace(l)] = true
	}
	for _, l := range lines {
		if !have[l] {
			t.Errorf("shipped Corefile lacks the line %q", l)
		}
	}
}

// noDirective checks that no line of the Corefile starts with one of words.
func noDirective(t *testing.T, corefile string, words ...string) {
	t.Helper()
	for i, l := range strings.Split(corefile, "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		for _, w := range words {
			if f[0] == w {
				t.Errorf("Corefile line %d: %q must not be in this block", i+1, strings.TrimSpace(l))
			}
		}
	}
}

func fmtAddr(ip string, port int) string { return fmt.Sprintf("%s:%d", ip, port) }
