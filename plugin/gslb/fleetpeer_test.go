package gslb

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"
	"github.com/fleetdns/fleetdns/internal/store"
	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/plugin/gslb/fleet"
	"github.com/fleetdns/fleetdns/plugin/gslb/fleet/fleettest"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// viewPeer is another fleetdns cluster: its Publisher on real sockets,
// counting what it is asked.
type viewPeer struct {
	pub       *fleet.Publisher
	addr      string
	queries   atomic.Int64 // every request
	perHost   atomic.Int64 // localtargets- queries
	soaChecks atomic.Int64
	dropSOA   atomic.Int64 // SOA queries still to drop unanswered
}

func startViewPeer(t testing.TB, keys *fleet.Keys, hosts ...fleet.Host) *viewPeer {
	t.Helper()
	p := &viewPeer{pub: fleet.NewPublisher(zone, keys, fleet.Limits{})}
	p.pub.Set(hosts)
	h := fleettest.Handler(p.pub)
	p.addr = fleettest.Serve(t, "127.0.0.1:0", dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		p.queries.Add(1)
		if len(r.Question) == 1 {
			q := r.Question[0]
			if strings.HasPrefix(strings.ToLower(q.Name), "localtargets-") {
				p.perHost.Add(1)
			}
			if q.Qtype == dns.TypeSOA && r.Opcode == dns.OpcodeQuery {
				p.soaChecks.Add(1)
				if p.dropSOA.Add(-1) >= 0 {
					return // lost: the checker times out
				}
			}
		}
		h.ServeDNS(w, r)
	}), keys.Secrets())
	return p
}

func fleetHost(name string, policy map[string]string, addrs ...string) fleet.Host {
	h := fleet.Host{Name: name, TTL: 30, Policy: policy}
	for _, a := range addrs {
		ip := netip.MustParseAddr(a)
		if ip.Is4() {
			h.A = append(h.A, ip)
		} else {
			h.AAAA = append(h.AAAA, ip)
		}
	}
	return h
}

// notifyFrom sends gslb a NOTIFY of the view from src, signed with keys
// when not nil, and returns the answer's rcode.
func notifyFrom(t *testing.T, g *GSLB, src string, keys *fleet.Keys) int {
	t.Helper()
	m := new(dns.Msg)
	m.SetNotify(fleet.Name(zone))
	keys.Sign(m)
	rec := dnstest.NewRecorder(&test.ResponseWriter{RemoteIP: src})
	if _, err := g.ServeDNS(context.Background(), rec, m); err != nil {
		t.Fatal(err)
	}
	if rec.Msg == nil {
		t.Fatal("no answer to the NOTIFY")
	}
	return rec.Msg.Rcode
}

// answeredChecks counts the fleet SOA checks of peer tag that were
// answered (the view changed or not); a check lost to a timeout is not.
func answeredChecks(tag string) float64 {
	return testutil.ToFloat64(fleetChecks.WithLabelValues(zone, tag, checkChanged)) +
		testutil.ToFloat64(fleetChecks.WithLabelValues(zone, tag, checkUnchanged))
}

