package k8scrd_test

import (
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/test/harness"
	"github.com/miekg/dns"
)

// The generated differential: a random zone of about 640 names (every
// record type, RFC 4592's own wildcard example, delegations with and
// without glue, sibling glue, CNAME chains, empty non-terminals, mixed case)
// served by k8scrd from DNSEndpoint manifests and by Knot and NSD from the
// same data as a zone file, and thousands of random queries (UDP with and
// without EDNS, 512 octets among the sizes, TCP, DO, RD, random case) asked
// of all three. A difference where Knot and NSD agree fails the test with
// the query and the three answers; where Knot and NSD differ from each other
// the difference is counted and logged, not failed (genView says what is
// not compared, and why).
//
// Seeds: the fixed ones below run in CI; -diff.seed=N (or FLEETDNS_DIFF_SEED)
// adds one, and "random" a random one, printed either way so that a failure
// can be replayed. -diff.queries sets the queries per seed.

var (
	diffSeed     = flag.String("diff.seed", os.Getenv("FLEETDNS_DIFF_SEED"), "an extra seed for the generated differential (a number, or random)")
	diffQueriesN = flag.Int("diff.queries", 3000, "queries per seed of the generated differential")
)

// fixedSeeds run in every test run (CI).
var fixedSeeds = []uint64{1, 17, 2026}

const genOrigin = "gen.example."

// genRRset is one RRset: the owner as written (mixed case), its type, TTL,
// the external-dns targets and the zone-file RDATA of each.
type genRRset struct {
	owner   string
	rtype   string
	ttl     int
	targets []string
	rdata   []string
}

type genZone struct {
	sets    []genRRset
	owners  []string // every owner, lower case
	cuts    []string // delegation points
	missing []string // names that exist nowhere, for NXDOMAIN
}

func (z *genZone) add(owner, rtype string, ttl int, targets, rdata []string) {
	z.sets = append(z.sets, genRRset{owner: owner, rtype: rtype, ttl: ttl, targets: targets, rdata: rdata})
	z.owners = append(z.owners, strings.ToLower(owner))
}

