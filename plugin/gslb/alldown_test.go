package gslb

import (
	"fmt"
	"testing"

	"github.com/fleetdns/fleetdns/internal/store"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// besideData is a host with an all-down CNAME whose store also holds other
// data at its name (a TXT, an MX): OtherTypes.
func besideData(name string) *store.Host {
	h := withProps(host(name), propAllDown, "sorry.example.net.")
	h.OtherTypes = true
	return h
}

// TestAllDownCNAMEBesideOtherDataIsNotAnswered: a CNAME stands alone (RFC
// 1034 §3.6.2), so an all-down CNAME at a host that has other data is not
// answered there: the query gets what it would without all-down (here no
// tag has targets: NODATA with the SOA), logged and counted once, and the
// explain record says why. A host without other data still gets it.
func TestAllDownCNAMEBesideOtherDataIsNotAnswered(t *testing.T) {
	before := testutil.ToFloat64(policyErrors.WithLabelValues(zone, "all-down"))
	st := newFakeStore(besideData("mx."+zone), withProps(host("sorry."+zone), propAllDown, "sorry.example.net."))
	g, _, _, _ := twoPeers(t, "", st)
	for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeANY} {
		m := ask(t, g, "mx."+zone, qtype)
		if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 0 || len(m.Ns) != 1 {
			t.Errorf("%s beside other data: %v, want NODATA with the SOA, no CNAME", dns.TypeToString[qtype], m)
		}
	}
	if m := ask(t, g, "sorry."+zone, dns.TypeA); len(m.Answer) != 1 || m.Answer[0].Header().Rrtype != dns.TypeCNAME {
		t.Errorf("a host without other data: %v, want the all-down CNAME", m.Answer)
	}
	g.walk()
	g.walk()
	if d := testutil.ToFloat64(policyErrors.WithLabelValues(zone, "all-down")) - before; d != 1 {
		t.Errorf("policy_errors_total{all-down} grew by %v over queries and walks, want 1 (once per host)", d)
	}
	wantLines(t, explainText(t, g, "mx."+zone), "answer A all: "+whyAllDownBeside)

	// The other data goes: the CNAME is answered again, and a new
	// conflict is counted once more.
	st.Put(withProps(host("mx."+zone), propAllDown, "sorry.example.net."))
	g.walk()
	if m := ask(t, g, "mx."+zone, dns.TypeA); len(m.Answer) != 1 || m.Answer[0].Header().Rrtype != dns.TypeCNAME {
		t.Errorf("the other data gone: %v, want the all-down CNAME", m.Answer)
	}
	st.Put(besideData("mx." + zone))
	g.walk()
	if d := testutil.ToFloat64(policyErrors.WithLabelValues(zone, "all-down")) - before; d != 2 {
		t.Errorf("policy_errors_total{all-down} grew by %v, want 2 (a second start)", d)
	}
}

// TestAllDownCNAMEBesideOtherDataOverTheWire: the same through a real
// CoreDNS server and a DNS client: addresses from the peers answer, never
// a CNAME beside the host's other data.
func TestAllDownCNAMEBesideOtherDataOverTheWire(t *testing.T) {
	us := startPeer(t, map[string][]string{"wire." + zone: {}})
	serverStore.Put(besideData("wire."+zone), withProps(host("wire2."+zone), propAllDown, "sorry.example.net."))
	srv := startServer(t, fmt.Sprintf(`%s:0 {
	bind 127.0.0.1
	gslb {
		geotag eu
		peer us %s
		timeout 500ms
	}
	k8scrd
}`, zone, us.addr))
	for _, tc := range []struct {
		name string
		want uint16 // the type of the answer, 0 for NODATA
	}{{"wire." + zone, 0}, {"wire2." + zone, dns.TypeCNAME}} {
		m := new(dns.Msg)
		m.SetQuestion(tc.name, dns.TypeA)
		r, err := dns.Exchange(m, srv)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var got uint16
		if len(r.Answer) > 0 {
			got = r.Answer[0].Header().Rrtype
		}
		if r.Rcode != dns.RcodeSuccess || got != tc.want {
			t.Errorf("%s A: %s %v, want %s", tc.name, dns.RcodeToString[r.Rcode], r.Answer, dns.TypeToString[tc.want])
		}
	}
}
