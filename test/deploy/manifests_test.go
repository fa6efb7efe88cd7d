package deploy

import (
	"fmt"
	"strings"
	"testing"
)

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