func TestFleetPeerFollowedByViewNotPerHost(t *testing.T) {
	checks := answeredChecks("us")
	peer := startViewPeer(t, nil,
		fleetHost("www."+zone, nil, "198.18.1.1"),
		fleetHost("only-us."+zone, nil, "198.18.1.2"),
	)
	st := newFakeStore(host("www."+zone, "198.18.0.1"))
	g, _ := newGSLB(t, "gslb "+zone+" {\n geotag eu\n peer us "+peer.addr+"\n refresh 30s\n fleet\n}", st)
	waitReady(t, g)

	if got := addrs(ask(t, g, "www."+zone, dns.TypeA)); !slices.Equal(sorted(got), []string{"198.18.0.1", "198.18.1.1"}) {
		t.Errorf("www: got %v, want both clusters' targets", got)
	}
	// Declared only in us: answered here too, from its view.
	m := ask(t, g, "only-us."+zone, dns.TypeA)
	if got := addrs(m); m.Rcode != dns.RcodeSuccess || !slices.Equal(got, []string{"198.18.1.2"}) {
		t.Errorf("only-us: got %s %v, want us's target", dns.RcodeToString[m.Rcode], got)
	}
	if n := peer.perHost.Load(); n != 0 {
		t.Errorf("the peer serves a view, yet was asked %d localtargets- queries", n)
	}
	if n := answeredChecks("us") - checks; n != 1 {
		t.Errorf("SOA checks answered in the first refresh: %v, want 1", n)
	}

	// The peer's change, NOTIFYed from its address, is seen at once.
	peer.pub.Set([]fleet.Host{fleetHost("www."+zone, nil, "198.18.1.9")})
	if rc := notifyFrom(t, g, "127.0.0.1", nil); rc != dns.RcodeSuccess {
		t.Fatalf("NOTIFY from the peer's address: %s, want NOERROR", dns.RcodeToString[rc])
	}
	testkit.Eventually(t, 5*time.Second, "the NOTIFYed change answered", func() bool {
		got := addrs(ask(t, g, "www."+zone, dns.TypeA))
		return slices.Equal(sorted(got), []string{"198.18.0.1", "198.18.1.9"})
	})
	// only-us left us's view: no longer a host here.
	if m := ask(t, g, "only-us."+zone, dns.TypeA); m.Rcode != dns.RcodeNameError {
		t.Errorf("only-us after us withdrew it: %s, want NXDOMAIN from the next plugin", dns.RcodeToString[m.Rcode])
	}
}

func TestFleetNotifyFromNonPeerRefused(t *testing.T) {
	peer := startViewPeer(t, nil, fleetHost("www."+zone, nil, "198.18.1.1"))
	g, _ := newGSLB(t, "gslb "+zone+" {\n geotag eu\n peer us "+peer.addr+"\n refresh 30s\n fleet\n}", newFakeStore(host("www."+zone, "198.18.0.1")))
	waitReady(t, g)
	before := testutil.ToFloat64(notifiesReceived.WithLabelValues(zone, "refused"))
	checks := peer.soaChecks.Load()
	for range 50 {
		if rc := notifyFrom(t, g, "198.18.9.9", nil); rc != dns.RcodeRefused {
			t.Fatalf("NOTIFY from a non-peer: %s, want REFUSED", dns.RcodeToString[rc])
		}
	}
	if d := testutil.ToFloat64(notifiesReceived.WithLabelValues(zone, "refused")) - before; d != 50 {
		t.Errorf("refused NOTIFYs counted: %v, want 50", d)
	}
	time.Sleep(100 * time.Millisecond)
	if n := peer.soaChecks.Load() - checks; n != 0 {
		t.Errorf("a non-peer's NOTIFYs made %d checks of the peer", n)
	}
}

