package k8scrd

import (
	"context"
	"strings"
	"testing"

	"github.com/coredns/coredns/plugin/test"
	"github.com/fleetdns/fleetdns/internal/testkit"

	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/request"
	"github.com/miekg/dns"
)

// askVia asks k as a server would, through CoreDNS's ScrubWriter, over w
// (UDP or TCP), with the options set on the query by opts.
func askVia(t testing.TB, k *K8sCRD, qname string, qtype uint16, w dns.ResponseWriter, opts ...func(*dns.Msg)) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(qname, qtype)
	for _, o := range opts {
		o(m)
	}
	rec := dnstest.NewRecorder(w)
	if _, err := k.ServeDNS(context.Background(), request.NewScrubWriter(m, rec), m); err != nil {
		t.Fatalf("%s %s: %v", qname, dns.TypeToString[qtype], err)
	}
	if rec.Msg == nil {
		return nil
	}
	return rec.Msg.Copy()
}

func withEDNS(size uint16, do bool) func(*dns.Msg) {
	return func(m *dns.Msg) { m.SetEdns0(size, do) }
}

// fitManifests: a TXT answer that fits 512 octets only without the apex NS
// set, an MX whose targets' addresses fit in part, delegations with
// in-domain glue, sibling glue and name servers the zone holds.
var fitManifests = map[string]string{"fit.yaml": testkit.DNSEndpoint("default", "fit", nil,
	testkit.EP("fit.example", "NS", 300, "ns1.fit.example", "ns2.fit.example", "ns3.fit.example", "ns4.fit.example"),
	testkit.EP("ns1.fit.example", "A", 300, "192.0.2.1"),
	testkit.EP("ns2.fit.example", "A", 300, "192.0.2.2"),
	testkit.EP("ns3.fit.example", "AAAA", 300, "2001:db8::3"),
	testkit.EP("ns4.fit.example", "AAAA", 300, "2001:db8::4"),
	testkit.EP("txt.fit.example", "TXT", 300, strings.Repeat("t", 400)),
	testkit.EP("mx.fit.example", "MX", 300, "10 m1.fit.example", "20 m2.fit.example"),
	testkit.EP("m1.fit.example", "AAAA", 300, "2001:db8::11", "2001:db8::12", "2001:db8::13", "2001:db8::14", "2001:db8::15",
		"2001:db8::16", "2001:db8::17", "2001:db8::18", "2001:db8::19", "2001:db8::1a", "2001:db8::1b", "2001:db8::1c",
		"2001:db8::1d", "2001:db8::1e", "2001:db8::1f", "2001:db8::20", "2001:db8::21", "2001:db8::22", "2001:db8::23", "2001:db8::24"),
	testkit.EP("m2.fit.example", "A", 300, "192.0.2.20"),
	// er: in-domain glue; sib: its name server lies under er (sibling glue),
	// held: its name server is authoritative data of the zone.
	testkit.EP("er.fit.example", "NS", 300, "ns.er.fit.example"),
	testkit.EP("ns.er.fit.example", "A", 300, "192.0.2.53"),
	testkit.EP("sib.fit.example", "NS", 300, "ns.er.fit.example", "ns.elsewhere.example"),
	testkit.EP("held.fit.example", "NS", 300, "ns1.fit.example"),
	// big: in-domain glue that does not fit 512 octets.
	testkit.EP("big.fit.example", "NS", 300, "a.ns.big.fit.example", "b.ns.big.fit.example"),
	testkit.EP("a.ns.big.fit.example", "AAAA", 300, "2001:db8::a1", "2001:db8::a2", "2001:db8::a3", "2001:db8::a4", "2001:db8::a5", "2001:db8::a6", "2001:db8::a7", "2001:db8::a8", "2001:db8::a9", "2001:db8::aa", "2001:db8::ab"),
	testkit.EP("b.ns.big.fit.example", "AAAA", 300, "2001:db8::b1", "2001:db8::b2", "2001:db8::b3", "2001:db8::b4", "2001:db8::b5", "2001:db8::b6", "2001:db8::b7", "2001:db8::b8", "2001:db8::b9", "2001:db8::ba", "2001:db8::bb"),
	testkit.EP("many.fit.example", "TXT", 300, strings.Repeat("u", 250), strings.Repeat("v", 250), strings.Repeat("w", 250)),
	testkit.EP("cname.fit.example", "CNAME", 300, "txt.fit.example"),
)}

