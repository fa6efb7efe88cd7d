package gslb

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coredns/caddy"
	"github.com/fleetdns/fleetdns/internal/testkit"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// witnessPeer is a fakePeer that also answers TXT _gslb-peers.<zone> with
// lines the test sets, as a fleetdns cluster does; a plain fakePeer answers
// it NXDOMAIN, as a k8gb cluster's stock CoreDNS does.
type witnessPeer struct {
	*fakePeer
	lmu   sync.Mutex
	lines []string
	asked sync.Map // qname -> struct{}: _gslb-peers was asked
}

func startWitnessPeer(t *testing.T, targets map[string][]string, lines ...string) *witnessPeer {
	t.Helper()
	wp := &witnessPeer{lines: lines}
	wp.fakePeer = startPeerWith(t, "127.0.0.1:0", targets, func(p *fakePeer) dns.HandlerFunc {
		return func(w dns.ResponseWriter, r *dns.Msg) { wp.serve(p, w, r) }
	})
	return wp
}

func (wp *witnessPeer) setLines(lines ...string) {
	wp.lmu.Lock()
	defer wp.lmu.Unlock()
	wp.lines = lines
}

func (wp *witnessPeer) serve(p *fakePeer, w dns.ResponseWriter, r *dns.Msg) {
	q := r.Question[0]
	if !strings.EqualFold(q.Name, peersLabel+zone) {
		p.serve(w, r)
		return
	}
	wp.asked.Store(q.Name, struct{}{})
	wp.lmu.Lock()
	lines := slices.Clone(wp.lines)
	wp.lmu.Unlock()
	m := new(dns.Msg)
	m.SetReply(r)
	for _, l := range lines {
		m.Answer = append(m.Answer, &dns.TXT{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET}, Txt: []string{l}})
	}
	w.WriteMsg(m)
}

// witnessFleet is the cluster "us" with a failover host whose primary is
// eu; eu is a fakePeer the test silences, the witnesses are the other
// peers.
func witnessFleet(t *testing.T, extra string, witnesses map[string]string) (*GSLB, *fakePeer) {
	t.Helper()
	st := newFakeStore(withProps(host(app, "10.0.1.1"), "gslb/strategy", "failover", "gslb/primary", "eu,us"))
	eu := startPeer(t, map[string][]string{app: {"10.0.2.1"}})
	var peers strings.Builder
	fmt.Fprintf(&peers, "peer eu %s\n", eu.addr)
	for _, tag := range slices.Sorted(func(yield func(string) bool) {
		for k := range witnesses {
			if !yield(k) {
				return
			}
		}
	}) {
		fmt.Fprintf(&peers, "peer %s %s\n", tag, witnesses[tag])
	}
	g, _ := newGSLB(t, fmt.Sprintf(`gslb %s {
		geotag us
		%s
		timeout 500ms
		refresh 200ms
		split_brain_threshold 1s
		%s
	}`, zone, peers.String(), extra), st)
	waitReady(t, g)
	if got := addrs(ask(t, g, app, dns.TypeA)); !slices.Equal(got, []string{"10.0.2.1"}) {
		t.Fatalf("before the cut: %v, want eu's answer", got)
	}
	return g, eu
}

func explainOf(t *testing.T, g *GSLB) string {
	t.Helper()
	m := ask(t, g, explainLabel+app, dns.TypeTXT, from("127.0.0.1"))
	if len(m.Answer) != 1 {
		t.Fatalf("no explain record: %v", m)
	}
	return strings.Join(m.Answer[0].(*dns.TXT).Txt, "\n")
}