// mixCase writes name with random letters upper-cased.
func mixCase(r *rand.Rand, name string) string {
	b := []byte(name)
	for i, c := range b {
		if c >= 'a' && c <= 'z' && r.IntN(3) == 0 {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// txtText is a TXT target: printable text with spaces anywhere (leading,
// trailing, doubled), some longer than one 255-octet string.
func txtText(r *rand.Rand) string {
	n := 1 + r.IntN(40)
	switch r.IntN(8) {
	case 0:
		n = 200 + r.IntN(300) // two or more character-strings
	case 1:
		return "  -all  end.  v=spf1 " // issue 17's own
	}
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789 =-.:;,_/+"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	if r.IntN(3) == 0 {
		b[0] = ' '
	}
	return string(b)
}

// txtRDATA is text as zone-file RDATA: character-strings of 255 octets.
func txtRDATA(text string) string {
	var parts []string
	for {
		n := min(len(text), 255)
		parts = append(parts, `"`+text[:n]+`"`)
		text = text[n:]
		if text == "" {
			return strings.Join(parts, " ")
		}
	}
}

func genAddr4(r *rand.Rand) string { return fmt.Sprintf("192.0.2.%d", 1+r.IntN(254)) }
func genAddr6(r *rand.Rand) string { return fmt.Sprintf("2001:db8::%x", 1+r.IntN(0xfffe)) }

// generate builds the zone for seed.
func generate(seed uint64) *genZone {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	z := &genZone{}
	o := genOrigin
	fq := func(s string) string { return s + "." + o }
	hosts := []string{}

	// The apex: NS at two in-zone servers with addresses, MX, TXT, CAA.
	z.add(o, "NS", 3600, []string{fq("ns1"), fq("ns2")}, []string{fq("ns1"), fq("ns2")})
	z.add(fq("ns1"), "A", 3600, []string{"192.0.2.1"}, []string{"192.0.2.1"})
	z.add(fq("ns2"), "A", 3600, []string{"192.0.2.2"}, []string{"192.0.2.2"})
	z.add(fq("ns2"), "AAAA", 3600, []string{"2001:db8::2"}, []string{"2001:db8::2"})
	z.add(o, "MX", 300, []string{"10 " + fq("mail")}, []string{"10 " + fq("mail")})
	z.add(fq("mail"), "A", 300, []string{"192.0.2.25"}, []string{"192.0.2.25"})
	z.add(o, "TXT", 300, []string{"v=spf1 mx -all"}, []string{txtRDATA("v=spf1 mx -all")})
	z.add(o, "CAA", 300, []string{`0 issue "letsencrypt.org"`}, []string{`0 issue "letsencrypt.org"`})

	// Hosts: one to three types each, every type external-dns serves.
	for i := range 330 {
		name := fq(fmt.Sprintf("h%d", i))
		owner := mixCase(r, name)
		hosts = append(hosts, name)
		kinds := []string{"A", "AAAA", "TXT", "MX", "SRV", "PTR", "CAA", "NAPTR"}
		r.Shuffle(len(kinds), func(a, b int) { kinds[a], kinds[b] = kinds[b], kinds[a] })
		for _, k := range kinds[:1+r.IntN(3)] {
			ttl := []int{30, 60, 300, 3600}[r.IntN(4)]
			var targets, rdata []string
			for range 1 + r.IntN(3) {
				switch k {
				case "A":
					a := genAddr4(r)
					targets, rdata = append(targets, a), append(rdata, a)
				case "AAAA":
					a := genAddr6(r)
					targets, rdata = append(targets, a), append(rdata, a)
				case "TXT":
					x := txtText(r)
					targets, rdata = append(targets, x), append(rdata, txtRDATA(x))
				case "MX":
					tgt := fq(fmt.Sprintf("h%d", r.IntN(330)))
					if r.IntN(4) == 0 {
						tgt = "mx.elsewhere.example."
					}
					x := fmt.Sprintf("%d %s", 10*(1+r.IntN(5)), tgt)
					targets, rdata = append(targets, x), append(rdata, x)
				case "PTR":
					x := fq(fmt.Sprintf("h%d", r.IntN(330)))
					targets, rdata = append(targets, x), append(rdata, x)
				case "CAA":
					x := fmt.Sprintf(`0 issue "ca%d.example"`, r.IntN(5))
					targets, rdata = append(targets, x), append(rdata, x)
				case "NAPTR":
					x := fmt.Sprintf(`%d 10 "S" "SIP+D2U" "" _sip._udp.%s`, 100+r.IntN(3), o)
					targets, rdata = append(targets, x), append(rdata, x)
				case "SRV":
					x := fmt.Sprintf("10 %d %d %s", r.IntN(100), 1000+r.IntN(9000), fq(fmt.Sprintf("h%d", r.IntN(330))))
					targets, rdata = append(targets, x), append(rdata, x)
				}
			}
			targets, rdata = dedup(targets, rdata)
			at := owner
			if k == "SRV" {
				at = "_svc._tcp." + owner // _tcp.hN is an empty non-terminal
			}
			z.add(at, k, ttl, targets, rdata)
		}
	}
	// A TXT answer of about 400 octets: it fits 512 only without the apex NS set.
	big := strings.Repeat("x", 380)
	z.add(fq("big-txt"), "TXT", 300, []string{big}, []string{txtRDATA(big)})
	// Three such strings: no 512-octet answer holds them.
	z.add(fq("huge-txt"), "TXT", 300, []string{big + "a", big + "b", big + "c"}, []string{txtRDATA(big + "a"), txtRDATA(big + "b"), txtRDATA(big + "c")})

	// Empty non-terminals: leaf.mid.entN exists, mid.entN and entN do not.
	for i := range 40 {
		a := genAddr4(r)
		z.add(mixCase(r, fq(fmt.Sprintf("leaf.mid.ent%d", i))), "A", 300, []string{a}, []string{a})
	}

	// RFC 4592 §2.2.1's example, under w.
	w := fq("w")
	z.add("*."+w, "TXT", 3600, []string{"this is a wildcard"}, []string{`"this is a wildcard"`})
	z.add("*."+w, "MX", 3600, []string{"10 host1." + w}, []string{"10 host1." + w})
	z.add("sub.*."+w, "TXT", 3600, []string{"this is not a wildcard"}, []string{`"this is not a wildcard"`})
	z.add("host1."+w, "MX", 3600, []string{"10 host1." + w}, []string{"10 host1." + w})
	z.add("_ssh._tcp.host1."+w, "SRV", 3600, []string{"0 0 22 host1." + w}, []string{"0 0 22 host1." + w})
	z.add("_ssh._tcp.host2."+w, "SRV", 3600, []string{"0 0 22 host2." + w}, []string{"0 0 22 host2." + w})
	z.add("subdel."+w, "NS", 3600, []string{"ns.example.com.", "ns.example.net."}, []string{"ns.example.com.", "ns.example.net."})
	z.cuts = append(z.cuts, "subdel."+w)
	// An address wildcard beside it.
	z.add("*."+fq("wa"), "A", 300, []string{"192.0.2.99"}, []string{"192.0.2.99"})
	z.add("*."+fq("wa"), "AAAA", 300, []string{"2001:db8::99"}, []string{"2001:db8::99"})

	// Delegations: in-domain glue, none (out of zone), sibling glue (a name
	// server under another delegation), a name server the zone holds, glue
	// too large for 512 octets.
	for i := range 30 {
		cut := fq(fmt.Sprintf("d%d", i))
		z.cuts = append(z.cuts, cut)
		switch i % 5 {
		case 0:
			ns := "ns." + cut
			z.add(mixCase(r, cut), "NS", 3600, []string{ns, "ns.elsewhere.example."}, []string{ns, "ns.elsewhere.example."})
			a, b := genAddr4(r), genAddr6(r)
			z.add(ns, "A", 3600, []string{a}, []string{a})
			z.add(ns, "AAAA", 3600, []string{b}, []string{b})
		case 1:
			z.add(cut, "NS", 3600, []string{"ns1.elsewhere.example.", "ns2.elsewhere.example."}, []string{"ns1.elsewhere.example.", "ns2.elsewhere.example."})
		case 2:
			sib := "ns." + fq(fmt.Sprintf("d%d", i-2)) // under d(i-2), a case-0 delegation
			z.add(cut, "NS", 3600, []string{sib}, []string{sib})
		case 3:
			z.add(cut, "NS", 3600, []string{fq("ns2"), "ns.elsewhere.example."}, []string{fq("ns2"), "ns.elsewhere.example."})
		case 4:
			ns1, ns2 := "a.ns."+cut, "b.ns."+cut
			z.add(cut, "NS", 3600, []string{ns1, ns2}, []string{ns1, ns2})
			for _, ns := range []string{ns1, ns2} {
				var addrs []string
				for j := range 12 {
					addrs = append(addrs, fmt.Sprintf("2001:db8:%x::%x", i, j+1))
				}
				z.add(ns, "AAAA", 3600, addrs, addrs)
			}
		}
	}

	// CNAME chains of one to three links, ending at a host, nowhere, outside
	// the zone, at a wildcard, below a delegation, at the apex.
	for i := range 60 {
		links := 1 + r.IntN(3)
		var end string
		switch r.IntN(6) {
		case 0:
			end = fq(fmt.Sprintf("nowhere%d", i))
			z.missing = append(z.missing, end)
		case 1:
			end = "www.elsewhere.example."
		case 2:
			end = fmt.Sprintf("x%d.%s", i, fq("wa"))
		case 3:
			end = fmt.Sprintf("host.%s", fq(fmt.Sprintf("d%d", r.IntN(30))))
		case 4:
			end = o
		default:
			end = hosts[r.IntN(len(hosts))]
		}
		next := end
		for l := links - 1; l >= 0; l-- {
			name := fq(fmt.Sprintf("c%d-%d", i, l))
			z.add(mixCase(r, name), "CNAME", 300, []string{next}, []string{next})
			next = name
		}
	}
	for i := range 20 {
		z.missing = append(z.missing, fq(fmt.Sprintf("nx%d", i)), fq(fmt.Sprintf("nx.h%d", i)))
	}
	return z
}

// dedup drops repeated targets and their RDATA alike.
func dedup(targets, rdata []string) ([]string, []string) {
	var t2, r2 []string
	seen := map[string]bool{}
	for i, t := range targets {
		if !seen[strings.ToLower(t)] {
			seen[strings.ToLower(t)] = true
			t2, r2 = append(t2, t), append(r2, rdata[i])
		}
	}
	return t2, r2
}

// zoneFile is the zone as a zone file, the synthesized SOA as k8scrd's.
func (z *genZone) zoneFile() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s 300 IN SOA ns1.%s hostmaster.%s 1 7200 1800 86400 60\n", genOrigin, genOrigin, genOrigin)
	for _, s := range z.sets {
		for _, rd := range s.rdata {
			fmt.Fprintf(&b, "%s %d IN %s %s\n", s.owner, s.ttl, s.rtype, rd)
		}
	}
	return b.String()
}

// endpoints is the zone as DNSEndpoint endpoints.
func (z *genZone) endpoints() []harness.Endpoint {
	var eps []harness.Endpoint
	for _, s := range z.sets {
		eps = append(eps, harness.Endpoint{DNSName: strings.TrimSuffix(s.owner, "."), RecordType: s.rtype, Targets: s.targets, TTL: int64(s.ttl)})
	}
	return eps
}

// genQuery is one query of the corpus.
type genQuery struct {
	name  string
	qtype uint16
	opts  []harness.QueryOption
	label string
}

var genTypes = []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeTXT, dns.TypeMX, dns.TypeSRV, dns.TypeNS, dns.TypeCNAME,
	dns.TypePTR, dns.TypeCAA, dns.TypeNAPTR, dns.TypeSOA, dns.TypeANY, dns.TypeANY, dns.TypeDS, dns.TypeHINFO}

