package k8scrd

import (
	"testing"

	"github.com/coredns/caddy"
	"github.com/fleetdns/fleetdns/internal/testkit"

	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
)

// zoneManifests is example.org with every shape of data the handler serves.
var zoneManifests = map[string]string{
	"web.yaml": testkit.DNSEndpoint("web", "www", nil,
		testkit.EP("www.example.org", "A", 60, "192.0.2.11", "192.0.2.10"),
		testkit.EP("www.example.org", "AAAA", 60, "2001:db8::10"),
		testkit.EP("alias.example.org", "CNAME", 0, "www.example.org"),
		testkit.EP("app.example.org", "CNAME", 0, "alias.example.org"),
		testkit.EP("dangling.example.org", "CNAME", 0, "nothere.example.org"),
		testkit.EP("ext.example.org", "CNAME", 0, "www.example.net"),
		testkit.EP("ns1.example.org", "A", 0, "192.0.2.1"),
	) + "---\n" + testkit.DNSEndpoint("mail", "mail", nil,
		testkit.EP("example.org", "MX", 0, "10 mail.example.org"),
		testkit.EP("example.org", "TXT", 0, "v=spf1 mx -all"),
		testkit.EP("mail.example.org", "A", 0, "192.0.2.25"),
	),
	"apps.json": `{"apiVersion": "externaldns.k8s.io/v1alpha1", "kind": "DNSEndpoint",
	  "metadata": {"name": "apps", "namespace": "platform"},
	  "spec": {"endpoints": [
	    {"dnsName": "*.apps.example.org", "recordType": "A", "targets": ["192.0.2.80"]},
	    {"dnsName": "db.internal.example.org", "recordType": "A", "targets": ["192.0.2.90"]},
	    {"dnsName": "sub.example.org", "recordType": "NS", "targets": ["ns1.sub.example.org", "ns.example.net"]},
	    {"dnsName": "ns1.sub.example.org", "recordType": "A", "targets": ["192.0.2.53"]},
	    {"dnsName": "_sip._udp.example.org", "recordType": "SRV", "targets": ["10 60 5060 sip.example.org"]},
	    {"dnsName": "sip.example.org", "recordType": "A", "targets": ["192.0.2.50"]},
	    {"dnsName": "sip.example.org", "recordType": "NAPTR", "targets": ["100 10 \"S\" \"SIP+D2U\" \"\" _sip._udp.example.org."]},
	    {"dnsName": "example.org", "recordType": "CAA", "targets": ["0 issue \"letsencrypt.org\""]},
	    {"dnsName": "10.2.0.192.in-addr.arpa", "recordType": "PTR", "targets": ["www.example.org"]}
	  ]}}`,
}

const zoneBody = `soa ns1.example.org hostmaster.example.org
ttl 30
negttl 10`

var (
	apexNS = test.NS("example.org. 30 IN NS ns1.example.org.")
	negSOA = test.SOA("example.org. 10 IN SOA ns1.example.org. hostmaster.example.org. 0 7200 1800 86400 10")
)

