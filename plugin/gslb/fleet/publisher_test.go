package fleet_test

import (
	"context"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/plugin/gslb/fleet"
	"github.com/fleetdns/fleetdns/plugin/gslb/fleet/fleettest"

	"github.com/miekg/dns"
)

func TestSetPublishesAtMostTheCaps(t *testing.T) {
	for _, tc := range []struct {
		name string
		lim  fleet.Limits
		want int
	}{
		{"hosts", fleet.Limits{MaxHosts: 10}, 10},
		{"records", fleet.Limits{MaxRecords: 2 + 4*7 + 3}, 7}, // SOA, NS, 4 a host
		{"octets", fleet.Limits{MaxOctets: 2000}, 7},          // uncompressed, less 1/32 for headers
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _, addr := publish(t, nil, tc.lim)
			p.Set(hosts(50, 0))
			if n := len(p.View().Hosts); n != tc.want {
				t.Fatalf("published %d hosts, want %d", n, tc.want)
			}
			// What is published passes a Follower with the same caps.
			v, _ := check(t, fleet.NewFollower(zone, addr, nil, tc.lim))
			sameView(t, v, p.View())
		})
	}
}

func TestSetLeavesOutWhatIsNoHostOfTheZone(t *testing.T) {
	p := fleet.NewPublisher(zone, nil, fleet.Limits{})
	long := map[string]string{}
	for i := range 40 {
		long[string(rune('a'+i%26))+string(rune('a'+i/26))] = string(make([]byte, 200))
	}
	p.Set([]fleet.Host{
		{Name: "www.example.com."},
		{Name: "x._fleet.example.org."},
		{Name: "WWW.Example.org"},
		{Name: "www.example.org."}, // the same host again
		{Name: "bad.example.org.", Policy: map[string]string{"a=b": "c"}},
		{Name: "big.example.org.", Policy: long},
		{Name: "v4.example.org.", AAAA: []netip.Addr{netip.MustParseAddr("::ffff:198.18.0.1"), netip.MustParseAddr("fd00::1%eth0")}},
	})
	v := p.View()
	if len(v.Hosts) != 2 || v.Hosts[0].Name != "v4.example.org." || v.Hosts[1].Name != "www.example.org." {
		t.Fatalf("hosts %+v, want v4 and www only", v.Hosts)
	}
	if h := v.Hosts[0]; len(h.A) != 1 || h.A[0] != netip.MustParseAddr("198.18.0.1") || len(h.AAAA) != 1 || h.AAAA[0].Zone() != "" {
		t.Fatalf("v4: %+v, want the mapped address as A and the AAAA without zone", h)
	}
}

func TestServeDNSRefusesWhatIsNotTheView(t *testing.T) {
	p, _, addr := publish(t, nil, fleet.Limits{})
	p.Set(hosts(1, 0))
	m := new(dns.Msg)
	m.SetQuestion("www.example.org.", dns.TypeA)
	if r, err := dns.Exchange(m, addr); err != nil || r.Rcode != dns.RcodeRefused {
		t.Fatalf("a name outside the view: %v %v, want REFUSED", r, err)
	}
	m.SetNotify(fleet.Name(zone))
	if r, err := dns.Exchange(m, addr); err != nil || r.Rcode != dns.RcodeNotImplemented {
		t.Fatalf("a NOTIFY to the publisher: %v %v, want NOTIMP (gslb answers NOTIFYs)", r, err)
	}
}

func TestIsNotify(t *testing.T) {
	m := new(dns.Msg)
	m.SetNotify("_fleet.Example.org.")
	m.Answer = []dns.RR{rr(t, "_fleet.example.org. 5 SOA example.org. h. 42 1 1 1 1")}
	if s, ok := fleet.IsNotify(m, "example.org"); !ok || s != 42 {
		t.Fatalf("IsNotify = %d %v, want 42 true", s, ok)
	}
	m.Answer = nil
	if s, ok := fleet.IsNotify(m, zone); !ok || s != 0 {
		t.Fatalf("without the SOA: %d %v, want 0 true", s, ok)
	}
	if _, ok := fleet.IsNotify(m, "example.com."); ok {
		t.Fatal("a NOTIFY of another view accepted")
	}
	q := new(dns.Msg)
	q.SetQuestion(fleet.Name(zone), dns.TypeSOA)
	if _, ok := fleet.IsNotify(q, zone); ok {
		t.Fatal("a query taken for a NOTIFY")
	}
}

func TestRefusedNotifyIsNotRetried(t *testing.T) {
	var n atomic.Int32
	peer := fleettest.Serve(t, "127.0.0.1:0", dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		n.Add(1)
		fleet.AnswerNotify(w, r, nil, dns.RcodeRefused)
	}), nil)
	p := fleet.NewPublisher(zone, nil, fleet.Limits{})
	p.Notify(t.Context(), []string{peer}) // before the first Set: nothing to say
	p.Set(hosts(1, 0))
	p.Notify(t.Context(), []string{peer})
	time.Sleep(time.Second) // longer than the first backoff
	if got := n.Load(); got != 1 {
		t.Fatalf("%d NOTIFYs, want 1 (REFUSED is an answer)", got)
	}
}

func TestARestartedPublisherIsFollowedFromItsNewSerial(t *testing.T) {
	var cur atomic.Pointer[fleet.Publisher]
	addr := fleettest.Serve(t, "127.0.0.1:0", dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		fleettest.Handler(cur.Load()).ServeDNS(w, r)
	}), nil)
	before := fleet.NewPublisher(zone, nil, fleet.Limits{})
	s1, _ := before.Set(hosts(20, 0))
	cur.Store(before)
	f := fleet.NewFollower(zone, addr, nil, fleet.Limits{})
	check(t, f)

	time.Sleep(1100 * time.Millisecond) // the restart takes a second or more
	after := fleet.NewPublisher(zone, nil, fleet.Limits{})
	cur.Store(after)
	if r, err := dns.Exchange(new(dns.Msg).SetQuestion(fleet.Name(zone), dns.TypeSOA), addr); err != nil || r.Rcode != dns.RcodeServerFailure {
		t.Fatalf("restarted, before its first Set: %v %v, want SERVFAIL (no empty view)", r, err)
	}
	if _, _, err := f.Check(context.Background()); err == nil || f.View().Serial != s1 {
		t.Fatalf("Check of a publisher with no view yet: %v, view %s; want an error, the view kept", err, summary(f.View()))
	}
	s2, _ := after.Set(hosts(20, 1))
	if s2 <= s1 {
		t.Fatalf("serial after the restart %d, not above %d", s2, s1)
	}
	// Its journal does not know s1: the whole view, in answer to the IXFR.
	v, changed := check(t, f)
	if !changed {
		t.Fatal("not changed")
	}
	sameView(t, v, after.View())
}

func TestNotifyIsRetriedUntilThePeerListens(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	pc.Close() // nobody listens: ICMP port unreachable
	p := fleet.NewPublisher(zone, nil, fleet.Limits{})
	p.Set(hosts(1, 0))
	p.Notify(t.Context(), []string{addr})
	time.Sleep(400 * time.Millisecond)
	got := make(chan uint32, 8)
	fleettest.Serve(t, addr, dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		s, _ := fleet.IsNotify(r, zone)
		got <- s
		fleet.AnswerNotify(w, r, nil, dns.RcodeSuccess)
	}), nil)
	select {
	case s := <-got:
		if s != p.View().Serial {
			t.Fatalf("NOTIFY of serial %d, want %d", s, p.View().Serial)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no NOTIFY once the peer listens")
	}
}