// queries draws n queries for z.
func (z *genZone) queries(seed uint64, n int) []genQuery {
	r := rand.New(rand.NewPCG(seed^0x5bd1e995, seed))
	out := make([]genQuery, 0, n)
	for range n {
		var name string
		switch p := r.IntN(100); {
		case p < 55:
			name = z.owners[r.IntN(len(z.owners))]
		case p < 62: // parents: empty non-terminals among them
			name = z.owners[r.IntN(len(z.owners))]
			if i := strings.IndexByte(name, '.'); i >= 0 && dns.IsSubDomain(genOrigin, name[i+1:]) {
				name = name[i+1:]
			}
		case p < 72:
			name = z.missing[r.IntN(len(z.missing))]
		case p < 80:
			name = "x." + z.cuts[r.IntN(len(z.cuts))]
		case p < 86:
			name = z.cuts[r.IntN(len(z.cuts))]
		case p < 94:
			name = []string{"a.w.", "host3.w.", "foo.bar.w.", "ghost.*.w.", "sub.*.w.", "*.w.", "x.wa.", "y.z.wa.", "_foo._udp.w.", "host1.w."}[r.IntN(10)] + genOrigin
		default:
			name = "nx" + strconv.Itoa(r.IntN(1000)) + "." + z.owners[r.IntN(len(z.owners))]
		}
		qtype := genTypes[r.IntN(len(genTypes))]
		if r.IntN(2) == 0 {
			name = mixCase(r, name)
		}
		var opts []harness.QueryOption
		var how []string
		switch r.IntN(5) {
		case 0:
			how = append(how, "UDP")
		case 1:
			opts, how = append(opts, harness.EDNS(512)), append(how, "UDP EDNS 512")
		case 2:
			opts, how = append(opts, harness.EDNS(1232)), append(how, "UDP EDNS 1232")
		case 3:
			opts, how = append(opts, harness.EDNS(4096)), append(how, "UDP EDNS 4096")
		case 4:
			opts, how = append(opts, harness.TCP), append(how, "TCP")
			if r.IntN(2) == 0 {
				opts = append(opts, harness.EDNS(1232))
			}
		}
		if r.IntN(4) == 0 {
			opts, how = append(opts, harness.DO), append(how, "DO")
		}
		if r.IntN(2) == 0 {
			opts, how = append(opts, harness.NoRD), append(how, "no RD")
		}
		opts = append(opts, harness.Timeout(2*time.Second), harness.Attempts(2))
		out = append(out, genQuery{name: name, qtype: qtype, opts: opts,
			label: fmt.Sprintf("%s %s (%s)", name, dns.TypeToString[qtype], strings.Join(how, ", "))})
	}
	return out
}

