package splitdns

import (
	"testing"

	"github.com/miekg/dns"
)

func TestMarkUnmarkRestoresTheQuery(t *testing.T) {
	for _, edns := range []bool{false, true} {
		r := new(dns.Msg)
		r.SetQuestion("example.com.", dns.TypeA)
		if edns {
			r.SetEdns0(4096, true)
		}
		before := r.String()
		if looped(r) {
			t.Fatalf("fresh query seen as looped")
		}
		m := mark(r)
		if !looped(r) {
			t.Fatalf("marked query not seen as looped")
		}
		m.unmark(r)
		if after := r.String(); after != before {
			t.Errorf("edns=%v: query changed by mark/unmark:\n%s\n---\n%s", edns, before, after)
		}
	}
}

func BenchmarkMarkAndCheck(b *testing.B) {
	r := new(dns.Msg)
	r.SetQuestion("host-1.svc.zone-1.corp.", dns.TypeA)
	reply := new(dns.Msg)
	reply.SetReply(r)
	b.ReportAllocs()
	for b.Loop() {
		if looped(r) {
			b.Fatal("looped")
		}
		m := mark(r)
		m.unmark(r)
		m.unmarkReply(reply)
	}
}
