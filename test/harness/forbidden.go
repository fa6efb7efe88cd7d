package harness

import "strings"

// Forbidden returns the lines of a server's log that say the API server
// forbade a call, but for Events refused because another test's namespace
// is being deleted (the shared API server's doing, not the role's).
func Forbidden(log string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(strings.ToLower(l), "forbidden") && !strings.Contains(l, "because it is being terminated") {
			out = append(out, l)
		}
	}
	return out
}