func TestFleetNotifyRateCapped(t *testing.T) {
	peer := startViewPeer(t, nil, fleetHost("www."+zone, nil, "198.18.1.1"))
	g, _ := newGSLB(t, "gslb "+zone+" {\n geotag eu\n peer us "+peer.addr+"\n refresh 30s\n fleet {\n notify_rate 5\n }\n}", newFakeStore(host("www."+zone, "198.18.0.1")))
	waitReady(t, g)
	checks := peer.soaChecks.Load()
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		notifyFrom(t, g, "127.0.0.1", nil)
		time.Sleep(2 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	// 5 a second, and the one remembered at the end.
	if n := peer.soaChecks.Load() - checks; n < 1 || n > 7 {
		t.Errorf("a second of NOTIFYs made %d checks, want at most notify_rate 5 (+1 pending, +1 at the edge)", n)
	}
}

func TestFleetKeyRequiredForNotify(t *testing.T) {
	text := fleettest.Key("fleet.")
	keys := fleettest.Keys(t, text)
	path := filepath.Join(t.TempDir(), "fleet.key")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	peer := startViewPeer(t, keys, fleetHost("www."+zone, nil, "198.18.1.1"))
	g, _ := newGSLB(t, "gslb "+zone+" {\n geotag eu\n peer us "+peer.addr+"\n refresh 30s\n fleet {\n key "+path+"\n }\n}", newFakeStore(host("www."+zone, "198.18.0.1")))
	waitReady(t, g)
	if got := addrs(ask(t, g, "www."+zone, dns.TypeA)); !slices.Equal(sorted(got), []string{"198.18.0.1", "198.18.1.1"}) {
		t.Fatalf("www over a signed view: got %v", got)
	}
	if rc := notifyFrom(t, g, "127.0.0.1", nil); rc != dns.RcodeRefused {
		t.Errorf("unsigned NOTIFY from the peer's address with a key set: %s, want REFUSED", dns.RcodeToString[rc])
	}
	other := fleettest.Keys(t, fleettest.Key("other."))
	if rc := notifyFrom(t, g, "127.0.0.1", other); rc != dns.RcodeRefused {
		t.Errorf("NOTIFY signed with another key: %s, want REFUSED", dns.RcodeToString[rc])
	}
	// Signed with the fleet's key: accepted from any address (NAT).
	if rc := notifyFrom(t, g, "198.18.7.7", keys); rc != dns.RcodeSuccess {
		t.Errorf("signed NOTIFY: %s, want NOERROR", dns.RcodeToString[rc])
	}
	// The view needs the key: a follower without it is refused.
	nokey := startViewPeer(t, keys, fleetHost("www."+zone, nil, "198.18.1.1"))
	f := fleet.NewFollower(zone, nokey.addr, nil, fleet.Limits{})
	if _, _, err := f.Check(context.Background()); err == nil {
		t.Error("an unsigned SOA check of a signed view succeeded")
	}
}

func TestFleetPolicyConflict(t *testing.T) {
	rr := map[string]string{propStrategy: "roundRobin"}
	fo := map[string]string{propStrategy: "failover", propPrimary: "us,ap"}
	us := startViewPeer(t, nil,
		fleetHost("both."+zone, rr, "198.18.1.1"),
		fleetHost("peers."+zone, fo, "198.18.1.2"),
	)
	ap := startViewPeer(t, nil,
		fleetHost("both."+zone, rr, "198.18.2.1"),
		fleetHost("peers."+zone, rr, "198.18.2.2"),
	)
	st := newFakeStore(withProps(host("both."+zone, "198.18.0.1"), propStrategy, "failover"))
	g, _ := newGSLB(t, "gslb "+zone+" {\n geotag eu\n peer us "+us.addr+"\n peer ap "+ap.addr+"\n refresh 30s\n fleet\n}", st)
	waitReady(t, g)

	// both: declared here as failover: this cluster's policy wins (eu first).
	if got := addrs(ask(t, g, "both."+zone, dns.TypeA)); !slices.Equal(got, []string{"198.18.0.1"}) {
		t.Errorf("both: got %v, want this cluster's failover answer", got)
	}
	// peers: only ap and us declare it; ap sorts first: roundRobin.
	if got := addrs(ask(t, g, "peers."+zone, dns.TypeA)); !slices.Equal(sorted(got), []string{"198.18.1.2", "198.18.2.2"}) {
		t.Errorf("peers: got %v, want ap's roundRobin over both", got)
	}
	if n := testutil.ToFloat64(policyConflicts.WithLabelValues(zone)); n != 2 {
		t.Errorf("fleet_policy_conflicts = %v, want 2", n)
	}
	m := ask(t, g, explainLabel+"peers."+zone, dns.TypeTXT, from("127.0.0.1"))
	if txt := strings.Join(m.Answer[0].(*dns.TXT).Txt, " "); !strings.Contains(txt, "policy conflict") || !strings.Contains(txt, "the declaration of ap") {
		t.Errorf("explain of peers does not say the conflict and the rule: %s", txt)
	}
}

func TestFleetPeerWithoutViewAskedPerHost(t *testing.T) {
	k8gb := startPeer(t, map[string][]string{"www." + zone: {"198.18.3.1"}})
	g, _ := newGSLB(t, "gslb "+zone+" {\n geotag eu\n peer k8gb "+k8gb.addr+"\n refresh 30s\n fleet\n}", newFakeStore(host("www."+zone, "198.18.0.1")))
	waitReady(t, g)
	if got := addrs(ask(t, g, "www."+zone, dns.TypeA)); !slices.Equal(sorted(got), []string{"198.18.0.1", "198.18.3.1"}) {
		t.Errorf("www with a k8gb peer: got %v", got)
	}
	if !g.peers.Load().byTag["k8gb"].noView.Load() {
		t.Error("a peer that serves no view is not marked as asked per host")
	}
}

func TestFleetPerHostQueriesSigned(t *testing.T) {
	text := fleettest.Key("fleet.")
	path := filepath.Join(t.TempDir(), "fleet.key")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	k8gb := startPeer(t, map[string][]string{"www." + zone: {"198.18.3.1"}})
	g, _ := newGSLB(t, "gslb "+zone+" {\n geotag eu\n peer k8gb "+k8gb.addr+"\n refresh 30s\n fleet {\n key "+path+"\n }\n}", newFakeStore(host("www."+zone, "198.18.0.1")))
	waitReady(t, g)
	if got := addrs(ask(t, g, "www."+zone, dns.TypeA)); !slices.Equal(sorted(got), []string{"198.18.0.1", "198.18.3.1"}) {
		t.Errorf("www with a k8gb peer and a fleet key: got %v", got)
	}
	if n, s := k8gb.queries.Load(), k8gb.signed.Load(); s == 0 || s != n {
		t.Errorf("%d of the %d queries to the peer were signed, want all", s, n)
	}
}

func TestFleetNameReserved(t *testing.T) {
	g, _ := newGSLB(t, "gslb "+zone+" {\n geotag eu\n}", newFakeStore(host("www."+zone, "198.18.0.1")))
	m := new(dns.Msg)
	m.SetQuestion("x."+fleet.Name(zone), dns.TypeTXT)
	rec := dnstest.NewRecorder(&test.ResponseWriter{})
	rc, _ := g.ServeDNS(context.Background(), rec, m)
	if rc != dns.RcodeRefused {
		t.Errorf("a name under _fleet without the fleet block: rcode %s, want REFUSED", dns.RcodeToString[rc])
	}
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// hostilePeer serves a real view and, on demand, lies about it: a serial
// behind the one served before, or a transfer with a name outside the
// view's zone.
type hostilePeer struct {
	*viewPeer
	mode atomic.Value // "", "backwards", "outside"
}

func startHostilePeer(t *testing.T, hosts ...fleet.Host) *hostilePeer {
	t.Helper()
	p := &hostilePeer{viewPeer: &viewPeer{pub: fleet.NewPublisher(zone, nil, fleet.Limits{})}}
	p.mode.Store("")
	p.pub.Set(hosts)
	h := fleettest.Handler(p.pub)
	p.addr = fleettest.Serve(t, "127.0.0.1:0", dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		p.queries.Add(1)
		mode := p.mode.Load().(string)
		if mode == "" || len(r.Question) != 1 {
			h.ServeDNS(w, r)
			return
		}
		serial := p.pub.View().Serial
		soa := &dns.SOA{Hdr: dns.RR_Header{Name: fleet.Name(zone), Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 5},
			Ns: zone, Mbox: "hostmaster." + fleet.Name(zone), Refresh: 30, Retry: 10, Expire: 86400, Minttl: 5}
		m := new(dns.Msg)
		m.SetReply(r)
		m.Authoritative = true
		switch {
		case mode == "backwards":
			soa.Serial = serial - 1000
			m.Answer = []dns.RR{soa}
		case r.Question[0].Qtype == dns.TypeSOA:
			soa.Serial = serial + 1000
			m.Answer = []dns.RR{soa}
		default: // outside: a whole transfer with a name outside _fleet.<zone>
			soa.Serial = serial + 1000
			out, _ := dns.NewRR("www.example.net. 30 IN A 198.18.66.6")
			m.Answer = []dns.RR{soa, out, soa}
		}
		w.WriteMsg(m)
	}), nil)
	return p
}

