package k8scrd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coredns/coredns/plugin/dnssec"
	"github.com/coredns/coredns/plugin/pkg/cache"
	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"
	"github.com/coredns/coredns/request"
	"github.com/miekg/dns"
)

// signedFront puts CoreDNS's dnssec plugin in front of k, with a fresh
// ECDSA P-256 key for zone, as a Corefile with `dnssec` in the block does.
func signedFront(t *testing.T, k *K8sCRD, zone string) dnssec.Dnssec {
	t.Helper()
	key := &dns.DNSKEY{Hdr: dns.RR_Header{Name: zone, Rrtype: dns.TypeDNSKEY, Class: dns.ClassINET, Ttl: 3600},
		Flags: 257, Protocol: 3, Algorithm: dns.ECDSAP256SHA256}
	priv, err := key.Generate(256)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	base := filepath.Join(dir, "K"+zone+"+013+00001")
	if err := os.WriteFile(base+".key", []byte(key.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(base+".private", []byte(key.PrivateKeyString(priv)), 0o600); err != nil {
		t.Fatal(err)
	}
	dk, err := dnssec.ParseKeyFile(base+".key", base+".private")
	if err != nil {
		t.Fatal(err)
	}
	return dnssec.New([]string{zone}, []*dnssec.DNSKEY{dk}, false, k, cache.New[[]dns.RR](100))
}

// TestFitWithDNSSECInFront: signatures are added after k8scrd's fit, and
// CoreDNS's ScrubWriter then truncates what does not fit with TC. That TC
// is right: the signatures of the answer are required data (RFC 4035
// §3.1.1). k8scrd adds no optional data when DO is set, so the TC is never
// for optional data that the signer inflated.
func TestFitWithDNSSECInFront(t *testing.T) {
	k, _ := newTestPlugin(t, "fit.example", "", fitManifests)
	d := signedFront(t, k, "fit.example.")
	ask := func(qname string, qtype uint16, w dns.ResponseWriter, size uint16) *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion(qname, qtype)
		m.SetEdns0(size, true)
		rec := dnstest.NewRecorder(w)
		if _, err := d.ServeDNS(context.Background(), request.NewScrubWriter(m, rec), m); err != nil {
			t.Fatal(err)
		}
		return rec.Msg
	}
	sigs := func(rrs []dns.RR) (n int) {
		for _, rr := range rrs {
			if rr.Header().Rrtype == dns.TypeRRSIG {
				n++
			}
		}
		return n
	}
	udp, tcp := &test.ResponseWriter{}, &test.ResponseWriter{TCP: true}

	// The signed TXT answer fits 1232 octets: signed, no TC.
	if m := ask("txt.fit.example.", dns.TypeTXT, udp, 1232); m.Truncated || len(m.Answer) != 2 || sigs(m.Answer) != 1 {
		t.Errorf("TXT with DO at 1232: %v", m)
	}
	// Unsigned it fits 512 octets, signed it does not: TC, and TCP has it all.
	if m := ask("txt.fit.example.", dns.TypeTXT, udp, 512); !m.Truncated {
		t.Errorf("TXT with DO at 512: no TC although its signature does not fit: %v", m)
	}
	if m := ask("txt.fit.example.", dns.TypeTXT, tcp, 512); m.Truncated || len(m.Answer) != 2 || sigs(m.Answer) != 1 {
		t.Errorf("TXT with DO over TCP: %v", m)
	}
	// The MX answer's optional addresses are left out with DO: no TC at
	// 512, where signed addresses would have been truncated.
	if m := ask("mx.fit.example.", dns.TypeMX, udp, 512); m.Truncated || len(m.Answer) != 3 || sigs(m.Answer) != 1 || len(m.Extra) != 1 {
		t.Errorf("MX with DO at 512: %v", m)
	}
	// A negative answer: the SOA, its signature and the NSEC fit 512.
	if m := ask("nope.fit.example.", dns.TypeA, udp, 512); m.Truncated || sigs(m.Ns) == 0 {
		t.Errorf("NXDOMAIN with DO at 512: %v", m)
	}
}

// TestSiblingGlueWithDNSSECInFront: with DO set, a referral to a name
// server under another delegation of the zone carries that sibling glue,
// as Knot and NSD give it; the signer adds the NSEC that proves no DS and
// its signature to the authority section and signs no glue, and the
// reply is not truncated. An address of a name server the zone holds
// (authoritative data, which the signer would not sign in a referral) is
// still left out with DO.
func TestSiblingGlueWithDNSSECInFront(t *testing.T) {
	k, _ := newTestPlugin(t, "fit.example", "", fitManifests)
	d := signedFront(t, k, "fit.example.")
	for _, size := range []uint16{1232, 4096} {
		m := new(dns.Msg)
		m.SetQuestion("x.sib.fit.example.", dns.TypeA)
		m.SetEdns0(size, true)
		rec := dnstest.NewRecorder(&test.ResponseWriter{})
		if _, err := d.ServeDNS(context.Background(), request.NewScrubWriter(m, rec), m); err != nil {
			t.Fatal(err)
		}
		r := rec.Msg
		var glue []string
		for _, rr := range r.Extra {
			switch rr.Header().Rrtype {
			case dns.TypeOPT:
			case dns.TypeRRSIG:
				t.Errorf("EDNS %d: glue signed: %v", size, rr)
			default:
				glue = append(glue, rr.String())
			}
		}
		nsec := false
		for _, rr := range r.Ns {
			nsec = nsec || rr.Header().Rrtype == dns.TypeNSEC
		}
		if r.Truncated || r.Authoritative || !nsec || len(glue) != 1 || !strings.HasPrefix(glue[0], "ns.er.fit.example.\t") {
			t.Errorf("x.sib.fit.example. A with DO at EDNS %d: TC=%v AA=%v NSEC=%v glue=%v, want the sibling glue ns.er.fit.example. A and no TC\n%v",
				size, r.Truncated, r.Authoritative, nsec, glue, r)
		}
	}
	// Without the signer (DO set, k8scrd alone) the same glue.
	addrs := func(m *dns.Msg) (out []dns.RR) {
		for _, rr := range m.Extra {
			if rr.Header().Rrtype != dns.TypeOPT {
				out = append(out, rr)
			}
		}
		return out
	}
	m := askVia(t, k, "x.sib.fit.example.", dns.TypeA, &test.ResponseWriter{}, withEDNS(1232, true))
	if e := addrs(m); len(e) != 1 || e[0].Header().Name != "ns.er.fit.example." {
		t.Errorf("x.sib.fit.example. A with DO, unsigned: additional %v, want ns.er.fit.example. A", m.Extra)
	}
	// A name server the zone holds: its address is signed data, left out with DO.
	if m := askVia(t, k, "x.held.fit.example.", dns.TypeA, &test.ResponseWriter{}, withEDNS(1232, true)); len(addrs(m)) != 0 {
		t.Errorf("x.held.fit.example. A with DO: additional %v, want none", m.Extra)
	}
}