func TestAuthoritativeAnswers(t *testing.T) {
	k, _ := newTestPlugin(t, "example.org 2.0.192.in-addr.arpa", zoneBody, zoneManifests)
	check(t, k, []test.Case{
		{Qname: "www.example.org.", Qtype: dns.TypeA, Authoritative: true,
			Answer: []dns.RR{test.A("www.example.org. 60 IN A 192.0.2.10"), test.A("www.example.org. 60 IN A 192.0.2.11")}},
		{Qname: "www.example.org.", Qtype: dns.TypeAAAA, Authoritative: true,
			Answer: []dns.RR{test.AAAA("www.example.org. 60 IN AAAA 2001:db8::10")}},
		// NODATA: the name exists, the type does not (RFC 2308 §2.2), SOA at min(SOA TTL, MINIMUM).
		{Qname: "www.example.org.", Qtype: dns.TypeMX, Authoritative: true, Ns: []dns.RR{negSOA}},
		// NXDOMAIN (RFC 2308 §2.1).
		{Qname: "nothere.example.org.", Qtype: dns.TypeA, Authoritative: true, Rcode: dns.RcodeNameError, Ns: []dns.RR{negSOA}},
		// An empty non-terminal is NODATA, not NXDOMAIN (RFC 8020).
		{Qname: "internal.example.org.", Qtype: dns.TypeA, Authoritative: true, Ns: []dns.RR{negSOA}},
		// A CNAME chain inside the zone is followed.
		{Qname: "app.example.org.", Qtype: dns.TypeA, Authoritative: true,
			Answer: []dns.RR{
				test.CNAME("alias.example.org. 30 IN CNAME www.example.org."),
				test.CNAME("app.example.org. 30 IN CNAME alias.example.org."),
				test.A("www.example.org. 60 IN A 192.0.2.10"), test.A("www.example.org. 60 IN A 192.0.2.11"),
			}},
		{Qname: "app.example.org.", Qtype: dns.TypeCNAME, Authoritative: true,
			Answer: []dns.RR{test.CNAME("app.example.org. 30 IN CNAME alias.example.org.")}},
		// The chain ends at a name that does not exist: its rcode (RFC 6604 §3).
		{Qname: "dangling.example.org.", Qtype: dns.TypeA, Authoritative: true, Rcode: dns.RcodeNameError,
			Answer: []dns.RR{test.CNAME("dangling.example.org. 30 IN CNAME nothere.example.org.")}, Ns: []dns.RR{negSOA}},
		// A target outside the zone: the resolver follows it.
		{Qname: "ext.example.org.", Qtype: dns.TypeA, Authoritative: true,
			Answer: []dns.RR{test.CNAME("ext.example.org. 30 IN CNAME www.example.net.")}},
		// Wildcards (RFC 4592): synthesized with the query name, at any depth below the closest encloser.
		{Qname: "foo.apps.example.org.", Qtype: dns.TypeA, Authoritative: true,
			Answer: []dns.RR{test.A("foo.apps.example.org. 30 IN A 192.0.2.80")}},
		{Qname: "a.b.apps.example.org.", Qtype: dns.TypeA, Authoritative: true,
			Answer: []dns.RR{test.A("a.b.apps.example.org. 30 IN A 192.0.2.80")}},
		{Qname: "foo.apps.example.org.", Qtype: dns.TypeAAAA, Authoritative: true, Ns: []dns.RR{negSOA}},
		{Qname: "apps.example.org.", Qtype: dns.TypeA, Authoritative: true, Ns: []dns.RR{negSOA}},
		// Below the internal ENT there is no wildcard: NXDOMAIN.
		{Qname: "x.internal.example.org.", Qtype: dns.TypeA, Authoritative: true, Rcode: dns.RcodeNameError, Ns: []dns.RR{negSOA}},
		// Delegation: a referral with in-bailiwick glue, AA off.
		{Qname: "sub.example.org.", Qtype: dns.TypeA,
			Ns:    []dns.RR{test.NS("sub.example.org. 30 IN NS ns.example.net."), test.NS("sub.example.org. 30 IN NS ns1.sub.example.org.")},
			Extra: []dns.RR{test.A("ns1.sub.example.org. 30 IN A 192.0.2.53")}},
		{Qname: "deep.host.sub.example.org.", Qtype: dns.TypeMX,
			Ns:    []dns.RR{test.NS("sub.example.org. 30 IN NS ns.example.net."), test.NS("sub.example.org. 30 IN NS ns1.sub.example.org.")},
			Extra: []dns.RR{test.A("ns1.sub.example.org. 30 IN A 192.0.2.53")}},
		{Qname: "ns1.sub.example.org.", Qtype: dns.TypeA,
			Ns:    []dns.RR{test.NS("sub.example.org. 30 IN NS ns.example.net."), test.NS("sub.example.org. 30 IN NS ns1.sub.example.org.")},
			Extra: []dns.RR{test.A("ns1.sub.example.org. 30 IN A 192.0.2.53")}},
		// DS at the cut is the parent's: AA, NODATA.
		{Qname: "sub.example.org.", Qtype: dns.TypeDS, Authoritative: true, Ns: []dns.RR{negSOA}},
		// The apex: synthesized SOA and NS, NS glue, MX with the target's address.
		{Qname: "example.org.", Qtype: dns.TypeSOA, Authoritative: true,
			Answer: []dns.RR{test.SOA("example.org. 30 IN SOA ns1.example.org. hostmaster.example.org. 0 7200 1800 86400 10")}},
		{Qname: "example.org.", Qtype: dns.TypeNS, Authoritative: true,
			Answer: []dns.RR{apexNS}, Extra: []dns.RR{test.A("ns1.example.org. 30 IN A 192.0.2.1")}},
		{Qname: "example.org.", Qtype: dns.TypeMX, Authoritative: true,
			Answer: []dns.RR{test.MX("example.org. 30 IN MX 10 mail.example.org.")},
			Extra:  []dns.RR{test.A("mail.example.org. 30 IN A 192.0.2.25")}},
		{Qname: "example.org.", Qtype: dns.TypeTXT, Authoritative: true,
			Answer: []dns.RR{test.TXT(`example.org. 30 IN TXT "v=spf1 mx -all"`)}},
		{Qname: "example.org.", Qtype: dns.TypeCAA, Authoritative: true,
			Answer: []dns.RR{test.CAA(`example.org. 30 IN CAA 0 issue "letsencrypt.org"`)}},
		{Qname: "example.org.", Qtype: dns.TypeAAAA, Authoritative: true, Ns: []dns.RR{negSOA}},
		{Qname: "_sip._udp.example.org.", Qtype: dns.TypeSRV, Authoritative: true,
			Answer: []dns.RR{test.SRV("_sip._udp.example.org. 30 IN SRV 10 60 5060 sip.example.org.")},
			Extra:  []dns.RR{test.A("sip.example.org. 30 IN A 192.0.2.50")}},
		{Qname: "sip.example.org.", Qtype: dns.TypeNAPTR, Authoritative: true,
			Answer: []dns.RR{test.NAPTR(`sip.example.org. 30 IN NAPTR 100 10 "S" "SIP+D2U" "" _sip._udp.example.org.`)}},
		// A second zone in the same block: its own apex.
		{Qname: "10.2.0.192.in-addr.arpa.", Qtype: dns.TypePTR, Authoritative: true,
			Answer: []dns.RR{test.PTR("10.2.0.192.in-addr.arpa. 30 IN PTR www.example.org.")}},
		{Qname: "99.2.0.192.in-addr.arpa.", Qtype: dns.TypePTR, Authoritative: true, Rcode: dns.RcodeNameError,
			Ns: []dns.RR{test.SOA("2.0.192.in-addr.arpa. 10 IN SOA ns1.example.org. hostmaster.example.org. 0 7200 1800 86400 10")}},
	})
}

