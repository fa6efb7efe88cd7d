package main

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

// TestDirectivesMatchPluginCfg fails when zdirectives.go was not regenerated
// after plugin.cfg changed (run `go generate ./cmd/coredns`).
func TestDirectivesMatchPluginCfg(t *testing.T) {
	f, err := os.Open("../../plugin.cfg")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var want []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		l := strings.TrimSpace(s.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		name, _, _ := strings.Cut(l, ":")
		want = append(want, name)
	}
	if strings.Join(directives, " ") != strings.Join(want, " ") {
		t.Fatalf("zdirectives.go differs from plugin.cfg; run go generate ./cmd/coredns\n got: %v\nwant: %v", directives, want)
	}
}
