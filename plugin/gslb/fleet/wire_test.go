package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/plugin/gslb/fleet"
	"github.com/fleetdns/fleetdns/plugin/gslb/fleet/fleettest"

	"github.com/miekg/dns"
)

const zone = "example.org."

// hosts returns n hosts of zone, host i with targets that depend on gen.
func hosts(n, gen int) []fleet.Host { return fleettest.Hosts(zone, n, gen) }

// recorder serves a handler and records the type of every question and the
// number of answer records written.
type recorder struct {
	h        dns.Handler
	mu       sync.Mutex
	done     sync.Cond // signalled under mu when inflight drops
	inflight int
	qs       []string // "AXFR 1234" (type, answer records)
}

func (rec *recorder) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	if r.Opcode != dns.OpcodeQuery || len(r.Question) != 1 {
		// Not a follower's: a stray NOTIFY that another test's
		// publisher retried to a port this server now holds.
		rec.h.ServeDNS(w, r)
		return
	}
	rec.mu.Lock()
	i := len(rec.qs)
	rec.qs = append(rec.qs, "")
	rec.inflight++
	rec.mu.Unlock()
	cw := &countingWriter{ResponseWriter: w}
	rec.h.ServeDNS(cw, r)
	rec.mu.Lock()
	rec.qs[i] = fmt.Sprintf("%s %d", dns.TypeToString[r.Question[0].Qtype], cw.n)
	rec.inflight--
	rec.done.Broadcast()
	rec.mu.Unlock()
}

// take returns the requests so far, in order of arrival, once none is in
// flight, and forgets them.
func (rec *recorder) take() []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for rec.inflight > 0 {
		rec.done.Wait()
	}
	qs := rec.qs
	rec.qs = nil
	return qs
}

type countingWriter struct {
	dns.ResponseWriter
	n int
}

func (w *countingWriter) WriteMsg(m *dns.Msg) error {
	w.n += len(m.Answer)
	return w.ResponseWriter.WriteMsg(m)
}

// publish starts a Publisher of zone on a loopback port.
func publish(t *testing.T, keys *fleet.Keys, lim fleet.Limits) (*fleet.Publisher, *recorder, string) {
	t.Helper()
	p := fleet.NewPublisher(zone, keys, lim)
	rec := &recorder{h: fleettest.Handler(p)}
	rec.done.L = &rec.mu
	return p, rec, fleettest.Serve(t, "127.0.0.1:0", rec, keys.Secrets())
}

func check(t *testing.T, f *fleet.Follower) (*fleet.View, bool) {
	t.Helper()
	v, changed, err := f.Check(context.Background())
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	return v, changed
}

func sameView(t *testing.T, got, want *fleet.View) {
	t.Helper()
	if got == nil || want == nil || got.Serial != want.Serial || got.Zone != want.Zone || !reflect.DeepEqual(got.Hosts, want.Hosts) {
		if got != nil && want != nil && len(got.Hosts) == len(want.Hosts) {
			for i := range got.Hosts {
				if !reflect.DeepEqual(got.Hosts[i], want.Hosts[i]) {
					t.Fatalf("host %d:\n got %+v\nwant %+v", i, got.Hosts[i], want.Hosts[i])
				}
			}
		}
		t.Fatalf("view differs:\n got %s\nwant %s", summary(got), summary(want))
	}
}

func summary(v *fleet.View) string {
	if v == nil {
		return "nil"
	}
	return fmt.Sprintf("%s serial %d, %d hosts", v.Zone, v.Serial, len(v.Hosts))
}