func TestWitnessMajorityKeepsAPartitionedPeer(t *testing.T) {
	ap := startWitnessPeer(t, map[string][]string{}, "peer=eu state=up age=0s", "peer=us state=up age=0s")
	za := startPeer(t, map[string][]string{}) // k8gb-shaped: NXDOMAIN for _gslb-peers
	g, eu := witnessFleet(t, "", map[string]string{"ap": ap.addr, "za": za.addr})
	gauge := func(s state) float64 { return testutil.ToFloat64(peerState.WithLabelValues(zone, "eu", s.String())) }

	eu.setMode("silent")
	// Partitioned comes only past split_brain_threshold.
	testkit.Eventually(t, 5*time.Second, "eu partitioned", func() bool { return stateOf(g, "eu") == statePartitioned })
	if got := addrs(ask(t, g, app, dns.TypeA)); !slices.Equal(got, []string{"10.0.2.1"}) {
		t.Errorf("partitioned primary: got %v, want its last answer", got)
	}
	// The series moves on the peer's loop, after the state read above.
	testkit.Eventually(t, 5*time.Second, "peer_state partitioned", func() (bool, string) {
		return gauge(statePartitioned) == 1 && gauge(stateDown) == 0 && gauge(stateStale) == 0,
			fmt.Sprintf("peer_state: partitioned %v down %v stale %v, want 1 0 0", gauge(statePartitioned), gauge(stateDown), gauge(stateStale))
	})
	x := explainOf(t, g)
	if !strings.Contains(x, "state partitioned") || !strings.Contains(x, "vouched for by ap, not by -, no view from za") {
		t.Errorf("explain does not name the vouching peer:\n%s", x)
	}
	if _, ok := ap.asked.Load(peersLabel + zone); !ok {
		t.Error("ap was never asked _gslb-peers")
	}

	// ap loses eu too: no majority any more, eu is down, failover to us.
	ap.setLines("peer=eu state=stale age=2s")
	testkit.Eventually(t, 5*time.Second, "eu down", func() bool { return stateOf(g, "eu") == stateDown })
	if got := addrs(ask(t, g, app, dns.TypeA)); !slices.Equal(got, []string{"10.0.1.1"}) {
		t.Errorf("down primary: got %v, want failover to us", got)
	}
	if x := explainOf(t, g); !strings.Contains(x, "vouched for by -, not by ap") {
		t.Errorf("explain after ap lost eu:\n%s", x)
	}

	eu.setMode("")
	testkit.Eventually(t, 5*time.Second, "eu up", func() bool { return stateOf(g, "eu") == stateUp })
}

func TestWitnessTieIsNoMajority(t *testing.T) {
	ap := startWitnessPeer(t, map[string][]string{}, "peer=eu state=up age=0s")
	af := startWitnessPeer(t, map[string][]string{}, "peer=eu state=down age=9s")
	g, eu := witnessFleet(t, "", map[string]string{"ap": ap.addr, "af": af.addr})
	eu.setMode("silent")
	testkit.Eventually(t, 5*time.Second, "eu down", func() bool { return stateOf(g, "eu") == stateDown })
	if x := explainOf(t, g); !strings.Contains(x, "vouched for by ap, not by af") {
		t.Errorf("explain:\n%s", x)
	}
	if got := addrs(ask(t, g, app, dns.TypeA)); !slices.Equal(got, []string{"10.0.1.1"}) {
		t.Errorf("got %v, want failover to us", got)
	}
}

func TestWitnessWithoutAnswersIsTheThreshold(t *testing.T) {
	// za answers NXDOMAIN, ap knows nothing of eu.
	za := startPeer(t, map[string][]string{})
	ap := startWitnessPeer(t, map[string][]string{}, "peer=us state=up age=0s")
	g, eu := witnessFleet(t, "", map[string]string{"za": za.addr, "ap": ap.addr})
	eu.setMode("silent")
	start := time.Now()
	testkit.Eventually(t, 5*time.Second, "eu down", func() bool { return stateOf(g, "eu") == stateDown })
	if d := time.Since(start); !testkit.Race && d > 3*time.Second {
		t.Errorf("eu down after %v: the witness delayed the threshold rule (1s)", d)
	}
	if x := explainOf(t, g); !strings.Contains(x, "no view from ap,za") {
		t.Errorf("explain:\n%s", x)
	}
}

func TestWitnessUpButOldIsNoVouch(t *testing.T) {
	// "up" with an answer older than split_brain_threshold does not vouch.
	ap := startWitnessPeer(t, map[string][]string{}, "peer=eu state=up age=30s")
	g, eu := witnessFleet(t, "", map[string]string{"ap": ap.addr})
	eu.setMode("silent")
	testkit.Eventually(t, 5*time.Second, "eu down", func() bool { return stateOf(g, "eu") == stateDown })
}

func TestWitnessCeiling(t *testing.T) {
	ap := startWitnessPeer(t, map[string][]string{}, "peer=eu state=up age=0s")
	g, eu := witnessFleet(t, "witness {\nceiling 2s\n}", map[string]string{"ap": ap.addr})
	eu.setMode("silent")
	testkit.Eventually(t, 5*time.Second, "eu partitioned", func() bool { return stateOf(g, "eu") == statePartitioned })
	start := time.Now()
	testkit.Eventually(t, 5*time.Second, "eu down at the ceiling", func() bool { return stateOf(g, "eu") == stateDown })
	if d := time.Since(start); !testkit.Race && d > 2*time.Second {
		t.Errorf("down %v after partitioned, want within the 2s ceiling", d)
	}
	if got := addrs(ask(t, g, app, dns.TypeA)); !slices.Equal(got, []string{"10.0.1.1"}) {
		t.Errorf("got %v, want failover to us", got)
	}
}

