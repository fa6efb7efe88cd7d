package harness

import "strings"

// TailLines returns the last n lines of s (a log, a tool's output), for a
// failure message.
func TailLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}

// GrepLines returns the lines of s that contain sub (a metric's series out
// of a /metrics page), for a failure message.
func GrepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// NormCorefile drops a Corefile's comments, blank lines and indentation,
// and collapses spaces: what CoreDNS's parser sees, so that two renderings
// of one Corefile compare equal.
func NormCorefile(s string) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if i := strings.Index(l, "#"); i >= 0 {
			l = l[:i]
		}
		if l = strings.Join(strings.Fields(l), " "); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}