func TestTCOnlyWhenRequiredDataDoesNotFit(t *testing.T) {
	k, _ := newTestPlugin(t, "fit.example", "", fitManifests)
	udp, tcp := &test.ResponseWriter{}, &test.ResponseWriter{TCP: true}
	for _, c := range []struct {
		name, qname string
		qtype       uint16
		w           dns.ResponseWriter
		opts        []func(*dns.Msg)
		tc          bool
		answer      int
		ns          int
		extra       int // records in the additional section, the OPT aside
	}{
		// The whole TXT answer fits 512 octets: no TC, no authority NS set.
		{"TXT at EDNS 512", "txt.fit.example.", dns.TypeTXT, udp, []func(*dns.Msg){withEDNS(512, false)}, false, 1, 0, 0},
		{"TXT without EDNS", "txt.fit.example.", dns.TypeTXT, udp, nil, false, 1, 0, 0},
		{"CNAME to TXT", "cname.fit.example.", dns.TypeTXT, udp, nil, false, 2, 0, 0},
		// Three 250-octet strings do not fit 512: TC, the question alone; TCP in full.
		{"large TXT over UDP", "many.fit.example.", dns.TypeTXT, udp, nil, true, 0, 0, 0},
		{"large TXT at EDNS 1232", "many.fit.example.", dns.TypeTXT, udp, []func(*dns.Msg){withEDNS(1232, false)}, false, 3, 0, 0},
		{"large TXT over TCP", "many.fit.example.", dns.TypeTXT, tcp, nil, false, 3, 0, 0},
		// Optional addresses of the MX targets: those that fit, whole RRsets, no TC.
		{"MX at 512", "mx.fit.example.", dns.TypeMX, udp, nil, false, 2, 0, 1},
		{"MX at 1232", "mx.fit.example.", dns.TypeMX, udp, []func(*dns.Msg){withEDNS(1232, false)}, false, 2, 0, 21},
		// With DO no optional data: a dnssec plugin in front signs after the fit.
		{"MX at 1232 with DO", "mx.fit.example.", dns.TypeMX, udp, []func(*dns.Msg){withEDNS(1232, true)}, false, 2, 0, 0},
		// Referrals: in-domain glue required, sibling glue and held addresses optional.
		{"referral with in-domain glue", "x.er.fit.example.", dns.TypeA, udp, nil, false, 0, 1, 1},
		{"referral with sibling glue", "x.sib.fit.example.", dns.TypeA, udp, nil, false, 0, 2, 1},
		{"referral to a name server the zone holds", "x.held.fit.example.", dns.TypeA, udp, nil, false, 0, 1, 1},
		{"in-domain glue that does not fit", "x.big.fit.example.", dns.TypeA, udp, nil, true, 0, 0, 0},
		{"in-domain glue over TCP", "x.big.fit.example.", dns.TypeA, tcp, nil, false, 0, 2, 22},
		// ANY: the name's RRsets; a name without data is NODATA, a missing one NXDOMAIN, below a cut a referral.
		{"ANY at a name", "ns2.fit.example.", dns.TypeANY, udp, nil, false, 1, 0, 0},
		{"ANY at the apex over TCP", "fit.example.", dns.TypeANY, tcp, nil, false, 4, 0, 0},
		{"ANY at a CNAME", "cname.fit.example.", dns.TypeANY, udp, nil, false, 1, 0, 0},
		{"ANY at an empty non-terminal", "ns.big.fit.example.", dns.TypeANY, tcp, nil, false, 0, 2, 22},
		{"ANY at a missing name", "nope.fit.example.", dns.TypeANY, udp, nil, false, 0, 1, 0},
		{"ANY below a delegation", "x.er.fit.example.", dns.TypeANY, udp, nil, false, 0, 1, 1},
	} {
		m := askVia(t, k, c.qname, c.qtype, c.w, c.opts...)
		extra := 0
		for _, rr := range m.Extra {
			if rr.Header().Rrtype != dns.TypeOPT {
				extra++
			}
		}
		if m.Truncated != c.tc || len(m.Answer) != c.answer || len(m.Ns) != c.ns || extra != c.extra {
			t.Errorf("%s: TC %v, %d/%d/%d records, want TC %v, %d/%d/%d\n%v", c.name, m.Truncated, len(m.Answer), len(m.Ns), extra, c.tc, c.answer, c.ns, c.extra, m)
		}
		if len(c.opts) > 0 && m.IsEdns0() == nil {
			t.Errorf("%s: no OPT in the reply", c.name)
		}
		if p, err := m.Pack(); err == nil && c.w == udp && len(p) > max(512, int(ednsSize(c.opts))) {
			t.Errorf("%s: %d octets over UDP", c.name, len(p))
		}
	}
}

func ednsSize(opts []func(*dns.Msg)) uint16 {
	m := new(dns.Msg)
	for _, o := range opts {
		o(m)
	}
	if o := m.IsEdns0(); o != nil {
		return o.UDPSize()
	}
	return 512
}

func TestANYGivesTheRRsetOfTheLowestType(t *testing.T) {
	k, _ := newTestPlugin(t, "example.org", zoneBody, zoneManifests)
	tcp := &test.ResponseWriter{TCP: true}
	for _, c := range []struct {
		qname string
		want  uint16
	}{
		{"x.apps.example.org.", dns.TypeA},  // a wildcard: A and TXT, synthesized at the query name
		{"www.example.org.", dns.TypeA},     // A and AAAA
		{"example.org.", dns.TypeNS},        // the apex: NS (synthesized), SOA, MX, TXT, CAA
		{"app.example.org.", dns.TypeCNAME}, // a CNAME is not followed
		{"mail.example.org.", dns.TypeA},    // A and AAAA
	} {
		m := askVia(t, k, c.qname, dns.TypeANY, tcp)
		if m.Rcode != dns.RcodeSuccess || len(m.Answer) == 0 {
			t.Errorf("ANY at %s: %v", c.qname, m)
			continue
		}
		for _, rr := range m.Answer {
			if rr.Header().Rrtype != c.want || rr.Header().Name != c.qname {
				t.Errorf("ANY at %s: %v, want the %s RRset at the query name", c.qname, rr, dns.TypeToString[c.want])
			}
		}
	}
}
