package benchkit

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// versionOf says how to ask a tool its version and where the version is in
// its answer, by the tool's base name.
var versionOf = map[string]struct {
	args []string
	re   *regexp.Regexp
	name string
}{
	"coredns": {[]string{"-version"}, regexp.MustCompile(`CoreDNS-(\S+)`), "CoreDNS"},
	"nsd":     {[]string{"-v"}, regexp.MustCompile(`NSD version (\S+)`), "NSD"},
	"knotd":   {[]string{"--version"}, regexp.MustCompile(`version (\S+)`), "Knot DNS"},
	"dnsperf": {[]string{"-h"}, regexp.MustCompile(`Version (\S+)`), "dnsperf"},
	"resperf": {[]string{"-h"}, regexp.MustCompile(`Version (\S+)`), "resperf"},
	"dnsdist": {[]string{"--version"}, regexp.MustCompile(`dnsdist (\S+)`), "dnsdist"},
	"unbound": {[]string{"-V"}, regexp.MustCompile(`Version (\S+)`), "Unbound"},
}

// Versions is "Linux <release>; CoreDNS 1.15.0, NSD 4.6.1, ..." for the
// programs given (paths or names on PATH whose base name is, or begins with,
// coredns, nsd, knotd, dnsperf, resperf, dnsdist or unbound), each "?" when it does not
// say. For a benchmark's report: which versions were measured.
func Versions(programs ...string) string {
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	var parts []string
	for _, p := range programs {
		v, ok := versionOf[filepath.Base(p)]
		for tool, tv := range versionOf {
			// A copy named for what it is, like coredns-<commit>.
			if !ok && strings.HasPrefix(filepath.Base(p), tool) {
				v, ok = tv, true
			}
		}
		if !ok {
			continue
		}
		out, _ := exec.Command(p, v.args...).CombinedOutput()
		got := "?"
		if m := v.re.FindSubmatch(out); m != nil {
			got = string(m[1])
		}
		parts = append(parts, v.name+" "+got)
	}
	return "Linux " + strings.TrimSpace(string(kernel)) + "; " + strings.Join(parts, ", ")
}