// TestFleetHostileViewKeepsLastGood: a view over the cap, a serial that
// moves backwards and a transfer with names outside the view are refused
// and counted; the last good view keeps answering, and the other peer is
// unaffected.
func TestFleetHostileViewKeepsLastGood(t *testing.T) {
	bad := startHostilePeer(t, fleetHost("www."+zone, nil, "198.18.1.1"))
	good := startViewPeer(t, nil, fleetHost("www."+zone, nil, "198.18.2.1"))
	g, _ := newGSLB(t, "gslb "+zone+" {\n geotag eu\n peer ap "+good.addr+"\n peer us "+bad.addr+"\n refresh 30s\n fleet {\n max_hosts 5\n }\n}", newFakeStore(host("www."+zone, "198.18.0.1")))
	waitReady(t, g)
	want := []string{"198.18.0.1", "198.18.1.1", "198.18.2.1"}
	if got := sorted(addrs(ask(t, g, "www."+zone, dns.TypeA))); !slices.Equal(got, want) {
		t.Fatalf("www: got %v, want %v", got, want)
	}

	count := func(result string) float64 {
		return testutil.ToFloat64(fleetChecks.WithLabelValues(zone, "us", result))
	}
	var big []fleet.Host
	for i := range 10 {
		big = append(big, fleetHost(fmt.Sprintf("h%d.%s", i, zone), nil, "198.18.1.9"))
	}
	for _, c := range []struct {
		result  string
		hostile func()
	}{
		{fleet.ReasonCap, func() { bad.pub.Set(append(big, fleetHost("www."+zone, nil, "198.18.1.9"))) }},
		{fleet.ReasonBackwards, func() { bad.mode.Store("backwards") }},
		{fleet.ReasonOutside, func() { bad.mode.Store("outside") }},
	} {
		before := count(c.result)
		c.hostile()
		if rc := notifyFrom(t, g, "127.0.0.1", nil); rc != dns.RcodeSuccess {
			t.Fatalf("%s: NOTIFY: %s", c.result, dns.RcodeToString[rc])
		}
		testkit.Eventually(t, 5*time.Second, c.result+" counted", func() bool { return count(c.result) > before })
		if got := sorted(addrs(ask(t, g, "www."+zone, dns.TypeA))); !slices.Equal(got, want) {
			t.Errorf("%s: www answered %v, want the last good view's %v", c.result, got, want)
		}
		if m := ask(t, g, "h1."+zone, dns.TypeA); len(m.Answer) != 0 {
			t.Errorf("%s: a host of the refused view is answered: %v", c.result, m.Answer)
		}
		// A serial behind the view held is an answer (a replica behind
		// the others): the peer is up, not failing.
		if st := g.peers.Load().byTag["us"].state(time.Now()); c.result == fleet.ReasonBackwards && st != stateUp {
			t.Errorf("a peer answering a serial behind its view is %s, want up", st)
		}
	}
	if st := g.peers.Load().byTag["ap"].state(time.Now()); st != stateUp {
		t.Errorf("the good peer is %s after the other's hostile views, want up", st)
	}
}

