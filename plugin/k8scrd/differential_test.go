package k8scrd

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/coredns/coredns/plugin/file"
	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"
	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/miekg/dns"
)

// The same data as DNSEndpoints and as a zone file. negttl equals ttl so that
// the SOA's TTL and MINIMUM agree: where they differ the stock file plugin
// puts the SOA's own TTL in negative answers, and RFC 2308 §3 wins (see
// TestNegativeSOATTLFollowsRFC2308).
var diffManifests = map[string]string{
	"d.yaml": testkit.DNSEndpoint("web", "d", nil,
		testkit.EP("example.org", "NS", 30, "ns1.example.org"),
		testkit.EP("ns1.example.org", "A", 30, "192.0.2.1"),
		testkit.EP("www.example.org", "A", 60, "192.0.2.10", "192.0.2.11"),
		testkit.EP("www.example.org", "AAAA", 60, "2001:db8::10"),
		testkit.EP("alias.example.org", "CNAME", 30, "www.example.org"),
		testkit.EP("app.example.org", "CNAME", 30, "alias.example.org"),
		testkit.EP("wild.example.org", "CNAME", 30, "x.apps.example.org"),
		testkit.EP("example.org", "MX", 30, "10 mail.example.org"),
		testkit.EP("example.org", "TXT", 30, "v=spf1 mx -all"),
		testkit.EP("mail.example.org", "A", 30, "192.0.2.25"),
		testkit.EP("mail.example.org", "AAAA", 30, "2001:db8::25"),
		testkit.EP("*.apps.example.org", "A", 30, "192.0.2.80"),
		testkit.EP("*.apps.example.org", "TXT", 30, "wild"),
		testkit.EP("db.internal.example.org", "A", 30, "192.0.2.90"),
		testkit.EP("sub.example.org", "NS", 30, "ns1.sub.example.org", "ns.example.net"),
		testkit.EP("ns1.sub.example.org", "A", 30, "192.0.2.53"),
		testkit.EP("_sip._udp.example.org", "SRV", 30, "10 60 5060 sip.example.org"),
		testkit.EP("sip.example.org", "A", 30, "192.0.2.50"),
		testkit.EP("example.org", "CAA", 30, `0 issue "letsencrypt.org"`),
	),
}

const diffZone = `$ORIGIN example.org.
@ 30 IN SOA ns1.example.org. hostmaster.example.org. 1 7200 1800 86400 30
@ 30 IN NS ns1.example.org.
ns1 30 IN A 192.0.2.1
www 60 IN A 192.0.2.10
www 60 IN A 192.0.2.11
www 60 IN AAAA 2001:db8::10
alias 30 IN CNAME www.example.org.
app 30 IN CNAME alias.example.org.
wild 30 IN CNAME x.apps.example.org.
@ 30 IN MX 10 mail.example.org.
@ 30 IN TXT "v=spf1 mx -all"
mail 30 IN A 192.0.2.25
mail 30 IN AAAA 2001:db8::25
*.apps 30 IN A 192.0.2.80
*.apps 30 IN TXT "wild"
db.internal 30 IN A 192.0.2.90
sub 30 IN NS ns1.sub.example.org.
sub 30 IN NS ns.example.net.
ns1.sub 30 IN A 192.0.2.53
_sip._udp 30 IN SRV 10 60 5060 sip.example.org.
sip 30 IN A 192.0.2.50
@ 30 IN CAA 0 issue "letsencrypt.org"
`

// diffQueries: present names, absent names, empty non-terminals, wildcards,
// CNAME chains, delegations and absent types. Left out on purpose: a CNAME
// chain ending in NODATA or NXDOMAIN, leaving the zone, or reaching a wildcard,
// where file (with no upstream) answers SERVFAIL or puts NS where RFC 2308
// wants the SOA. TestCNAMEIntoWildcard covers the wildcard case.
var diffQueries = []struct {
	name  string
	qtype uint16
}{
	{"example.org.", dns.TypeSOA}, {"example.org.", dns.TypeNS}, {"example.org.", dns.TypeMX},
	{"example.org.", dns.TypeTXT}, {"example.org.", dns.TypeCAA}, {"example.org.", dns.TypeA},
	{"example.org.", dns.TypeAAAA}, {"EXAMPLE.org.", dns.TypeSOA},
	{"www.example.org.", dns.TypeA}, {"www.example.org.", dns.TypeAAAA}, {"Www.Example.Org.", dns.TypeA},
	{"www.example.org.", dns.TypeMX}, {"www.example.org.", dns.TypeTXT}, {"www.example.org.", dns.TypeCNAME},
	{"ns1.example.org.", dns.TypeA}, {"mail.example.org.", dns.TypeAAAA},
	{"nothere.example.org.", dns.TypeA}, {"a.b.c.example.org.", dns.TypeAAAA}, {"nothere.example.org.", dns.TypeNS},
	{"internal.example.org.", dns.TypeA}, {"internal.example.org.", dns.TypeTXT}, {"x.internal.example.org.", dns.TypeA},
	{"db.internal.example.org.", dns.TypeA}, {"db.internal.example.org.", dns.TypeAAAA},
	{"alias.example.org.", dns.TypeA}, {"app.example.org.", dns.TypeA}, {"app.example.org.", dns.TypeAAAA},
	{"app.example.org.", dns.TypeCNAME},
	{"foo.apps.example.org.", dns.TypeA}, {"foo.apps.example.org.", dns.TypeTXT}, {"foo.apps.example.org.", dns.TypeAAAA},
	{"deep.foo.apps.example.org.", dns.TypeA}, {"apps.example.org.", dns.TypeA}, {"*.apps.example.org.", dns.TypeA},
	{"sub.example.org.", dns.TypeA}, {"sub.example.org.", dns.TypeNS}, {"sub.example.org.", dns.TypeDS},
	{"www.sub.example.org.", dns.TypeA}, {"ns1.sub.example.org.", dns.TypeA}, {"a.b.sub.example.org.", dns.TypeDS},
	{"_sip._udp.example.org.", dns.TypeSRV}, {"_udp.example.org.", dns.TypeSRV}, {"sip.example.org.", dns.TypeSRV},
	{"mail.example.org.", dns.TypeMX},
}

