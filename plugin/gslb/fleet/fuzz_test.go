package fleet

import (
	"testing"

	"github.com/miekg/dns"
)

// FuzzTransfer feeds a Follower's transfer reader whatever a hostile peer
// may send: it returns a view or an error, never panics, and a view it
// returns is within the caps and re-encodes to valid names.
func FuzzTransfer(f *testing.F) {
	n := newNames("example.org.")
	seed := func(ixfr bool, rrs ...string) {
		m := new(dns.Msg)
		for _, s := range rrs {
			rr, err := dns.NewRR(s)
			if err != nil {
				f.Fatal(err)
			}
			m.Answer = append(m.Answer, rr)
		}
		b, err := m.Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, ixfr)
	}
	soa := func(serial string) string {
		return "_fleet.example.org. 5 SOA example.org. h._fleet.example.org. " + serial + " 30 10 86400 5"
	}
	seed(false, soa("100"), "_fleet.example.org. 5 NS example.org.", `www.h._fleet.example.org. 30 TXT "gslb/a=b"`, "www.h._fleet.example.org. 30 A 198.18.0.1", soa("100"))
	seed(true, soa("101"), soa("100"), "www.h._fleet.example.org. 30 A 198.18.0.1", soa("101"), "www.h._fleet.example.org. 30 A 198.18.0.2", soa("101"))
	seed(true, soa("101"), soa("100"), soa("101"), `api.h._fleet.example.org. 30 TXT ""`, soa("101"))
	lim := Limits{MaxHosts: 20, MaxRecords: 100, MaxOctets: 1 << 16}.withDefaults()
	f.Fuzz(func(t *testing.T, b []byte, ixfr bool) {
		m := new(dns.Msg)
		if err := m.Unpack(b); err != nil {
			return
		}
		base := &View{Zone: n.zone, Serial: 100, Hosts: []Host{{Name: "www.example.org.", TTL: 30, A: nil, Policy: map[string]string{"gslb/a": "b"}}}}
		base.Hosts[0].A = append(base.Hosts[0].A, mustAddr("198.18.0.1"))
		x := &xfr{names: n, lim: lim, qtype: dns.TypeAXFR}
		if ixfr {
			x.cur, x.qtype = newFollowed(n, base), dns.TypeIXFR
		}
		if err := x.add(m.Answer); err != nil {
			return
		}
		next, err := x.done()
		if err != nil || next == nil {
			return
		}
		if len(next.view.Hosts) > lim.MaxHosts {
			t.Fatalf("%d hosts over the cap", len(next.view.Hosts))
		}
		for _, h := range next.view.Hosts {
			if !inZone(h.Name, n.zone) || inZone(h.Name, n.apex) {
				t.Fatalf("host %s outside the zone", h.Name)
			}
			for _, rr := range n.encodeHost(nil, &h) {
				if _, ok := dns.IsDomainName(rr.Header().Name); !ok {
					t.Fatalf("owner %s", rr.Header().Name)
				}
			}
		}
	})
}
