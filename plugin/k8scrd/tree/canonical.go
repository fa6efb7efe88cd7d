package tree

import (
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// SortCanonical sorts names label by label from the right (RFC 4034 §6.1;
// names are lower case already), computing each name's key once.
func SortCanonical(names []string) {
	keys := make(map[string]string, len(names))
	for _, n := range names {
		labels := dns.SplitDomainName(n)
		slices.Reverse(labels)
		keys[n] = strings.Join(labels, "\x00")
	}
	slices.SortFunc(names, func(a, b string) int { return strings.Compare(keys[a], keys[b]) })
}
