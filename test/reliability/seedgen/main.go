// Command seedgen writes the hand-made seed corpora of the plugins' fuzz
// targets (plugin/*/testdata/fuzz/<FuzzName>/), in the format `go test`
// reads. Run it from the repository root after changing a seed:
//
//	go run ./test/reliability/seedgen
//
// Inputs that `go test -fuzz` finds to crash are written to the same
// folders by the fuzzer itself and committed beside these.
package main

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/miekg/dns"
)

// value is one argument of a fuzz function.
type value interface{ encode() string }

type bytesV []byte
type stringV string
type boolV bool

func (b bytesV) encode() string  { return "[]byte(" + strconv.Quote(string(b)) + ")" }
func (s stringV) encode() string { return "string(" + strconv.Quote(string(s)) + ")" }
func (b boolV) encode() string   { return "bool(" + strconv.FormatBool(bool(b)) + ")" }

func write(plugin, target, name string, vals ...value) {
	var sb strings.Builder
	sb.WriteString("go test fuzz v1\n")
	for _, v := range vals {
		sb.WriteString(v.encode() + "\n")
	}
	dir := filepath.Join("plugin", plugin, "testdata", "fuzz", target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		log.Fatal(err)
	}
	sum := sha256.Sum256([]byte(sb.String()))
	file := filepath.Join(dir, "seed-"+name+"-"+fmt.Sprintf("%x", sum[:4]))
	if err := os.WriteFile(file, []byte(sb.String()), 0o644); err != nil {
		log.Fatal(err)
	}
}

func pack(m *dns.Msg) []byte {
	b, err := m.Pack()
	if err != nil {
		log.Fatal(err)
	}
	return b
}

func query(name string, qtype uint16, edns ...dns.EDNS0) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.Id = 4242
	if edns != nil {
		m.SetEdns0(1232, false)
		m.IsEdns0().Option = append(m.IsEdns0().Option, edns...)
	}
	return m
}

// header is a 12-byte DNS header: a query with RD and the given counts.
func header(qd, an, ns, ar uint16) []byte {
	b := []byte{0x10, 0x92, 0x01, 0x00}
	for _, n := range []uint16{qd, an, ns, ar} {
		b = binary.BigEndian.AppendUint16(b, n)
	}
	return b
}