func TestDifferentialAgainstFilePlugin(t *testing.T) {
	k, _ := newTestPlugin(t, "example.org", "soa ns1.example.org hostmaster.example.org\nttl 30\nnegttl 30", diffManifests)
	zone, err := file.Parse(strings.NewReader(diffZone), "example.org.", "diff", 0)
	if err != nil {
		t.Fatal(err)
	}
	ref := file.File{Next: test.NextHandler(dns.RcodeRefused, nil),
		Zones: file.Zones{Z: map[string]*file.Zone{"example.org.": zone}, Names: []string{"example.org."}}}

	for _, q := range diffQueries {
		got, _ := ask(t, k, q.name, q.qtype)
		m := new(dns.Msg)
		m.SetQuestion(q.name, q.qtype)
		rec := dnstest.NewRecorder(&test.ResponseWriter{})
		if _, err := ref.ServeDNS(context.Background(), rec, m); err != nil {
			t.Fatal(err)
		}
		if diff := compareReplies(got, minimal(rec.Msg)); diff != "" {
			t.Errorf("%s %s: k8scrd and file differ: %s\nk8scrd:\n%s\nfile:\n%s", q.name, dns.TypeToString[q.qtype], diff, got, rec.Msg)
		}
	}
}

// minimal is m without the zone's NS RRset in the authority section of a
// positive answer: the file plugin adds it, k8scrd gives minimal responses
// as Knot and BIND do (the differential against them is test/k8scrd's).
func minimal(m *dns.Msg) *dns.Msg {
	if m == nil || m.Rcode != dns.RcodeSuccess || len(m.Answer) == 0 || !m.Authoritative {
		return m
	}
	m = m.Copy()
	m.Ns = slices.DeleteFunc(m.Ns, func(rr dns.RR) bool { return rr.Header().Rrtype == dns.TypeNS && rr.Header().Name == "example.org." })
	return m
}

// compareReplies compares what a resolver sees: rcode, AA and the three
// sections as sets of records (SOA serials aside: ours is the change time).
func compareReplies(a, b *dns.Msg) string {
	if a == nil || b == nil {
		return fmt.Sprintf("reply missing (k8scrd %v, file %v)", a != nil, b != nil)
	}
	if a.Rcode != b.Rcode {
		return fmt.Sprintf("rcode %s vs %s", dns.RcodeToString[a.Rcode], dns.RcodeToString[b.Rcode])
	}
	if a.Authoritative != b.Authoritative {
		return fmt.Sprintf("AA %v vs %v", a.Authoritative, b.Authoritative)
	}
	for i, sec := range [][2][]dns.RR{{a.Answer, b.Answer}, {a.Ns, b.Ns}, {a.Extra, b.Extra}} {
		x, y := section(sec[0]), section(sec[1])
		if !slices.Equal(x, y) {
			return fmt.Sprintf("%s section:\n  %v\nvs\n  %v", []string{"answer", "authority", "additional"}[i], x, y)
		}
	}
	return ""
}

func section(rrs []dns.RR) []string {
	out := make([]string, 0, len(rrs))
	for _, rr := range rrs {
		if soa, ok := rr.(*dns.SOA); ok {
			c := *soa
			c.Serial = 0
			rr = &c
		}
		out = append(out, strings.ToLower(rr.String()))
	}
	slices.Sort(out)
	return out
}

func TestNegativeSOATTLFollowsRFC2308(t *testing.T) {
	// SOA TTL 30, MINIMUM 10: negative answers carry min(30, 10) = 10 (RFC 2308 §3),
	// positive SOA answers the SOA's own TTL.
	k, _ := newTestPlugin(t, "example.org", zoneBody, zoneManifests)
	r, _ := ask(t, k, "nothere.example.org.", dns.TypeA)
	if len(r.Ns) != 1 || r.Ns[0].Header().Ttl != 10 || r.Ns[0].(*dns.SOA).Minttl != 10 {
		t.Errorf("NXDOMAIN authority: %v, want the SOA at TTL 10", r.Ns)
	}
	r, _ = ask(t, k, "www.example.org.", dns.TypeMX)
	if len(r.Ns) != 1 || r.Ns[0].Header().Ttl != 10 {
		t.Errorf("NODATA authority: %v, want the SOA at TTL 10", r.Ns)
	}
	r, _ = ask(t, k, "example.org.", dns.TypeSOA)
	if len(r.Answer) != 1 || r.Answer[0].Header().Ttl != 30 {
		t.Errorf("SOA answer: %v, want TTL 30", r.Answer)
	}
}

func TestCNAMEIntoWildcard(t *testing.T) {
	k, _ := newTestPlugin(t, "example.org", "soa ns1.example.org hostmaster.example.org\nttl 30\nnegttl 30", diffManifests)
	check(t, k, []test.Case{
		{Qname: "wild.example.org.", Qtype: dns.TypeA, Authoritative: true,
			Answer: []dns.RR{test.CNAME("wild.example.org. 30 IN CNAME x.apps.example.org."), test.A("x.apps.example.org. 30 IN A 192.0.2.80")}},
	})
}