func TestAXFRThenNothingUntilAChange(t *testing.T) {
	p, rec, addr := publish(t, nil, fleet.Limits{})
	hs := hosts(300, 0)
	long := strings.Repeat(strings.Repeat("l", 63)+".", 3) + strings.Repeat("l", 47) + "." + zone
	hs = append(hs,
		fleet.Host{Name: "Example.ORG", TTL: 5, Policy: map[string]string{"gslb/strategy": "failover"}}, // the apex, no healthy target
		fleet.Host{Name: long, TTL: 10, AAAA: []netip.Addr{netip.MustParseAddr("fd00::99")}},
	)
	serial, changed := p.Set(hs)
	if !changed || serial == 0 {
		t.Fatalf("first Set: serial %d changed %v", serial, changed)
	}
	f := fleet.NewFollower(zone, addr, nil, fleet.Limits{})
	v, changed := check(t, f)
	if !changed {
		t.Fatal("first Check did not change the view")
	}
	sameView(t, v, p.View())
	if len(v.Hosts) != 302 || v.Hosts[0].Name != zone {
		t.Fatalf("%d hosts, first %s; want 302, the apex first", len(v.Hosts), v.Hosts[0].Name)
	}
	if qs := rec.take(); len(qs) != 2 || qs[0] != "SOA 1" || !strings.HasPrefix(qs[1], "AXFR ") {
		t.Fatalf("requests %v, want an SOA then an AXFR", qs)
	}

	if s, changed := p.Set(hosts(300, 0)[:0:0]); !changed || s == serial {
		t.Fatalf("an emptied view: serial %d changed %v", s, changed)
	}
	p.Set(hs)
	if s, changed := p.Set(hs); changed || s != p.View().Serial {
		t.Fatalf("the same hosts again: serial %d changed %v, want unchanged", s, changed)
	}
	v2, changed := check(t, f)
	if !changed {
		t.Fatal("Check after a change did not change the view")
	}
	sameView(t, v2, p.View())
	rec.take()
	if _, changed := check(t, f); changed {
		t.Fatal("Check without a change changed the view")
	}
	if qs := rec.take(); len(qs) != 1 || qs[0] != "SOA 1" {
		t.Fatalf("steady state: requests %v, want one SOA", qs)
	}
}

func TestIXFRCarriesOnlyTheChange(t *testing.T) {
	p, rec, addr := publish(t, nil, fleet.Limits{})
	p.Set(hosts(1000, 0))
	f := fleet.NewFollower(zone, addr, nil, fleet.Limits{})
	check(t, f)
	rec.take()

	hs := hosts(1000, 0)
	hs[10].A = hs[10].A[:1]                          // a target no longer healthy
	hs[20].Policy = map[string]string{"gslb/x": "y"} // a policy change
	hs = append(hs[:30], hs[31:]...)                 // a host withdrawn
	hs = append(hs, fleet.Host{Name: "new." + zone, TTL: 30})
	p.Set(hs)
	hs[500].TTL = 60 // and a second change before the follower asks
	p.Set(hs)

	v, changed := check(t, f)
	if !changed {
		t.Fatal("not changed")
	}
	sameView(t, v, p.View())
	qs := rec.take()
	// SOA; IXFR: SOA, (SOA, del, SOA, add) x2, SOA: 1 A + 1 TXT + 5 of h30 deleted
	// and 1 + 1 added, then the 4 records of h500 deleted and added.
	if len(qs) != 2 || qs[0] != "SOA 1" || qs[1] != "IXFR 22" {
		t.Fatalf("requests %v, want SOA 1, IXFR 22", qs)
	}
}

func TestJournalMissSendsTheWholeView(t *testing.T) {
	p, rec, addr := publish(t, nil, fleet.Limits{})
	p.Set(hosts(50, 0))
	f := fleet.NewFollower(zone, addr, nil, fleet.Limits{})
	check(t, f)
	for gen := 1; gen <= 70; gen++ { // more changes than the journal keeps
		p.Set(hosts(50, gen))
	}
	rec.take()
	v, _ := check(t, f)
	sameView(t, v, p.View())
	// 50 hosts x 4 records + SOA, NS, SOA
	if qs := rec.take(); len(qs) != 2 || qs[1] != "IXFR 203" {
		t.Fatalf("requests %v, want SOA then an IXFR answered with the whole view (203 records)", qs)
	}
}

func TestIXFROverUDPIsTheSOAAlone(t *testing.T) {
	p, _, addr := publish(t, nil, fleet.Limits{})
	s1, _ := p.Set(hosts(5, 0))
	p.Set(hosts(5, 1))
	m := new(dns.Msg)
	m.SetIxfr(fleet.Name(zone), s1, "ns.", "mbox.")
	r, err := dns.Exchange(m, addr)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Answer) != 1 || r.Answer[0].(*dns.SOA).Serial != p.View().Serial {
		t.Fatalf("IXFR over UDP answered %v, want the current SOA alone", r.Answer)
	}
	m.SetAxfr(fleet.Name(zone))
	if r, err = dns.Exchange(m, addr); err != nil || r.Rcode != dns.RcodeRefused {
		t.Fatalf("AXFR over UDP: %v %v, want REFUSED", r, err)
	}
}

