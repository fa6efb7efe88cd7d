package builder

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/tree"
	"github.com/miekg/dns"
)

// oversized's size is an upper bound of the packed answer, exact once it
// says the set is too large.
func TestOversizedIsExactNearTheLimit(t *testing.T) {
	b := New(Config{Zones: []string{"size.example."}, TTL: 30, NegTTL: 30}, new(atomic.Pointer[tree.Snapshot]))
	name := "t.size.example."
	// TXT records of 255-octet strings: each 2 (owner pointer) + 10 + 256 octets.
	for _, c := range []struct {
		n    int
		want bool
	}{{200, false}, {243, false}, {245, true}} {
		var s tree.Merged
		s.Type = dns.TypeTXT
		for i := range c.n {
			s.RRs = append(s.RRs, &dns.TXT{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeTXT, Class: dns.ClassINET}, Txt: []string{fmt.Sprintf("%03d", i) + strings.Repeat("y", 252)}})
		}
		size, too := b.oversized(name, s)
		if too != c.want {
			t.Errorf("%d TXT records (%d octets): oversized %v, want %v", c.n, size, too, c.want)
		}
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeTXT)
		m.Answer = s.RRs
		m.Ns = b.snap.Load().Zones["size.example."].SOA
		m.Compress = true
		if wire, err := m.Pack(); err != nil || (len(wire) > dns.MaxMsgSize) != c.want || len(wire) > size || (too && len(wire) != size) {
			t.Errorf("%d TXT records: packed %d octets (%v), oversized said %d, %v", c.n, len(wire), err, size, too)
		}
	}
}