// verdictTargets plays localtargets: the healthy targets are set by the
// test, and a change is signalled as a health verdict.
type verdictTargets struct {
	down     atomic.Bool // every target fails its check
	verdicts store.Notifier
}

func (v *verdictTargets) Healthy(h *store.Host) (a, aaaa []netip.Addr) {
	if v.down.Load() {
		return nil, nil
	}
	return h.Ready()
}
func (v *verdictTargets) Prefix() string                       { return store.DefaultPrefix }
func (v *verdictTargets) Subscribe() (<-chan struct{}, func()) { return v.verdicts.Subscribe() }

// TestFleetViewFollowsHealthVerdicts: a health verdict that changes the
// healthy targets (no store change) changes the published view at once.
func TestFleetViewFollowsHealthVerdicts(t *testing.T) {
	c := caddy.NewTestController("dns", "gslb "+zone+" {\n geotag eu\n fleet {\n notify_delay 10ms\n }\n}")
	g, err := parse(c)
	if err != nil {
		t.Fatal(err)
	}
	g.Next = &next{}
	g.store = newFakeStore(host("www."+zone, "198.18.0.1"))
	vt := &verdictTargets{}
	g.local = vt
	g.start()
	t.Cleanup(g.stop)

	targetsOf := func() []netip.Addr {
		v := g.pub.View()
		if v == nil || len(v.Hosts) != 1 {
			return nil
		}
		return v.Hosts[0].A
	}
	testkit.Eventually(t, 2*time.Second, "the view holds www's target", func() bool { return len(targetsOf()) == 1 })
	vt.down.Store(true)
	vt.verdicts.Publish()
	testkit.Eventually(t, time.Second, "the view without the unhealthy target", func() bool {
		v := g.pub.View()
		return v != nil && len(v.Hosts) == 1 && len(v.Hosts[0].A) == 0
	})
}