func TestWitnessOffIsTheThreshold(t *testing.T) {
	ap := startWitnessPeer(t, map[string][]string{}, "peer=eu state=up age=0s")
	g, eu := witnessFleet(t, "witness off", map[string]string{"ap": ap.addr})
	eu.setMode("silent")
	testkit.Eventually(t, 5*time.Second, "eu down", func() bool { return stateOf(g, "eu") == stateDown })
	if _, ok := ap.asked.Load(peersLabel + zone); ok {
		t.Error("witness off asked ap")
	}
	if m := ask(t, g, peersLabel+zone, dns.TypeTXT, from("127.0.0.1")); m.Rcode != dns.RcodeRefused {
		t.Errorf("witness off answers _gslb-peers: %v", m)
	}
}

// TestPeersRecord: the TXT format, its bound, and who may read it.
func TestPeersRecord(t *testing.T) {
	eu := startPeer(t, map[string][]string{app: {"10.0.2.1"}})
	ap := startPeer(t, map[string][]string{app: {"10.0.3.1"}})
	st := newFakeStore(host(app, "10.0.1.1"))
	g, _ := newGSLB(t, fmt.Sprintf(`gslb %s {
		geotag us
		peer eu %s
		peer ap %s
		peer zz 127.0.0.1:9
		timeout 1s
		refresh 200ms
		explain 198.51.100.0/24
	}`, zone, eu.addr, ap.addr), st)
	testkit.Eventually(t, 5*time.Second, "eu and ap up", func() bool {
		return stateOf(g, "eu") == stateUp && stateOf(g, "ap") == stateUp && stateOf(g, "zz") == stateDown
	})
	txt := func(m *dns.Msg) []string {
		var out []string
		for _, rr := range m.Answer {
			out = append(out, strings.Join(rr.(*dns.TXT).Txt, ""))
		}
		return out
	}
	// From a peer's address (the fake peers are on 127.0.0.1).
	m := ask(t, g, peersLabel+zone, dns.TypeTXT, from("127.0.0.1"))
	got := txt(m)
	if m.Rcode != dns.RcodeSuccess || len(got) != 3 || !m.Authoritative {
		t.Fatalf("_gslb-peers from a peer: %v", m)
	}
	want := []*regexp.Regexp{
		regexp.MustCompile(`^peer=ap state=up age=[0-9]s$`),
		regexp.MustCompile(`^peer=eu state=up age=[0-9]s$`),
		regexp.MustCompile(`^peer=zz state=down$`), // never answered: no age
	}
	for i, l := range got {
		if !want[i].MatchString(l) {
			t.Errorf("line %d = %q, want %s", i, l, want[i])
		}
		if _, _, ok := parsePeerLine(l); !ok {
			t.Errorf("line %q does not parse", l)
		}
	}
	// An explain client may read it too; anyone else is refused.
	if m := ask(t, g, peersLabel+zone, dns.TypeTXT, from("198.51.100.7")); len(m.Answer) != 3 {
		t.Errorf("explain client: %v", m)
	}
	if m := ask(t, g, peersLabel+zone, dns.TypeTXT, from("192.0.2.7")); m.Rcode != dns.RcodeRefused || len(m.Answer) != 0 {
		t.Errorf("a stranger: rcode %s, %d records, want REFUSED", dns.RcodeToString[m.Rcode], len(m.Answer))
	}
	// Other types: NODATA with the SOA.
	if m := ask(t, g, peersLabel+zone, dns.TypeA, from("127.0.0.1")); m.Rcode != dns.RcodeSuccess || len(m.Answer) != 0 || len(m.Ns) != 1 {
		t.Errorf("A at _gslb-peers: %v", m)
	}
	// Bounded by max_peers.
	g.maxPeers = 2
	if got := txt(ask(t, g, peersLabel+zone, dns.TypeTXT, from("127.0.0.1"))); len(got) != 2 {
		t.Errorf("max_peers 2: %d lines", len(got))
	}
}

func TestPeersRecordFrom(t *testing.T) {
	st := newFakeStore(host(app, "10.0.1.1"))
	g, _ := newGSLB(t, fmt.Sprintf(`gslb %s {
		geotag us
		peer eu 127.0.0.1:9
		explain none
		witness {
			from 198.18.0.0/24 2001:db8::/32
		}
	}`, zone), st)
	for src, rcode := range map[string]int{
		"198.18.0.9":  dns.RcodeSuccess,
		"2001:db8::9": dns.RcodeSuccess,
		"127.0.0.1":   dns.RcodeRefused, // the peer's address, but `from` replaces it
		"198.18.1.9":  dns.RcodeRefused,
	} {
		if m := ask(t, g, peersLabel+zone, dns.TypeTXT, from(src)); m.Rcode != rcode {
			t.Errorf("from %s: %s, want %s", src, dns.RcodeToString[m.Rcode], dns.RcodeToString[rcode])
		}
	}
}

