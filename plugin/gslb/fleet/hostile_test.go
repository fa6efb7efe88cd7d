package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/plugin/gslb/fleet"
	"github.com/fleetdns/fleetdns/plugin/gslb/fleet/fleettest"

	"github.com/miekg/dns"
)

// fakePeer plays a peer that serves whatever it is told to.
type fakePeer struct {
	mu          sync.Mutex
	rcode       int      // of the SOA query
	soa         dns.RR   // its answer
	ns          []dns.RR // authority of the SOA answer
	xfr         []dns.RR // the answer to AXFR and IXFR
	ixfr        []dns.RR // the answer to IXFR, when not nil
	unsigned    bool     // never sign
	unsignedXfr bool     // sign the SOA, not the transfer
	truncate    bool     // answer the SOA over UDP truncated
}

func (f *fakePeer) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch r.Question[0].Qtype {
	case dns.TypeAXFR, dns.TypeIXFR:
		ch := make(chan *dns.Envelope, 1)
		if r.Question[0].Qtype == dns.TypeIXFR && f.ixfr != nil {
			ch <- &dns.Envelope{RR: f.ixfr}
		} else {
			ch <- &dns.Envelope{RR: f.xfr}
		}
		close(ch)
		q := r
		if f.unsigned || f.unsignedXfr {
			q = r.Copy()
			q.Extra = nil
		}
		new(dns.Transfer).Out(w, q, ch)
	default:
		m := new(dns.Msg)
		m.SetRcode(r, f.rcode)
		if f.soa != nil {
			m.Answer = []dns.RR{f.soa}
		}
		m.Ns = f.ns
		if f.truncate && w.RemoteAddr().Network() == "udp" {
			m.Answer, m.Truncated = nil, true
		}
		if t := r.IsTsig(); t != nil && !f.unsigned {
			m.SetTsig(t.Hdr.Name, t.Algorithm, 300, time.Now().Unix())
		}
		w.WriteMsg(m)
	}
}