// TestFleetKeyStockPeerWithEmptyAnswersAskedPerHost: with a fleet key, a
// stock server that answers every other name with an empty, unsigned
// NOERROR (a template zone) serves no view: it is asked per host, not
// refused as badly signed.
func TestFleetKeyStockPeerWithEmptyAnswersAskedPerHost(t *testing.T) {
	text := fleettest.Key("fleet.")
	path := filepath.Join(t.TempDir(), "fleet.key")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := fleettest.Serve(t, "127.0.0.1:0", dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		q := r.Question[0]
		if q.Qtype == dns.TypeA && strings.HasPrefix(strings.ToLower(q.Name), "localtargets-") {
			rr, _ := dns.NewRR(q.Name + " 30 IN A 198.18.3.1")
			m.Answer = []dns.RR{rr}
		}
		w.WriteMsg(m)
	}), nil)
	g, _ := newGSLB(t, "gslb "+zone+" {\n geotag eu\n peer stock "+addr+"\n refresh 30s\n fleet {\n key "+path+"\n }\n}", newFakeStore(host("www."+zone, "198.18.0.1")))
	waitReady(t, g)
	if got := addrs(ask(t, g, "www."+zone, dns.TypeA)); !slices.Equal(sorted(got), []string{"198.18.0.1", "198.18.3.1"}) {
		t.Errorf("www with a stock peer and a fleet key: got %v, want the peer's target too", got)
	}
	if !g.peers.Load().byTag["stock"].noView.Load() {
		t.Error("the stock peer is not asked per host")
	}
}

// TestFleetSeriesOfGonePeerDeleted: a discovered peer that leaves takes its
// fleet series, and the hosts only it declared, with it.
func TestFleetSeriesOfGonePeerDeleted(t *testing.T) {
	peer := startViewPeer(t, nil, fleetHost("only-us."+zone, nil, "198.18.1.2"))
	g, _ := newGSLB(t, "gslb "+zone+" {\n geotag eu\n refresh 30s\n fleet\n}", newFakeStore(host("www."+zone, "198.18.0.1")))
	g.setPeers(map[string][]string{"gone": {peer.addr}})
	// At least the serial, the hosts and one checks series; more checks
	// series when a first check failed under load (its own result label).
	testkit.Eventually(t, 10*time.Second, "the peer's view held and counted", func() bool {
		return len(addrs(ask(t, g, "only-us."+zone, dns.TypeA))) == 1 && seriesOf("gone") >= 3
	})
	g.setPeers(nil)
	if n := seriesOf("gone"); n != 0 {
		t.Errorf("%d fleet series of the gone peer left", n)
	}
	if m := ask(t, g, "only-us."+zone, dns.TypeA); m.Rcode != dns.RcodeNameError {
		t.Errorf("the host only the gone peer declared: %s, want NXDOMAIN", dns.RcodeToString[m.Rcode])
	}
}

// TestFleetFailedCheckRetriedAfterBackoff: a fleet SOA check that times out
// (a lost packet, a loaded peer) is asked again after the backoff, as the
// README says of a failing peer, not a whole refresh later: the peer's
// view is followed within seconds though refresh is 30s.
func TestFleetFailedCheckRetriedAfterBackoff(t *testing.T) {
	peer := startViewPeer(t, nil, fleetHost("only-us."+zone, nil, "198.18.1.2"))
	peer.dropSOA.Store(1)
	g, _ := newGSLB(t, "gslb "+zone+" {\n geotag eu\n peer us "+peer.addr+"\n refresh 30s\n fleet\n}", newFakeStore(host("www."+zone, "198.18.0.1")))
	testkit.Eventually(t, 10*time.Second, "the peer's view followed after a lost check", func() bool {
		return len(addrs(ask(t, g, "only-us."+zone, dns.TypeA))) == 1
	})
	if n := peer.soaChecks.Load(); n < 2 {
		t.Errorf("%d SOA checks, want the lost one and its retry", n)
	}
}