func TestParsePeersAnswer(t *testing.T) {
	r := new(dns.Msg)
	add := func(s ...string) {
		r.Answer = append(r.Answer, &dns.TXT{Hdr: dns.RR_Header{Name: peersLabel + zone, Rrtype: dns.TypeTXT, Class: dns.ClassINET}, Txt: s})
	}
	add("peer=eu state=up age=3s")
	add("peer=eu state=down age=3s") // the first line of a peer counts
	add("peer=ap ", "state=stale age=12s future=1")
	add("v=spf1 -all") // not the format: ignored
	add("peer=us")     // no state: ignored
	add("peer=af state=up age=-3s")
	got := parsePeersAnswer(r, 64)
	want := map[string]peerReport{
		"eu": {state: "up", age: 3 * time.Second, ageSet: true},
		"ap": {state: "stale", age: 12 * time.Second, ageSet: true},
		"af": {state: "up"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %+v, want %+v", k, got[k], w)
		}
	}
	if got["af"].up(time.Minute) {
		t.Error("up without an age vouches")
	}
	if n := len(parsePeersAnswer(r, 2)); n != 2 {
		t.Errorf("limit 2: %d peers", n)
	}
}

// TestSilentState: the decision itself, by age and verdict.
func TestSilentState(t *testing.T) {
	g := New(zone)
	g.splitBrain = 10 * time.Second
	g.derive()
	now := time.Unix(1e6, 0)
	g.now = func() time.Time { return now }
	for _, tc := range []struct {
		name    string
		age     time.Duration // since the last good answer; 0: never answered
		verdict *verdict
		want    state
	}{
		{"never answered", 0, nil, stateDown},
		{"within the threshold", 5 * time.Second, nil, stateStale},
		{"past it, no verdict", 11 * time.Second, nil, stateDown},
		{"majority", 11 * time.Second, &verdict{at: now, vouched: []string{"a", "b"}, against: []string{"c"}}, statePartitioned},
		{"tie", 11 * time.Second, &verdict{at: now, vouched: []string{"a"}, against: []string{"c"}}, stateDown},
		{"no answers", 11 * time.Second, &verdict{at: now, uncounted: []string{"za"}}, stateDown},
		{"k8gb ignored", 11 * time.Second, &verdict{at: now, vouched: []string{"a"}, uncounted: []string{"za", "zb"}}, statePartitioned},
		{"old verdict", 11 * time.Second, &verdict{at: now.Add(-time.Minute), vouched: []string{"a"}}, stateDown},
		{"at the ceiling", 50 * time.Second, &verdict{at: now, vouched: []string{"a"}}, statePartitioned},
		{"past the ceiling", 51 * time.Second, &verdict{at: now, vouched: []string{"a"}}, stateDown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPeer(g, "eu", []string{"127.0.0.1:9"})
			if tc.age > 0 {
				p.lastOK.Store(now.Add(-tc.age).UnixNano())
			}
			p.verdict.Store(tc.verdict)
			if got := p.silentState(now); got != tc.want {
				t.Errorf("silentState = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestWitnessSetup(t *testing.T) {
	for _, tc := range []struct {
		block   string
		ceiling time.Duration
		err     string
	}{
		{"", 5 * time.Minute, ""},
		{"split_brain_threshold 10s", 50 * time.Second, ""},
		{"witness {\n from 10.0.0.0/8 198.18.0.1\n ceiling 10m\n}", 10 * time.Minute, ""},
		{"witness { ceiling 90s }\nsplit_brain_threshold 2m", 0, "Testfile:3 - Error during parsing: witness ceiling 1m30s must be longer than split_brain_threshold 2m0s"},
		{"witness {\n frm 10.0.0.0/8\n}", 0, `Testfile:4 - Error during parsing: unknown property "frm" in witness`},
		{"witness {\n from 10.0.0.300\n}", 0, `Testfile:4 - Error during parsing: from "10.0.0.300": not a CIDR or an address`},
		{"witness maybe", 0, "Testfile:3 - Error during parsing: Wrong argument count"},
		{"witness off", 0, ""},
	} {
		c := caddy.NewTestController("dns", fmt.Sprintf("gslb %s {\ngeotag eu\n%s\n}", zone, tc.block))
		g, err := parse(c)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.block, err, tc.err)
			}
		case err != nil:
			t.Errorf("%q: %v", tc.block, err)
		case tc.block == "witness off":
			if !g.wit.off {
				t.Errorf("witness off: not off")
			}
		case g.wit.ceiling != tc.ceiling:
			t.Errorf("%q: ceiling %s, want %s", tc.block, g.wit.ceiling, tc.ceiling)
		}
	}
}
