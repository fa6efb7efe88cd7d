package deploy

import (
	"fmt"
	"strings"
	"testing"
)

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