func (f *fakePeer) set(fn func(f *fakePeer)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func rr(t *testing.T, s string) dns.RR {
	t.Helper()
	r, err := dns.NewRR(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func soaRR(t *testing.T, owner string, serial uint32) dns.RR {
	return rr(t, fmt.Sprintf("%s 5 SOA example.org. hostmaster.%s %d 30 10 86400 5", owner, owner, serial))
}

// goodView is a valid AXFR of serial: SOA, NS, one host, SOA.
func goodView(t *testing.T, serial uint32, extra ...dns.RR) []dns.RR {
	rrs := []dns.RR{
		soaRR(t, "_fleet.example.org.", serial),
		rr(t, "_fleet.example.org. 5 NS example.org."),
		rr(t, `www.h._fleet.example.org. 30 TXT "gslb/strategy=roundrobin"`),
		rr(t, "www.h._fleet.example.org. 30 A 198.18.0.1"),
	}
	return append(append(rrs, extra...), soaRR(t, "_fleet.example.org.", serial))
}

// followFake starts a fake peer with a good view at serial 100 and a
// Follower that holds it.
func followFake(t *testing.T, keys *fleet.Keys, peerSecrets map[string]string, lim fleet.Limits) (*fakePeer, *fleet.Follower) {
	t.Helper()
	fp := &fakePeer{soa: soaRR(t, "_fleet.example.org.", 100), xfr: goodView(t, 100)}
	addr := fleettest.Serve(t, "127.0.0.1:0", fp, peerSecrets)
	f := fleet.NewFollower(zone, addr, keys, lim)
	if _, _, err := f.Check(context.Background()); err != nil {
		t.Fatalf("the good view: %v", err)
	}
	return fp, f
}

// refused checks that Check fails with reason and keeps the view of serial 100.
func refused(t *testing.T, f *fleet.Follower, reason string) {
	t.Helper()
	v, changed, err := f.Check(context.Background())
	if err == nil || fleet.Reason(err) != reason {
		t.Fatalf("Check: %v (reason %q), want reason %q", err, fleet.Reason(err), reason)
	}
	if changed || v == nil || v.Serial != 100 || len(v.Hosts) != 1 || f.View() != v {
		t.Fatalf("after %v: view %+v changed %v, want the last good one kept", err, v, changed)
	}
	t.Logf("refused: %v", err)
}

func TestHostileViewsAreRefusedWholeAndTheLastGoodKept(t *testing.T) {
	tests := []struct {
		name   string
		xfr    func(t *testing.T) []dns.RR
		reason string
	}{
		{"name outside the zone", func(t *testing.T) []dns.RR {
			return goodView(t, 101, rr(t, "evil.example.com. 30 A 198.18.0.66"))
		}, fleet.ReasonOutside},
		{"name in the gslb zone but outside the view", func(t *testing.T) []dns.RR {
			return goodView(t, 101, rr(t, "www.example.org. 30 A 198.18.0.66"))
		}, fleet.ReasonOutside},
		{"serial backwards in the transfer", func(t *testing.T) []dns.RR { return goodView(t, 99) }, fleet.ReasonBackwards},
		{"policy without =", func(t *testing.T) []dns.RR {
			return goodView(t, 101, rr(t, `api.h._fleet.example.org. 30 TXT "strategy"`))
		}, fleet.ReasonMalformed},
		{"host without TXT", func(t *testing.T) []dns.RR {
			return goodView(t, 101, rr(t, "api.h._fleet.example.org. 30 A 198.18.0.2"))
		}, fleet.ReasonMalformed},
		{"A at the apex", func(t *testing.T) []dns.RR {
			return goodView(t, 101, rr(t, "_fleet.example.org. 30 A 198.18.0.2"))
		}, fleet.ReasonMalformed},
		{"SOA inside the zone", func(t *testing.T) []dns.RR {
			return goodView(t, 101, soaRR(t, "x.h._fleet.example.org.", 101))
		}, fleet.ReasonMalformed},
		{"a different SOA in the middle", func(t *testing.T) []dns.RR {
			v := goodView(t, 101)
			return append(v[:2:2], soaRR(t, "_fleet.example.org.", 7), v[2])
		}, fleet.ReasonMalformed},
		{"records after the closing SOA", func(t *testing.T) []dns.RR {
			return append(goodView(t, 101), rr(t, `api.h._fleet.example.org. 30 TXT ""`))
		}, fleet.ReasonMalformed},
		{"no closing SOA", func(t *testing.T) []dns.RR { v := goodView(t, 101); return v[:len(v)-1] }, fleet.ReasonUnreachable},
		{"over the host cap", func(t *testing.T) []dns.RR {
			var extra []dns.RR
			for i := range 3 {
				extra = append(extra, rr(t, fmt.Sprintf(`h%d.h._fleet.example.org. 30 TXT ""`, i)))
			}
			return goodView(t, 101, extra...)
		}, fleet.ReasonCap},
		{"over the record cap", func(t *testing.T) []dns.RR {
			var extra []dns.RR
			for i := range 20 {
				extra = append(extra, rr(t, fmt.Sprintf("www.h._fleet.example.org. 30 A 198.18.1.%d", i)))
			}
			return goodView(t, 101, extra...)
		}, fleet.ReasonCap},
		{"over the octet cap", func(t *testing.T) []dns.RR {
			return goodView(t, 101, rr(t, fmt.Sprintf(`api.h._fleet.example.org. 30 TXT "gslb/a=%0240d" "gslb/b=%0240d" "gslb/c=%0240d"`, 0, 0, 0)))
		}, fleet.ReasonCap},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fp, f := followFake(t, nil, nil, fleet.Limits{MaxHosts: 3, MaxRecords: 16, MaxOctets: 800})
			fp.set(func(fp *fakePeer) {
				fp.soa = soaRR(t, "_fleet.example.org.", 101)
				fp.xfr = tc.xfr(t)
			})
			refused(t, f, tc.reason)
			// The peer mends its ways: followed again.
			fp.set(func(fp *fakePeer) { fp.xfr = goodView(t, 101) })
			if v, changed, err := f.Check(context.Background()); err != nil || !changed || v.Serial != 101 {
				t.Fatalf("a good view after: %v %v %v", v, changed, err)
			}
		})
	}
}

func TestSerialBackwardsIsRefused(t *testing.T) {
	fp, f := followFake(t, nil, nil, fleet.Limits{})
	fp.set(func(fp *fakePeer) { fp.soa = soaRR(t, "_fleet.example.org.", 99) })
	refused(t, f, fleet.ReasonBackwards)
	// RFC 1982: 100 + 2^31 - 1 is ahead, 100 + 2^31 + 1 is behind.
	fp.set(func(fp *fakePeer) { fp.soa = soaRR(t, "_fleet.example.org.", 100+1<<31+1) })
	refused(t, f, fleet.ReasonBackwards)
}

func TestOverCapThroughIXFRIsRefused(t *testing.T) {
	p, _, addr := publish(t, nil, fleet.Limits{})
	p.Set(hosts(10, 0))
	f := fleet.NewFollower(zone, addr, nil, fleet.Limits{MaxHosts: 12})
	check(t, f)
	good := f.View()
	p.Set(hosts(13, 0))
	_, _, err := f.Check(context.Background())
	if fleet.Reason(err) != fleet.ReasonCap || f.View() != good {
		t.Fatalf("13 hosts by IXFR over a cap of 12: %v, view %s; want refused, the 10 kept", err, summary(f.View()))
	}
	p.Set(hosts(12, 0))
	if v, _ := check(t, f); len(v.Hosts) != 12 {
		t.Fatalf("back under the cap: %d hosts", len(v.Hosts))
	}
}

func TestPeersWithoutAView(t *testing.T) {
	tests := []struct {
		name string
		set  func(t *testing.T, fp *fakePeer)
	}{
		{"NXDOMAIN, a stock file zone", func(t *testing.T, fp *fakePeer) {
			fp.rcode, fp.soa, fp.ns = dns.RcodeNameError, nil, []dns.RR{soaRR(t, "example.org.", 7)}
		}},
		{"NODATA of another zone", func(t *testing.T, fp *fakePeer) {
			fp.soa, fp.ns = nil, []dns.RR{soaRR(t, "example.org.", 7)}
		}},
		{"the SOA of another zone", func(t *testing.T, fp *fakePeer) { fp.soa = soaRR(t, "example.org.", 7) }},
		{"REFUSED", func(t *testing.T, fp *fakePeer) { fp.rcode, fp.soa = dns.RcodeRefused, nil }},
		{"NOTAUTH", func(t *testing.T, fp *fakePeer) { fp.rcode, fp.soa = dns.RcodeNotAuth, nil }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fp := &fakePeer{}
			tc.set(t, fp)
			f := fleet.NewFollower(zone, fleettest.Serve(t, "127.0.0.1:0", fp, nil), nil, fleet.Limits{})
			v, _, err := f.Check(context.Background())
			if !errors.Is(err, fleet.ErrNoView) || fleet.Reason(err) != fleet.ReasonNoView || v != nil {
				t.Fatalf("Check: %v %v, want ErrNoView", v, err)
			}
		})
	}
}