// badQueries are raw client packets every ServeDNS target starts from:
// compression loops, names at and beyond 255 bytes, bad EDNS and ECS.
func badQueries(zone string) map[string][]byte {
	out := map[string][]byte{}
	// A question name that is a pointer to itself.
	out["selfloop"] = append(header(1, 0, 0, 0), 0xc0, 0x0c, 0, 1, 0, 1)
	// Two labels pointing at each other.
	out["pingpong"] = append(header(1, 0, 0, 0), 1, 'a', 0xc0, 0x10, 1, 'b', 0xc0, 0x0c, 0, 1, 0, 1)
	// A pointer forward, past the end.
	out["pastend"] = append(header(1, 0, 0, 0), 0xc0, 0xff, 0, 1, 0, 1)
	// A name of exactly 255 bytes on the wire (253 characters in text), in the zone.
	long := zone
	for len(long) < 253-10 {
		long = "abcdefgh." + long
	}
	for len(long) < 254 {
		long = "x" + long
	}
	out["name255"] = pack(query(long, dns.TypeA))
	// One byte more than the limit: 256 on the wire.
	over := append(header(1, 0, 0, 0), 63)
	over = append(over, []byte(strings.Repeat("a", 63))...)
	for range 3 {
		over = append(over, 63)
		over = append(over, []byte(strings.Repeat("b", 63))...)
	}
	over = append(over, 0, 0, 1, 0, 1)
	out["name256"] = over
	// EDNS: two OPT records, an OPT with a name, version 1, an option longer than its RDATA.
	two := query("www."+zone, dns.TypeA)
	two.SetEdns0(4096, true)
	two.Extra = append(two.Extra, &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT, Class: 512}})
	out["twoopt"] = pack(two)
	v1 := query("www."+zone, dns.TypeA)
	v1.SetEdns0(4096, false)
	v1.IsEdns0().SetVersion(1)
	out["ednsv1"] = pack(v1)
	named := query("www."+zone, dns.TypeA)
	named.Extra = append(named.Extra, &dns.OPT{Hdr: dns.RR_Header{Name: "www." + zone, Rrtype: dns.TypeOPT, Class: 4096}})
	out["namedopt"] = pack(named)
	small := query("www."+zone, dns.TypeANY)
	small.SetEdns0(1, false)
	out["udpsize1"] = pack(small)
	optlen := pack(query("www."+zone, dns.TypeA, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"}))
	optlen[len(optlen)-11] = 0x40 // the cookie option's length now runs past the OPT's RDATA
	out["optlen"] = optlen
	// ECS with impossible prefixes (RFC 7871 §6: FORMERR).
	for n, e := range map[string]*dns.EDNS0_SUBNET{
		"ecs-v4-33":    {Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 32, Address: net.IPv4(192, 0, 2, 1).To4()},
		"ecs-v6-128":   {Code: dns.EDNS0SUBNET, Family: 2, SourceNetmask: 128, Address: net.ParseIP("2001:db8::1")},
		"ecs-bits-set": {Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 8, Address: net.IPv4(10, 1, 2, 3).To4()},
		"ecs-family0":  {Code: dns.EDNS0SUBNET, Family: 0, SourceNetmask: 0},
	} {
		b := pack(query("app."+zone, dns.TypeA, e))
		if n == "ecs-v4-33" {
			b[len(b)-6] = 33 // SOURCE PREFIX-LENGTH beyond 32
		}
		if n == "ecs-v6-128" {
			b[len(b)-18] = 200
		}
		out[n] = b
	}
	// Family 3.
	fam := pack(query("app."+zone, dns.TypeA, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: net.IPv4(192, 0, 2, 0).To4()}))
	fam[len(fam)-7] = 3
	out["ecs-family3"] = fam
	// Two questions, no question, a response, an opcode other than QUERY.
	two2 := query("www."+zone, dns.TypeA)
	two2.Question = append(two2.Question, dns.Question{Name: "mail." + zone, Qtype: dns.TypeMX, Qclass: dns.ClassINET})
	out["twoquestions"] = pack(two2)
	out["noquestion"] = header(0, 0, 0, 0)
	resp := query("www."+zone, dns.TypeA)
	resp.Response = true
	out["response"] = pack(resp)
	upd := query(zone, dns.TypeSOA)
	upd.Opcode = dns.OpcodeUpdate
	out["update"] = pack(upd)
	notify := query(zone, dns.TypeSOA)
	notify.Opcode = dns.OpcodeNotify
	out["notify"] = pack(notify)
	// Class CHAOS and ANY, meta types, a type with no name.
	ch := query("www."+zone, dns.TypeTXT)
	ch.Question[0].Qclass = dns.ClassCHAOS
	out["chaos"] = pack(ch)
	cany := query("www."+zone, dns.TypeA)
	cany.Question[0].Qclass = dns.ClassANY
	out["classany"] = pack(cany)
	for _, qt := range []uint16{dns.TypeANY, dns.TypeAXFR, dns.TypeIXFR, dns.TypeMAILB, dns.TypeRRSIG, dns.TypeNSEC3PARAM, dns.TypeSOA, dns.TypeNS, dns.TypeDS, 65280, 0} {
		out["type-"+strconv.Itoa(int(qt))] = pack(query("www."+zone, qt))
	}
	// A query with records in answer and authority, as a confused client might send.
	junk := query("www."+zone, dns.TypeA)
	junk.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: "www." + zone, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 1}, A: net.IPv4(6, 6, 6, 6)}}
	junk.Ns = []dns.RR{&dns.NS{Hdr: dns.RR_Header{Name: zone, Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: 1}, Ns: "evil.example."}}
	out["sections"] = pack(junk)
	return out
}

func corefiles(plugin string, lines []string) map[string]string {
	out := map[string]string{}
	for i, l := range lines {
		out[strconv.Itoa(i)] = l
	}
	return out
}