func TestQueriesInTheView(t *testing.T) {
	p, _, addr := publish(t, nil, fleet.Limits{})
	ask := func(name string, qtype uint16) *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion(name, qtype)
		r, err := dns.Exchange(m, addr)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := ask(fleet.Name(zone), dns.TypeSOA); r.Rcode != dns.RcodeServerFailure {
		t.Fatalf("before the first Set: %s, want SERVFAIL (no empty view published)", dns.RcodeToString[r.Rcode])
	}
	p.Set([]fleet.Host{{Name: "a.b." + zone, TTL: 30, A: []netip.Addr{netip.MustParseAddr("198.18.0.1")}}})
	tests := []struct {
		name   string
		qtype  uint16
		rcode  int
		answer string
	}{
		{"_fleet." + zone, dns.TypeNS, dns.RcodeSuccess, "_fleet.example.org.\t5\tIN\tNS\texample.org."},
		{"a.b.h._fleet." + zone, dns.TypeA, dns.RcodeSuccess, "a.b.h._fleet.example.org.\t30\tIN\tA\t198.18.0.1"},
		{"a.b.h._fleet." + zone, dns.TypeTXT, dns.RcodeSuccess, "a.b.h._fleet.example.org.\t30\tIN\tTXT\t\"\""},
		{"a.b.h._fleet." + zone, dns.TypeAAAA, dns.RcodeSuccess, ""},
		{"b.h._fleet." + zone, dns.TypeA, dns.RcodeSuccess, ""}, // empty non-terminal
		{"c.h._fleet." + zone, dns.TypeA, dns.RcodeNameError, ""},
	}
	for _, tc := range tests {
		r := ask(tc.name, tc.qtype)
		got := ""
		for _, rr := range r.Answer {
			got += rr.String()
		}
		if r.Rcode != tc.rcode || got != tc.answer || !r.Authoritative {
			t.Errorf("%s %s: %s %q aa=%v, want %s %q", tc.name, dns.TypeToString[tc.qtype], dns.RcodeToString[r.Rcode], got, r.Authoritative, dns.RcodeToString[tc.rcode], tc.answer)
		}
		if tc.answer == "" && (len(r.Ns) != 1 || r.Ns[0].Header().Rrtype != dns.TypeSOA) {
			t.Errorf("%s %s: authority %v, want the SOA (RFC 2308)", tc.name, dns.TypeToString[tc.qtype], r.Ns)
		}
	}
}

func TestTSIGSignsEverythingAndRefusesTheRest(t *testing.T) {
	keyA, keyB := fleettest.Key("fleet-a"), fleettest.Key("fleet-b")
	pub := fleettest.Keys(t, keyA+keyB)  // a signs, b verifies
	peer := fleettest.Keys(t, keyB+keyA) // rotated the other way: b signs
	p, _, addr := publish(t, pub, fleet.Limits{})
	p.Set(hosts(20, 0))

	f := fleet.NewFollower(zone, addr, peer, fleet.Limits{})
	v, _ := check(t, f)
	sameView(t, v, p.View())
	p.Set(hosts(20, 1))
	v, _ = check(t, f)
	sameView(t, v, p.View())

	// Unsigned: refused; a follower without keys sees no view.
	if _, _, err := fleet.NewFollower(zone, addr, nil, fleet.Limits{}).Check(context.Background()); !errors.Is(err, fleet.ErrNoView) {
		t.Fatalf("unsigned follower: %v, want ErrNoView (REFUSED)", err)
	}
	for _, qtype := range []uint16{dns.TypeSOA, dns.TypeAXFR} {
		m := new(dns.Msg)
		m.SetQuestion(fleet.Name(zone), qtype)
		r, _, err := (&dns.Client{Net: "tcp"}).Exchange(m, addr)
		if err != nil || r.Rcode != dns.RcodeRefused || len(r.Answer) != 0 {
			t.Fatalf("unsigned %s: %v %v, want REFUSED", dns.TypeToString[qtype], r, err)
		}
	}
	// A key of the same name with another secret: refused.
	wrong := fleettest.Keys(t, strings.Replace(fleettest.Key("fleet-a"), "fleet-a", "fleet-a", 1))
	_, _, err := fleet.NewFollower(zone, addr, wrong, fleet.Limits{}).Check(context.Background())
	if err == nil {
		t.Fatal("a wrong key was not refused")
	}
	m := new(dns.Msg)
	m.SetAxfr(fleet.Name(zone))
	wrong.Sign(m)
	tr := &dns.Transfer{TsigSecret: wrong.Secrets()}
	env, err := tr.In(m, addr)
	if err == nil {
		for e := range env {
			if e.Error == nil && len(e.RR) > 0 {
				t.Fatalf("AXFR with a wrong key transferred %d records", len(e.RR))
			}
		}
	}
}