func TestResponsesMustBeSignedWithTheKey(t *testing.T) {
	keys := fleettest.Keys(t, fleettest.Key("fleet"))
	t.Run("wrong secret", func(t *testing.T) {
		// The peer has a key of the same name with another secret.
		other := fleettest.Keys(t, fleettest.Key("fleet"))
		addr := fleettest.Serve(t, "127.0.0.1:0", &fakePeer{soa: soaRR(t, "_fleet.example.org.", 101), xfr: goodView(t, 101)}, other.Secrets())
		f := fleet.NewFollower(zone, addr, keys, fleet.Limits{})
		if v, _, err := f.Check(context.Background()); fleet.Reason(err) != fleet.ReasonTSIG || v != nil {
			t.Fatalf("SOA signed with another secret: %v %v, want a TSIG error", v, err)
		}
	})
	t.Run("unsigned SOA", func(t *testing.T) {
		fp, f := followFake(t, keys, keys.Secrets(), fleet.Limits{})
		fp.set(func(fp *fakePeer) { fp.unsigned, fp.soa = true, soaRR(t, "_fleet.example.org.", 101) })
		refused(t, f, fleet.ReasonTSIG)
	})
	t.Run("unsigned transfer", func(t *testing.T) {
		fp, f := followFake(t, keys, keys.Secrets(), fleet.Limits{})
		fp.set(func(fp *fakePeer) {
			fp.soa, fp.xfr, fp.unsignedXfr = soaRR(t, "_fleet.example.org.", 101), goodView(t, 101), true
		})
		refused(t, f, fleet.ReasonTSIG)
	})
}