func main() {
	// ---- k8scrd
	for n, s := range corefiles("k8scrd", []string{
		"k8scrd example.org {\n directory /tmp\n namespaces a b\n labels k8gb.io/dnstype=local\n tenancy strict\n ttl 30\n negttl 60\n soa ns1.example.org hostmaster.example.org\n fallthrough\n}",
		"k8scrd {\n kubeconfig /nonexistent ctx\n}",
		"example.org:53 {\n k8scrd\n}",
		"k8scrd example.org {\n directory a b\n}",
		"k8scrd example.org {\n directory /tmp\n kubeconfig /x\n}",
		"k8scrd example.org {\n labels in (\n}",
		"k8scrd example.org {\n labels a!=b, c notin (d, e)\n}",
		"k8scrd example.org {\n ttl 4294967296\n}",
		"k8scrd example.org {\n ttl -1\n}",
		"k8scrd example.org {\n negttl\n}",
		"k8scrd example.org {\n soa .. x\n}",
		"k8scrd example.org {\n tenancy\n}",
		"k8scrd example.org {\n tenancy loose\n}",
		"k8scrd example.org {\n namespaces\n}",
		"k8scrd example.org {\n bogus\n}",
		"k8scrd example.org\nk8scrd example.net",
		"k8scrd example.org {\n",
		"k8scrd example.org {\n fallthrough in-addr.arpa ip6.arpa\n}",
		"k8scrd 10.0.0.0/8 2001:db8::/126 {\n directory .\n}",
		"k8scrd example.org { {\n}",
		"k8scrd \"\" {\n}",
		"k8scrd . {\n soa a b\n}",
		"k8scrd example.org {\n import x\n}",
		"k8scrd {env.NOPE} {\n}",
	}) {
		write("k8scrd", "FuzzParse", n, stringV(s))
	}
	for n, b := range badQueries("example.org.") {
		write("k8scrd", "FuzzServeDNS", n, bytesV(b))
	}
	for n, m := range map[string]*dns.Msg{
		"wildcard":   query("deep.x.wild.example.org.", dns.TypeA),
		"ent":        query("b.c.ent.example.org.", dns.TypeA),
		"referral":   query("x.y.sub.example.org.", dns.TypeAAAA),
		"ds-at-cut":  query("sub.example.org.", dns.TypeDS),
		"chain":      query("chain.example.org.", dns.TypeAAAA),
		"out-of-zon": query("www.example.net.", dns.TypeA),
		"ptr":        query("1.2.0.192.in-addr.arpa.", dns.TypePTR),
		"big-txt":    query("big.example.org.", dns.TypeTXT),
		"apex-any":   query("example.org.", dns.TypeANY),
		"caa":        query("example.org.", dns.TypeCAA),
		"srv":        query("_sip._tcp.example.org.", dns.TypeSRV),
		"nxdomain":   query("nope.example.org.", dns.TypeA),
		"casefold":   query("WwW.eXaMpLe.OrG.", dns.TypeA),
		"root":       query(".", dns.TypeNS),
	} {
		write("k8scrd", "FuzzServeDNS", n, bytesV(pack(m)))
	}
	dep := func(body string) string {
		return "apiVersion: externaldns.k8s.io/v1alpha1\nkind: DNSEndpoint\nmetadata:\n  name: t\n  namespace: ns\nspec:\n  endpoints:\n" + body
	}
	for n, s := range map[string]string{
		"valid": dep("  - dnsName: www.example.org\n    recordType: A\n    recordTTL: 60\n    targets: ['192.0.2.1', '192.0.2.2']\n  - dnsName: www.example.org\n    recordType: AAAA\n    targets: ['2001:db8::1']\n"),
		"multidoc": dep("  - dnsName: a.example.org\n    recordType: A\n    targets: ['192.0.2.1']\n") + "---\n# comment only\n---\n" +
			dep("  - dnsName: a.example.org\n    recordType: A\n    targets: ['192.0.2.3']\n"),
		"list":    "apiVersion: v1\nkind: List\nitems:\n- " + strings.ReplaceAll(dep("  - dnsName: l.example.org\n    recordType: TXT\n    targets: ['x']\n"), "\n", "\n  "),
		"json":    `{"apiVersion":"externaldns.k8s.io/v1alpha1","kind":"DNSEndpoint","metadata":{"name":"j","namespace":"x"},"spec":{"endpoints":[{"dnsName":"j.example.org","recordType":"CNAME","targets":["www.example.org"]}]}}`,
		"partial": dep("  - dnsName: www.example.org\n    recordType: A\n    targ"),
		"badkind": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
		"badapi":  strings.Replace(dep("  - dnsName: a.example.org\n    recordType: A\n    targets: ['1.2.3.4']\n"), "externaldns.k8s.io", "example.com", 1),
		"badtargets": dep("  - dnsName: a.example.org\n    recordType: A\n    targets: ['2001:db8::1', '300.1.1.1', '']\n" +
			"  - dnsName: b.example.org\n    recordType: AAAA\n    targets: ['1.2.3.4', '::ffff:1.2.3.4']\n" +
			"  - dnsName: c.example.org\n    recordType: MX\n    targets: ['x', '70000 mail.example.org', '10']\n" +
			"  - dnsName: d.example.org\n    recordType: SRV\n    targets: ['1 2 3', '1 2 99999 x.example.org']\n" +
			"  - dnsName: e.example.org\n    recordType: CAA\n    targets: ['0 issue', '300 issue \"x\"']\n" +
			"  - dnsName: f.example.org\n    recordType: NAPTR\n    targets: ['100 10 \"u\" \"E2U+sip\" \"!^.*$!sip:x@example.org!\" .', 'garbage']\n" +
			"  - dnsName: g.example.org\n    recordType: BOGUS\n    targets: ['x']\n" +
			"  - dnsName: '..example.org'\n    recordType: A\n    targets: ['1.2.3.4']\n" +
			"  - dnsName: h.example.org\n    recordType: A\n    recordTTL: -5\n    targets: ['1.2.3.4']\n" +
			"  - dnsName: i.example.org\n    recordType: A\n    recordTTL: 99999999999\n    targets: ['1.2.3.4']\n" +
			"  - dnsName: j.example.org\n    recordType: CNAME\n    targets: ['a.example.org', 'b.example.org']\n" +
			"  - dnsName: outside.example.net\n    recordType: A\n    targets: ['1.2.3.4']\n"),
		"conflicts": dep("  - dnsName: c.example.org\n    recordType: CNAME\n    targets: ['c.example.org']\n" +
			"  - dnsName: c.example.org\n    recordType: A\n    targets: ['1.2.3.4']\n" +
			"  - dnsName: loop1.example.org\n    recordType: CNAME\n    targets: ['loop2.example.org']\n" +
			"  - dnsName: loop2.example.org\n    recordType: CNAME\n    targets: ['loop1.example.org']\n" +
			"  - dnsName: example.org\n    recordType: CNAME\n    targets: ['www.example.org']\n" +
			"  - dnsName: example.org\n    recordType: NS\n    targets: ['ns1.example.org', 'ns2.example.org']\n" +
			"  - dnsName: example.org\n    recordType: SOA\n    targets: ['x']\n" +
			"  - dnsName: '*.example.org'\n    recordType: NS\n    targets: ['ns.example.net']\n" +
			"  - dnsName: 'a.*.example.org'\n    recordType: A\n    targets: ['1.2.3.4']\n" +
			"  - dnsName: 'xn--d1acufc.example.org'\n    recordType: TXT\n    targets: ['\"quoted\" and \\\\escaped', '']\n"),
		"labels":     "apiVersion: externaldns.k8s.io/v1alpha1\nkind: DNSEndpoint\nmetadata:\n  name: k8gb\n  namespace: ns\n  labels: {k8gb.io/dnstype: local}\n  creationTimestamp: '2020-01-01T00:00:00Z'\nspec:\n  endpoints:\n  - dnsName: app.example.org\n    recordType: A\n    labels: {strategy: failover, weight-eu-0-50: ''}\n    providerSpecific: [{name: gslb/strategy, value: weighted}, {name: gslb/weight, value: 'eu=1'}]\n    setIdentifier: x\n    targets: ['192.0.2.1']\n",
		"aliasbomb":  "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\nkind: DNSEndpoint\n",
		"types":      "kind: DNSEndpoint\napiVersion: externaldns.k8s.io/v1\nmetadata: []\nspec: {endpoints: {}}\n",
		"nulls":      "kind: DNSEndpoint\napiVersion: externaldns.k8s.io/v1alpha1\nmetadata: {name: n}\nspec:\n  endpoints:\n  - null\n  - dnsName: null\n    targets: null\n  - {}\n",
		"tabs":       "kind:\tDNSEndpoint\n",
		"separators": "---\n---\n--- # x\n----\n---\t\n",
		"crlf":       strings.ReplaceAll(dep("  - dnsName: crlf.example.org\n    recordType: A\n    targets: ['192.0.2.1']\n"), "\n", "\r\n") + "---\r\n",
		"bom":        "\ufeff" + dep("  - dnsName: bom.example.org\n    recordType: A\n    targets: ['192.0.2.1']\n"),
		"utf16":      "\xff\xfek\x00i\x00n\x00d\x00",
		"ptr":        dep("  - dnsName: 1.2.0.192.in-addr.arpa\n    recordType: PTR\n    targets: ['www.example.org', 'x..y']\n"),
	} {
		write("k8scrd", "FuzzManifest", n, bytesV(s))
	}

	// ---- localtargets
	for n, s := range corefiles("localtargets", []string{
		"localtargets example.org {\n prefix lt-\n ttl 5\n healthcheck tcp 443\n}",
		"localtargets {\n healthcheck https 443 /healthz app.example.org {\n  interval 1s\n  timeout 100ms\n  fails 1\n  passes 1\n }\n}",
		"localtargets {\n prefix a.b\n}",
		"localtargets {\n ttl x\n}",
		"localtargets {\n healthcheck udp 53\n}",
		"localtargets {\n healthcheck tcp 99999\n}",
		"localtargets {\n healthcheck http 80\n}",
		"localtargets {\n healthcheck tcp 80 {\n  interval 0s\n  fails -1\n }\n}",
		"localtargets {\n healthcheck tcp 80\n healthcheck tcp 81\n}",
		"localtargets {\n healthcheck tcp 80 {\n  timeout 10s\n  interval 1s\n }\n}",
		"localtargets {\n healthcheck tcp 80 {\n  bogus\n }\n}",
		"localtargets {\n healthcheck tcp 80 {\n",
		"localtargets\nlocaltargets",
		"localtargets {\n nope\n}",
	}) {
		write("localtargets", "FuzzParse", n, stringV(s))
	}
	for n, b := range badQueries("example.org.") {
		write("localtargets", "FuzzServeDNS", n, bytesV(b))
	}

	// ---- gslb
	const gz = "gslb.example.com."
	for n, s := range corefiles("gslb", []string{
		"gslb gslb.example.com {\n geotag eu\n peer us 127.0.0.1 [::1]:5353\n peers_from_ns 127.0.0.2 {\n  pattern gslb-ns-{geotag}.{zone}\n  refresh 1h\n  port 53\n }\n strategy geoip\n primary eu us\n weight eu 1 us 0\n geo cidr 10.0.0.0/8 eu\n geo map EU eu\n geo metadata geoip/continent/code\n ttl 30\n timeout 1s\n refresh 30s\n split_brain_threshold 1m\n explain 127.0.0.0/8 ::1\n prefix localtargets-\n}",
		"gslb a.example b.example {\n geotag eu\n}",
		"gslb {\n}",
		"gslb gslb.example.com {\n peer us 1.2.3.4\n}",
		"gslb gslb.example.com {\n geotag eu\n peer us\n}",
		"gslb gslb.example.com {\n geotag eu\n peer us host.example:53\n}",
		"gslb gslb.example.com {\n geotag eu\n peer us 1.2.3.4\n peer us 1.2.3.5\n}",
		"gslb gslb.example.com {\n geotag eu\n peer eu 1.2.3.4\n}",
		"gslb gslb.example.com {\n geotag eu\n peers_from_ns 1.2.3.4 {\n  pattern {zone}\n }\n}",
		"gslb gslb.example.com {\n geotag eu\n peers_from_ns 1.2.3.4 {\n  pattern ns-{geotag}-{geotag}.{zone}\n  port 0\n  refresh 1ms\n }\n}",
		"gslb gslb.example.com {\n geotag eu\n peers_from_ns 1.2.3.4\n peers_from_ns 1.2.3.5\n}",
		"gslb gslb.example.com {\n geotag eu\n strategy geoip\n}",
		"gslb gslb.example.com {\n geotag eu\n strategy best\n}",
		"gslb gslb.example.com {\n geotag eu\n weight eu\n}",
		"gslb gslb.example.com {\n geotag eu\n weight eu -1\n}",
		"gslb gslb.example.com {\n geotag eu\n geo cidr 10.0.0.0/33 eu\n}",
		"gslb gslb.example.com {\n geotag eu\n geo mmdb /nonexistent continent.code\n}",
		"gslb gslb.example.com {\n geotag eu\n geo mmdb /dev/null country.names.0\n}",
		"gslb gslb.example.com {\n geotag eu\n geo\n}",
		"gslb gslb.example.com {\n geotag eu\n geo planet x y\n}",
		"gslb gslb.example.com {\n geotag eu\n ttl 99999999999\n}",
		"gslb gslb.example.com {\n geotag eu\n timeout 0s\n refresh 1ns\n split_brain_threshold -1s\n}",
		"gslb gslb.example.com {\n geotag eu\n explain none\n}",
		"gslb gslb.example.com {\n geotag eu\n explain 300.0.0.1\n}",
		"gslb gslb.example.com {\n geotag eu\n prefix\n}",
		"gslb gslb.example.com {\n geotag eu\n}\ngslb x.example {\n geotag us\n}",
		"gslb gslb.example.com {\n geotag eu\n unknown\n}",
	}) {
		write("gslb", "FuzzParse", n, stringV(s))
	}
	for n, b := range badQueries(gz) {
		write("gslb", "FuzzServeDNS", n, bytesV(b), boolV(false))
		write("gslb", "FuzzServeDNS", n+"-loopback", bytesV(b), boolV(true))
	}
	for n, m := range map[string]*dns.Msg{
		"explain-fo":  query("_gslb-explain.fo."+gz, dns.TypeTXT),
		"explain-w":   query("_gslb-explain.w."+gz, dns.TypeTXT, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 8, Address: net.IPv4(10, 0, 0, 0).To4()}),
		"explain-bad": query("_gslb-explain.nope."+gz, dns.TypeTXT),
		"ecs-v6":      query("app."+gz, dns.TypeAAAA, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 2, SourceNetmask: 32, Address: net.ParseIP("2001:db8::")}),
		"ecs-two": query("app."+gz, dns.TypeA, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 0, Address: net.IPv4zero.To4()},
			&dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 0, Address: net.IPv4zero.To4()}),
		"ecs-v4-in-v6": query("app."+gz, dns.TypeA, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 2, SourceNetmask: 96, Address: net.ParseIP("::ffff:10.0.0.1")}),
		"apex":         query(gz, dns.TypeA),
		"lt":           query("localtargets-app."+gz, dns.TypeA),
		"rr-aaaa":      query("rr."+gz, dns.TypeAAAA),
		"empty-aaaa":   query("empty."+gz, dns.TypeAAAA),
	} {
		write("gslb", "FuzzServeDNS", n, bytesV(pack(m)), boolV(true))
		write("gslb", "FuzzServeDNS", n+"-remote", bytesV(pack(m)), boolV(false))
	}
	lt := "localtargets-app." + gz
	reply := func(qt uint16, edit func(m *dns.Msg)) []byte {
		q := new(dns.Msg)
		q.SetQuestion(lt, qt)
		q.Id = 777
		m := new(dns.Msg)
		m.SetReply(q)
		edit(m)
		return pack(m)
	}
	hdrA := dns.RR_Header{Name: lt, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30}
	for n, v := range map[string][]value{
		"nodata-no-soa": {bytesV(reply(dns.TypeA, func(m *dns.Msg) {})), boolV(false), boolV(true)},
		"aaaa-as-a": {bytesV(reply(dns.TypeA, func(m *dns.Msg) {
			m.Answer = []dns.RR{&dns.AAAA{Hdr: dns.RR_Header{Name: lt, Rrtype: dns.TypeAAAA, Class: dns.ClassINET}, AAAA: net.ParseIP("::1")}}
		})), boolV(false), boolV(true)},
		"a-for-aaaa": {bytesV(reply(dns.TypeAAAA, func(m *dns.Msg) { m.Answer = []dns.RR{&dns.A{Hdr: hdrA, A: net.IPv4(1, 2, 3, 4)}} })), boolV(true), boolV(true)},
		"a-class-chaos": {bytesV(reply(dns.TypeA, func(m *dns.Msg) {
			h := hdrA
			h.Class = dns.ClassCHAOS
			m.Answer = []dns.RR{&dns.A{Hdr: h, A: net.IPv4(1, 2, 3, 4)}}
		})), boolV(false), boolV(true)},
		"other-name": {bytesV(reply(dns.TypeA, func(m *dns.Msg) {
			h := hdrA
			h.Name = "evil.example."
			m.Answer = []dns.RR{&dns.A{Hdr: h, A: net.IPv4(1, 2, 3, 4)}}
		})), boolV(false), boolV(true)},
		"case": {bytesV(reply(dns.TypeA, func(m *dns.Msg) {
			h := hdrA
			h.Name = strings.ToUpper(lt)
			m.Answer = []dns.RR{&dns.A{Hdr: h, A: net.IPv4(1, 2, 3, 4)}}
		})), boolV(false), boolV(true)},
		"nx-with-data": {bytesV(reply(dns.TypeA, func(m *dns.Msg) {
			m.Rcode = dns.RcodeNameError
			m.Answer = []dns.RR{&dns.A{Hdr: hdrA, A: net.IPv4(1, 2, 3, 4)}}
		})), boolV(false), boolV(true)},
		"refused":       {bytesV(reply(dns.TypeA, func(m *dns.Msg) { m.Rcode = dns.RcodeRefused })), boolV(false), boolV(true)},
		"not-response":  {bytesV(reply(dns.TypeA, func(m *dns.Msg) { m.Response = false })), boolV(false), boolV(true)},
		"notify":        {bytesV(reply(dns.TypeA, func(m *dns.Msg) { m.Opcode = dns.OpcodeNotify })), boolV(false), boolV(true)},
		"two-questions": {bytesV(reply(dns.TypeA, func(m *dns.Msg) { m.Question = append(m.Question, m.Question[0]) })), boolV(false), boolV(true)},
		"no-question":   {bytesV(reply(dns.TypeA, func(m *dns.Msg) { m.Question = nil })), boolV(false), boolV(true)},
		"wrong-id":      {bytesV(reply(dns.TypeA, func(m *dns.Msg) {})), boolV(false), boolV(false)},
		"ttl0":          {bytesV(reply(dns.TypeA, func(m *dns.Msg) { h := hdrA; h.Ttl = 0; m.Answer = []dns.RR{&dns.A{Hdr: h, A: net.IPv4(1, 2, 3, 4)}} })), boolV(false), boolV(true)},
		"ttl-max": {bytesV(reply(dns.TypeA, func(m *dns.Msg) {
			h := hdrA
			h.Ttl = 1<<32 - 1
			m.Answer = []dns.RR{&dns.A{Hdr: h, A: net.IPv4(1, 2, 3, 4)}}
		})), boolV(false), boolV(true)},
		"soa-in-answer": {bytesV(reply(dns.TypeA, func(m *dns.Msg) {
			m.Ns = []dns.RR{&dns.SOA{Hdr: dns.RR_Header{Name: gz, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 5}, Ns: "a.", Mbox: "b.", Minttl: 1 << 31}}
		})), boolV(false), boolV(true)},
		"truncated": {bytesV(reply(dns.TypeA, func(m *dns.Msg) { m.Truncated = true })), boolV(false), boolV(true)},
		"thousands": {bytesV(reply(dns.TypeA, func(m *dns.Msg) {
			for i := range 3000 {
				m.Answer = append(m.Answer, &dns.A{Hdr: hdrA, A: net.IPv4(10, byte(i>>16), byte(i>>8), byte(i))})
			}
		})), boolV(false), boolV(true)},
		"rdlen0": {bytesV(append(reply(dns.TypeA, func(m *dns.Msg) { m.Answer = []dns.RR{&dns.A{Hdr: hdrA, A: net.IPv4(1, 2, 3, 4)}} })[:len(reply(dns.TypeA, func(m *dns.Msg) { m.Answer = []dns.RR{&dns.A{Hdr: hdrA, A: net.IPv4(1, 2, 3, 4)}} }))-6], 0, 0)), boolV(false), boolV(true)},
	} {
		write("gslb", "FuzzPeerAnswer", n, v...)
	}
	for n, b := range badQueries(gz) {
		write("gslb", "FuzzPeerAnswer", "client-"+n, bytesV(b), boolV(false), boolV(true))
	}

	// ---- splitdns
	for n, s := range corefiles("splitdns", []string{
		"splitdns {\n route svc.acme.internal 10.0.0.1 tls://10.0.0.9 dns://10.0.0.2:5353\n route acme.internal 10.0.0.3\n default 192.0.2.1 [2001:db8::1]:53\n policy round_robin\n health_check 1s\n timeout 500ms\n tls_servername dns.acme.internal\n ready_requires default acme.internal\n}",
		"splitdns {\n resolv /etc/resolv.conf\n}",
		"splitdns {\n resolv /nonexistent\n}",
		"splitdns {\n kubedns /nonexistent\n}",
		"splitdns {\n route . 10.0.0.1\n}",
		"splitdns {\n route a.example 10.0.0.1\n route A.example. 10.0.0.2\n}",
		"splitdns {\n route a.example\n}",
		"splitdns {\n route a.example not-an-address\n}",
		"splitdns {\n route a.example 10.0.0.1:99999\n}",
		"splitdns {\n default 10.0.0.1\n resolv /etc/resolv.conf\n}",
		"splitdns {\n default 10.0.0.1\n default 10.0.0.2\n}",
		"splitdns {\n policy fastest\n}",
		"splitdns {\n timeout -1s\n health_check x\n}",
		"splitdns {\n tls a b c d\n}",
		"splitdns {\n tls /nonexistent.crt /nonexistent.key\n}",
		"splitdns {\n ready_requires\n}",
		"splitdns {\n ready_requires all default\n}",
		"splitdns {\n ready_requires ..\n}",
		"splitdns x {\n}",
		"splitdns\nsplitdns",
		".:53 {\n splitdns {\n  default 127.0.0.1:53\n }\n}",
		"splitdns {\n route 10.in-addr.arpa 10.0.0.1\n route 10.0.0.0/8 10.0.0.2\n}",
		"splitdns {\n route a.example https://10.0.0.1\n}",
		"splitdns {\n route a.example tls://[::1]:853\n}",
		"splitdns {\n bogus\n}",
	}) {
		write("splitdns", "FuzzParse", n, stringV(s))
	}
	for n, v := range map[string][2]string{
		"valid":       {`{"acme.local": ["1.2.3.4", "1.2.3.5:5353"], "corp.example": ["[2001:db8::1]:53", "2001:db8::2"]}`, `["8.8.8.8", "8.8.4.4:53"]`},
		"empty":       {"", ""},
		"whitespace":  {" \n\t", "\n"},
		"null":        {"null", "null"},
		"badjson":     {`{"acme.local": ["1.2.3.4"`, `["8.8.8.8"`},
		"wrongshape":  {`["1.2.3.4"]`, `{"a": "b"}`},
		"badentries":  {`{"": ["1.2.3.4"], ".": ["1.2.3.4"], "..": ["x"], "a.example": ["not-an-ip", "1.2.3.4:0", "1.2.3.4:70000", ""], "b.example": []}`, `["", "x", "1.2.3.4:99999", "[::1]"]`},
		"dup":         {`{"a.example": ["1.2.3.4"], "A.example.": ["1.2.3.5"]}`, `[]`},
		"numbers":     {`{"a.example": [1, 2]}`, `[1]`},
		"long":        {`{"` + strings.Repeat("a.", 130) + `example": ["1.2.3.4"]}`, `["1.1.1.1"]`},
		"unicode":     {`{"bücher.example": ["1.2.3.4"], "\u0000.example": ["1.2.3.4"]}`, `["\u0000"]`},
		"reverse":     {`{"10.in-addr.arpa": ["1.2.3.4"], "10.0.0.0/8": ["1.2.3.4"]}`, ``},
		"transports":  {`{"a.example": ["tls://1.2.3.4", "dns://1.2.3.4:53", "https://x"]}`, `["tls://9.9.9.9"]`},
		"deepnesting": {strings.Repeat("[", 10000), strings.Repeat("{\"a\":", 1000)},
	} {
		write("splitdns", "FuzzKubeDNSFiles", n, bytesV(v[0]), bytesV(v[1]))
	}
	for n, b := range badQueries("acme.internal.") {
		write("splitdns", "FuzzServeDNS", n, bytesV(b))
	}
	up := func(edit func(q, m *dns.Msg)) []byte {
		q := new(dns.Msg)
		q.SetQuestion("db.acme.internal.", dns.TypeA)
		q.Id = 4242
		m := new(dns.Msg)
		m.SetReply(q)
		edit(q, m)
		return pack(m)
	}
	for n, v := range map[string][]value{
		"wrong-type":  {bytesV(up(func(q, m *dns.Msg) { m.Question[0].Qtype = dns.TypeAAAA })), boolV(true)},
		"no-question": {bytesV(up(func(q, m *dns.Msg) { m.Question = nil })), boolV(true)},
		"two-opt": {bytesV(up(func(q, m *dns.Msg) {
			m.SetEdns0(512, false)
			m.Extra = append(m.Extra, &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}})
		})), boolV(false)},
		"opt-no-query": {bytesV(up(func(q, m *dns.Msg) { m.SetEdns0(65535, true) })), boolV(false)},
		"servfail":     {bytesV(up(func(q, m *dns.Msg) { m.Rcode = dns.RcodeServerFailure })), boolV(true)},
		"refused":      {bytesV(up(func(q, m *dns.Msg) { m.Rcode = dns.RcodeRefused })), boolV(false)},
		"big-unsized": {bytesV(up(func(q, m *dns.Msg) {
			for i := range 100 {
				m.Answer = append(m.Answer, &dns.TXT{Hdr: dns.RR_Header{Name: "db.acme.internal.", Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60}, Txt: []string{strings.Repeat("x", 100), strconv.Itoa(i)}})
			}
		})), boolV(false)},
		"header-only": {bytesV(header(0, 0, 0, 0)), boolV(false)},
		"empty":       {bytesV(nil), boolV(true)},
		"one-byte":    {bytesV([]byte{0}), boolV(true)},
		"counts-lie":  {bytesV(append(up(func(q, m *dns.Msg) {})[:6], 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)), boolV(false)},
		"query-back":  {bytesV(pack(query("db.acme.internal.", dns.TypeA))), boolV(true)},
	} {
		write("splitdns", "FuzzUpstreamAnswer", n, v...)
	}
	for n, b := range badQueries("acme.internal.") {
		if n == "selfloop" || n == "pingpong" || n == "name256" || n == "optlen" {
			write("splitdns", "FuzzUpstreamAnswer", "raw-"+n, bytesV(b), boolV(true))
		}
	}
}