// seriesOf counts the fleet series (checks, serial, hosts) of peer tag.
func seriesOf(tag string) int {
	n := 0
	for _, c := range []prometheus.Collector{fleetChecks, fleetPeerSerial, fleetPeerHosts} {
		ch := make(chan prometheus.Metric, 100)
		go func() { c.Collect(ch); close(ch) }()
		seen := false
		for m := range ch {
			var pb dto.Metric
			m.Write(&pb)
			for _, l := range pb.GetLabel() {
				if l.GetName() == "peer" && l.GetValue() == tag {
					seen = true
				}
			}
		}
		if seen {
			n++
		}
	}
	return n
}

// TestFleetPeerHostsAreGSLBHostsOnly: a peer's view cannot make this
// cluster answer a name server's name or a localtargets- name.
func TestFleetPeerHostsAreGSLBHostsOnly(t *testing.T) {
	peer := startViewPeer(t, nil,
		fleetHost("gslb-ns-xx."+zone, nil, "198.18.1.3"),
		fleetHost("localtargets-www."+zone, nil, "198.18.1.4"),
		fleetHost("ok."+zone, nil, "198.18.1.5"),
	)
	g, _ := newGSLB(t, "gslb "+zone+" {\n geotag eu\n peer us "+peer.addr+"\n refresh 30s\n fleet\n}", newFakeStore(host("www."+zone, "198.18.0.1")))
	waitReady(t, g)
	if got := addrs(ask(t, g, "ok."+zone, dns.TypeA)); !slices.Equal(got, []string{"198.18.1.5"}) {
		t.Fatalf("ok: got %v", got)
	}
	for _, name := range []string{"gslb-ns-xx." + zone, "localtargets-www." + zone} {
		if m := ask(t, g, name, dns.TypeA); len(m.Answer) != 0 {
			t.Errorf("%s from a peer's view answered: %v", name, m.Answer)
		}
	}
}

// TestFleetAlsoNotify: a stock secondary named in also_notify is sent a
// NOTIFY of the view when its serial moves, though it is no peer (and there
// are none); bad addresses and too many are parse errors.
func TestFleetAlsoNotify(t *testing.T) {
	got := make(chan *dns.Msg, 16)
	secondary := fleettest.Serve(t, "127.0.0.1:0", dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		if r.Opcode == dns.OpcodeNotify {
			select {
			case got <- r:
			default:
			}
		}
		m := new(dns.Msg)
		m.SetReply(r)
		w.WriteMsg(m)
	}), nil)
	st := newFakeStore(host("www."+zone, "198.18.0.1"))
	g, _ := newGSLB(t, "gslb "+zone+" {\n geotag eu\n fleet {\n also_notify "+secondary+"\n }\n}", st)
	waitReady(t, g)
	select {
	case m := <-got:
		if len(m.Question) != 1 || m.Question[0].Name != fleet.Name(zone) || m.Question[0].Qtype != dns.TypeSOA {
			t.Errorf("NOTIFY to the also_notify address: %v, want one of %s SOA", m.Question, fleet.Name(zone))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no NOTIFY of the first view to the also_notify address within 5s")
	}

	for _, bad := range []string{
		"also_notify",
		"also_notify knot.example.org",
		"also_notify " + strings.Repeat("127.0.0.1 ", maxAlsoNotify+1),
	} {
		c := caddy.NewTestController("dns", "gslb "+zone+" {\n geotag eu\n fleet {\n "+bad+"\n }\n}")
		if _, err := parse(c); err == nil || !strings.Contains(err.Error(), "Line 4") && !strings.Contains(err.Error(), ":4") {
			t.Errorf("fleet { %s }: error %v, want one naming line 4", strings.TrimSpace(bad[:min(len(bad), 40)]), err)
		}
	}
}