func TestATruncatedSOAIsAskedAgainOverTCPSigned(t *testing.T) {
	keys := fleettest.Keys(t, fleettest.Key("fleet"))
	fp, f := followFake(t, keys, keys.Secrets(), fleet.Limits{})
	fp.set(func(fp *fakePeer) {
		fp.truncate, fp.soa, fp.xfr = true, soaRR(t, "_fleet.example.org.", 101), goodView(t, 101)
	})
	if v, changed, err := f.Check(context.Background()); err != nil || !changed || v.Serial != 101 {
		t.Fatalf("Check: %v %v %v, want serial 101 through TCP", v, changed, err)
	}
}

func TestAnIXFRThatDoesNotApplyIsFollowedByAnAXFR(t *testing.T) {
	soa := func(serial uint32) dns.RR { return soaRR(t, "_fleet.example.org.", serial) }
	for _, tc := range []struct {
		name string
		ixfr []dns.RR
	}{
		{"deletes a record not held", []dns.RR{soa(101), soa(100), rr(t, "www.h._fleet.example.org. 30 A 198.18.9.9"), soa(101), soa(101)}},
		{"starts from another serial", []dns.RR{soa(101), soa(90), soa(101), soa(101)}},
		{"diffs that do not chain", []dns.RR{soa(102), soa(100), soa(101), soa(95), soa(102), soa(102)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fp, f := followFake(t, nil, nil, fleet.Limits{})
			last := tc.ixfr[0].(*dns.SOA).Serial
			fp.set(func(fp *fakePeer) { fp.soa, fp.ixfr, fp.xfr = soa(last), tc.ixfr, goodView(t, last) })
			v, changed, err := f.Check(context.Background())
			if err != nil || !changed || v.Serial != last {
				t.Fatalf("Check: %v %v %v, want the AXFR's view of %d", v, changed, err, last)
			}
		})
	}
}

func TestAnIXFRIsApplied(t *testing.T) {
	soa := func(serial uint32) dns.RR { return soaRR(t, "_fleet.example.org.", serial) }
	fp, f := followFake(t, nil, nil, fleet.Limits{})
	fp.set(func(fp *fakePeer) {
		fp.soa, fp.xfr = soa(102), nil // an AXFR would fail
		fp.ixfr = []dns.RR{soa(102),
			soa(100), rr(t, "www.h._fleet.example.org. 30 A 198.18.0.1"), soa(101), rr(t, "www.h._fleet.example.org. 30 A 198.18.0.2"),
			soa(101), soa(102), rr(t, `api.h._fleet.example.org. 60 TXT "gslb/weight=2"`), rr(t, "api.h._fleet.example.org. 60 AAAA fd00::2"),
			soa(102)}
	})
	v, changed, err := f.Check(context.Background())
	if err != nil || !changed || v.Serial != 102 || len(v.Hosts) != 2 {
		t.Fatalf("Check: %+v %v %v", v, changed, err)
	}
	if h := v.Hosts[0]; h.Name != "api.example.org." || h.TTL != 60 || h.Policy["gslb/weight"] != "2" || len(h.AAAA) != 1 {
		t.Errorf("added host: %+v", h)
	}
	if h := v.Hosts[1]; h.Name != "www.example.org." || len(h.A) != 1 || h.A[0].String() != "198.18.0.2" {
		t.Errorf("changed host: %+v", h)
	}
}
