package object

import (
	"strings"
	"testing"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/tree"
	"github.com/miekg/dns"
	"sigs.k8s.io/external-dns/endpoint"
)

func TestTargetFormats(t *testing.T) {
	long := strings.Repeat("k", 600)
	for _, tc := range []struct {
		rtype, target, want string
	}{
		{"A", "192.0.2.1", "x.example.org.\t30\tIN\tA\t192.0.2.1"},
		{"A", "::ffff:192.0.2.1", "x.example.org.\t30\tIN\tA\t192.0.2.1"},
		{"AAAA", "2001:DB8::1", "x.example.org.\t30\tIN\tAAAA\t2001:db8::1"},
		{"CNAME", "WWW.Example.org.", "x.example.org.\t30\tIN\tCNAME\twww.example.org."},
		{"MX", "10 mail.example.org", "x.example.org.\t30\tIN\tMX\t10 mail.example.org."},
		{"SRV", "0 5 443 svc.example.org.", "x.example.org.\t30\tIN\tSRV\t0 5 443 svc.example.org."},
		{"NS", "ns1.example.net", "x.example.org.\t30\tIN\tNS\tns1.example.net."},
		{"PTR", "host.example.org", "x.example.org.\t30\tIN\tPTR\thost.example.org."},
		{"TXT", `"heritage=external-dns,external-dns/owner=default"`, "x.example.org.\t30\tIN\tTXT\t\"heritage=external-dns,external-dns/owner=default\""},
		{"TXT", long, "x.example.org.\t30\tIN\tTXT\t\"" + long[:255] + "\" \"" + long[255:510] + "\" \"" + long[510:] + "\""},
		{"CAA", `0 issue "letsencrypt.org"`, "x.example.org.\t30\tIN\tCAA\t0 issue \"letsencrypt.org\""},
		{"NAPTR", `100 10 "S" "SIP+D2U" "" _sip._udp.example.org.`, "x.example.org.\t30\tIN\tNAPTR\t100 10 \"S\" \"SIP+D2U\" \"\" _sip._udp.example.org."},
	} {
		_, e, reason, err := convert(endpoint.NewEndpoint("X.example.org", tc.rtype, tc.target), []string{"example.org."}, 30)
		if err != nil {
			t.Errorf("%s %q: %s: %v", tc.rtype, tc.target, reason, err)
			continue
		}
		rrs := records(e)
		if got := rrs[0].String(); got != tc.want {
			t.Errorf("%s %q:\n got %s\nwant %s", tc.rtype, tc.target, got, tc.want)
		}
		if _, err := dns.NewRR(rrs[0].String()); err != nil {
			t.Errorf("%s: record does not round-trip: %v", tc.rtype, err)
		}
	}
}

func TestTargetFormatsRejected(t *testing.T) {
	for _, tc := range []struct{ name, rtype, target, reason string }{
		{"x.example.org", "A", "300.1.1.1", ReasonTarget},
		{"x.example.org", "A", "fe80::1%eth0", ReasonTarget},
		{"x.example.org", "MX", "mail.example.org", ReasonTarget},
		{"x.example.org", "SRV", "1 2 70000 h.example.org", ReasonTarget},
		{"x.example.org", "CAA", "issue", ReasonTarget},
		{"x.example.org", "CNAME", "bad name", ReasonTarget},
		{"x.example.org", "SOA", "a b 1 2 3 4 5", ReasonType},
		{"x.example.net", "A", "192.0.2.1", ReasonZone},
		{"x..example.org", "A", "192.0.2.1", ReasonName},
	} {
		if _, _, reason, err := convert(endpoint.NewEndpoint(tc.name, tc.rtype, tc.target), []string{"example.org."}, 30); err == nil || reason != tc.reason {
			t.Errorf("%s %s %q: reason %q (%v), want %q", tc.name, tc.rtype, tc.target, reason, err, tc.reason)
		}
	}
}

func TestTXTTextSurvivesTheWire(t *testing.T) {
	for _, tc := range []struct{ target, wire string }{
		{`a\b`, `a\b`}, {`say "hi"`, `say "hi"`}, {"semi;colon", "semi;colon"}, {"", ""},
		{strings.Repeat(`\`, 300), strings.Repeat(`\`, 300)},
		// Every byte is kept: leading, trailing and inner spaces, tabs.
		{"  -all  end.  v=spf1 ", "  -all  end.  v=spf1 "}, {"\tx\t", "\tx\t"},
		{" " + strings.Repeat("y", 300) + " ", " " + strings.Repeat("y", 300) + " "},
		// A target quoted as a whole is unquoted (external-dns writes them so), its spaces kept.
		{`"  -all  end.  v=spf1 "`, "  -all  end.  v=spf1 "},
	} {
		target := tc.target
		_, e, _, err := convert(endpoint.NewEndpoint("x.example.org", "TXT", target), []string{"example.org."}, 30)
		if err != nil {
			t.Fatal(err)
		}
		m := new(dns.Msg)
		m.Answer = records(e)
		b, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		// Read the character-strings straight off the wire: length-prefixed octets.
		back := new(dns.Msg)
		if err := back.Unpack(b); err != nil {
			t.Fatal(err)
		}
		rd := b[len(b)-int(back.Answer[0].Header().Rdlength):]
		var got string
		for len(rd) > 0 {
			got += string(rd[1 : 1+int(rd[0])])
			rd = rd[1+int(rd[0]):]
		}
		if got != tc.wire {
			t.Errorf("TXT target %q went on the wire as %q, want %q", target, got, tc.wire)
		}
	}
}

// records returns the records e serves on its own: for A and AAAA they are
// built from its addresses, as the snapshot builds them.
func records(e *Endpoint) []dns.RR {
	hdr := dns.RR_Header{Name: e.Name, Rrtype: e.Type, Class: dns.ClassINET, Ttl: e.TTL}
	switch e.Type {
	case dns.TypeA:
		return tree.ARecords(hdr, e.Addrs)
	case dns.TypeAAAA:
		return tree.AAAARecords(hdr, e.Addrs)
	}
	return e.RRs
}