func TestNotifyIsSignedRetriedAndCoalesced(t *testing.T) {
	keys := fleettest.Keys(t, fleettest.Key("fleet"))
	var mu sync.Mutex
	var got []uint32
	drop := 2 // the first two NOTIFYs are lost
	peer := fleettest.Serve(t, "127.0.0.1:0", dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		serial, ok := fleet.IsNotify(r, zone)
		if !ok || !keys.Verified(w, r) {
			fleet.AnswerNotify(w, r, keys, dns.RcodeRefused)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if drop > 0 {
			drop--
			return
		}
		got = append(got, serial)
		fleet.AnswerNotify(w, r, keys, dns.RcodeSuccess)
	}), keys.Secrets())

	p := fleet.NewPublisher(zone, keys, fleet.Limits{})
	s1, _ := p.Set(hosts(3, 0))
	ctx := t.Context() // no retry outlives the test
	p.Notify(ctx, []string{peer})
	s2, _ := p.Set(hosts(3, 1))
	p.Notify(ctx, []string{peer}) // folded into one after the first
	p.Notify(ctx, []string{peer})
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	// The first NOTIFY is retried until it arrives (by then it carries
	// the current serial), then the two coalesced ones go as one.
	if len(got) != 2 || got[1] != s2 || (got[0] != s1 && got[0] != s2) {
		t.Fatalf("NOTIFYs received with serials %v, want 2 (the last %d)", got, s2)
	}

	// An unsigned NOTIFY is refused by the same helper.
	m := new(dns.Msg)
	m.SetNotify(fleet.Name(zone))
	r, err := dns.Exchange(m, peer)
	if err != nil || r.Rcode != dns.RcodeRefused || r.Opcode != dns.OpcodeNotify {
		t.Fatalf("unsigned NOTIFY: %v %v, want REFUSED", r, err)
	}
}

func TestSignedAnswersToEDNSRequestsKeepTheTSIGLast(t *testing.T) {
	keys := fleettest.Keys(t, fleettest.Key("fleet"))
	p, _, addr := publish(t, keys, fleet.Limits{})
	p.Set(hosts(3000, 0)) // several messages
	for _, qtype := range []uint16{dns.TypeSOA, dns.TypeAXFR} {
		m := new(dns.Msg)
		m.SetQuestion(fleet.Name(zone), qtype)
		m.SetEdns0(1232, true)
		keys.Sign(m)
		tr := &dns.Transfer{TsigSecret: keys.Secrets()}
		if qtype == dns.TypeSOA {
			c := &dns.Client{Net: "udp", TsigSecret: keys.Secrets()}
			r, _, err := c.Exchange(m, addr)
			if err != nil || r.IsTsig() == nil {
				t.Fatalf("SOA with EDNS: %v %v, want a signed answer", r, err)
			}
			continue
		}
		env, err := tr.In(m, addr)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for e := range env {
			if e.Error != nil {
				t.Fatalf("AXFR with EDNS, after %d records: %v", n, e.Error)
			}
			n += len(e.RR)
		}
		if n != 3+3000*4 {
			t.Fatalf("AXFR with EDNS: %d records, want %d", n, 3+3000*4)
		}
	}
}

func TestConcurrentChecksAndSets(t *testing.T) {
	p, _, addr := publish(t, nil, fleet.Limits{})
	p.Set(hosts(200, 0))
	f := fleet.NewFollower(zone, addr, nil, fleet.Limits{})
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				if g == 0 {
					p.Set(hosts(200, i%5))
					continue
				}
				if _, _, err := f.Check(context.Background()); err != nil {
					t.Errorf("Check: %v", err)
					return
				}
				f.View()
			}
		}()
	}
	wg.Wait()
	v, _ := check(t, f)
	sameView(t, v, p.View())
}