func TestNamesMatchCaseInsensitivelyQuestionCasePreserved(t *testing.T) {
	k, _ := newTestPlugin(t, "example.org", zoneBody, zoneManifests)
	resp, _ := ask(t, k, "WwW.ExAmPlE.oRg.", dns.TypeA)
	if resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 2 {
		t.Fatalf("want 2 A records, got:\n%s", resp)
	}
	if q := resp.Question[0].Name; q != "WwW.ExAmPlE.oRg." {
		t.Errorf("question name is %q, want the case as asked", q)
	}
}

func TestOutsideZonesGoesToNextPlugin(t *testing.T) {
	k, _ := newTestPlugin(t, "example.org", zoneBody, zoneManifests)
	resp, code := ask(t, k, "www.example.net.", dns.TypeA)
	if code != dns.RcodeRefused || resp != nil {
		t.Errorf("want the next plugin's REFUSED and no reply written by k8scrd, got code %d, reply %v", code, resp)
	}
}

func TestFallthroughPassesNamesNotHeld(t *testing.T) {
	k, _ := newTestPlugin(t, "example.org", zoneBody+"\nfallthrough", zoneManifests)
	if _, code := ask(t, k, "nothere.example.org.", dns.TypeA); code != dns.RcodeRefused {
		t.Errorf("NXDOMAIN name: want the next plugin's REFUSED, got %s", dns.RcodeToString[code])
	}
	if resp, _ := ask(t, k, "www.example.org.", dns.TypeA); resp == nil || len(resp.Answer) != 2 {
		t.Errorf("held name: want the answer from k8scrd, got %v", resp)
	}
	if resp, _ := ask(t, k, "internal.example.org.", dns.TypeA); resp == nil || !resp.Authoritative {
		t.Errorf("empty non-terminal is held: want an authoritative NODATA, got %v", resp)
	}
}

func TestServfailBeforeFirstSync(t *testing.T) {
	k, _ := newTestPlugin(t, "example.org", zoneBody, zoneManifests)
	s := *k.snap.Load()
	s.Synced = false
	k.snap.Store(&s)
	if resp, code := ask(t, k, "nothere.example.org.", dns.TypeA); code != dns.RcodeServerFailure || resp != nil {
		t.Errorf("want SERVFAIL before the first sync, got %s", dns.RcodeToString[code])
	}
	if k.Ready() {
		t.Error("Ready() is true before the first sync")
	}
}

func TestNotReadyUntilStartupReturns(t *testing.T) {
	k, err := parse(caddy.NewTestController("dns", "k8scrd example.org {\n directory "+t.TempDir()+"\n}"))
	if err != nil {
		t.Fatal(err)
	}
	// Synced before start-up is done: the DNS listeners are not open yet.
	k.builder.Synced()
	k.builder.Flush()
	if !k.snap.Load().Synced || k.Ready() {
		t.Fatalf("synced %v, Ready %v: want synced and not yet ready", k.snap.Load().Synced, k.Ready())
	}
	if err := k.start(); err != nil {
		t.Fatal(err)
	}
	defer k.shutdown()
	if !k.Ready() {
		t.Error("not ready after start-up returned with a synced store")
	}
}