// genView is what is compared. Left out, as legitimate differences between
// authoritative servers:
//   - a truncated reply's sections (TC is compared: servers put different
//     parts of what did not fit in it);
//   - with DO set, the additional section's optional data: k8scrd adds a
//     referral's sibling glue then and nothing else (a dnssec plugin in
//     front would sign the rest into a TC), Knot and NSD add more, so the
//     sibling glue is not compared either; a referral's in-domain glue is
//     required and compared;
//   - the SOA serial (the test's zone file has its own).
func genView(m *dns.Msg, do bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "rcode=%s aa=%v tc=%v", dns.RcodeToString[m.Rcode], m.Authoritative, m.Truncated)
	if m.Truncated {
		return b.String()
	}
	zero := func(rrs []dns.RR) []dns.RR {
		out := make([]dns.RR, 0, len(rrs))
		for _, rr := range rrs {
			rr = dns.Copy(rr)
			if soa, ok := rr.(*dns.SOA); ok {
				soa.Serial = 0
				soa.Ns, soa.Mbox = strings.ToLower(soa.Ns), strings.ToLower(soa.Mbox)
			}
			out = append(out, rr)
		}
		return out
	}
	extra := m.Extra
	if do {
		extra = nil
		for _, rr := range m.Extra {
			for _, ns := range m.Ns {
				if ns.Header().Rrtype == dns.TypeNS && !m.Authoritative && dns.IsSubDomain(strings.ToLower(ns.Header().Name), strings.ToLower(rr.Header().Name)) {
					extra = append(extra, rr)
					break
				}
			}
		}
	}
	lower := func(ss []string) string { return strings.ToLower(strings.Join(ss, "\n             ")) }
	fmt.Fprintf(&b, "\n  answer:     %s\n  authority:  %s\n  additional: %s",
		lower(harness.RRStrings(zero(m.Answer))), lower(harness.RRStrings(zero(m.Ns))), lower(harness.RRStrings(dedupRRs(extra))))
	return b.String()
}

// dedupRRs drops repeated records (a server may add one address twice).
func dedupRRs(rrs []dns.RR) []dns.RR {
	seen := map[string]bool{}
	var out []dns.RR
	for _, rr := range rrs {
		s := strings.ToLower(rr.String())
		if !seen[s] {
			seen[s] = true
			out = append(out, rr)
		}
	}
	return out
}

func TestGeneratedDifferentialAgainstKnotAndNSD(t *testing.T) {
	seeds := slices.Clone(fixedSeeds)
	switch s := *diffSeed; s {
	case "":
	case "random":
		seeds = append(seeds, rand.Uint64())
	default:
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("-diff.seed %q: want a number or random", s)
		}
		seeds = append(seeds, v)
	}
	n := *diffQueriesN
	if testing.Short() {
		n = 500
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Logf("seed %d (replay: go test ./test/k8scrd/ -run 'TestGeneratedDifferential/seed=%d' -diff.seed=%d)", seed, seed, seed)
			runGenerated(t, seed, n)
		})
	}
}

func runGenerated(t *testing.T, seed uint64, n int) {
	z := generate(seed)
	zf := z.zoneFile()
	if d := os.Getenv("FLEETDNS_DIFF_DUMP"); d != "" {
		// For replaying by hand: the zone file of this seed.
		if err := os.WriteFile(fmt.Sprintf("%s/gen-%d.zone", d, seed), []byte(zf), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	knot := harness.StartKnot(t, map[string]string{genOrigin: zf})
	nsd := harness.StartNSD(t, map[string]string{genOrigin: zf}, "minimal-responses: yes")
	dir := t.TempDir()
	writeManifests(t, dir, "gen.yaml", harness.DNSEndpointObject("default", "gen", nil, z.endpoints()...))
	srv := startK8sCRD(t, genOrigin, source{directory: dir}, []string{"ttl 300", "negttl 60", "soa ns1." + genOrigin + " hostmaster." + genOrigin}, nil, true)

	qs := z.queries(seed, n)
	type result struct{ k8s, knot, nsd string }
	results := make([]result, len(qs))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var netErr error
	const workers = 4
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(qs); i += workers {
				q := qs[i]
				_, qq := harness.NewMsg(q.name, q.qtype, q.opts...)
				var views [3]string
				for j, addr := range []string{srv.Addr, knot.Addr, nsd.Addr} {
					m, err := harness.Ask(addr, q.name, q.qtype, q.opts...)
					if err != nil {
						mu.Lock()
						netErr = err
						mu.Unlock()
						return
					}
					views[j] = genView(m, qq.DO)
				}
				results[i] = result{views[0], views[1], views[2]}
			}
		}()
	}
	wg.Wait()
	if netErr != nil {
		t.Fatalf("seed %d: %v", seed, netErr)
	}
	agree, refsDiffer, failed := 0, 0, 0
	var refExamples []string
	kinds := map[string]int{} // how Knot and NSD differ: query type and sections
	for i, r := range results {
		switch {
		case r.knot != r.nsd:
			refsDiffer++
			kind := dns.TypeToString[qs[i].qtype] + ": " + sectionsDiffering(r.knot, r.nsd)
			kinds[kind]++
			if kinds[kind] == 1 && testing.Verbose() {
				refExamples = append(refExamples, fmt.Sprintf("%s\nk8scrd: %s\nKnot:   %s\nNSD:    %s", qs[i].label, r.k8s, r.knot, r.nsd))
			}
		case r.k8s == r.knot:
			agree++
		default:
			failed++
			if failed <= 30 {
				t.Errorf("seed %d: %s: k8scrd differs from Knot and NSD, which agree\nk8scrd:     %s\nKnot = NSD: %s", seed, qs[i].label, r.k8s, r.knot)
			}
		}
	}
	t.Logf("seed %d: %d queries, %d names: %d agree with both references, %d differ where they agree, %d where Knot and NSD differ from each other",
		seed, len(qs), len(slices.Compact(slices.Sorted(slices.Values(z.owners)))), agree, failed, refsDiffer)
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		t.Logf("Knot and NSD differ in %s: %d", k, kinds[k])
	}
	for _, e := range refExamples {
		t.Logf("Knot and NSD differ (not failed):\n%s", e)
	}
}

// sectionsDiffering names the parts of two genViews that differ.
func sectionsDiffering(a, b string) string {
	split := func(v string) map[string]string {
		out := map[string]string{}
		cur := "flags"
		for _, l := range strings.Split(v, "\n") {
			t := strings.TrimSpace(l)
			for _, sec := range []string{"answer:", "authority:", "additional:"} {
				if strings.HasPrefix(t, sec) {
					cur = strings.TrimSuffix(sec, ":")
				}
			}
			out[cur] += t + "\n"
		}
		return out
	}
	x, y := split(a), split(b)
	var d []string
	for _, sec := range []string{"flags", "answer", "authority", "additional"} {
		if x[sec] != y[sec] {
			d = append(d, sec)
		}
	}
	return strings.Join(d, "+")
}
