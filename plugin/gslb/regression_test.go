package gslb

import (
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin/test"
	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestPeersFromNSWithoutBlockKeepsNextLine: the block after peers_from_ns is
// optional, and without it the next line is the gslb block's next property,
// not a property of peers_from_ns.
func TestPeersFromNSWithoutBlockKeepsNextLine(t *testing.T) {
	g, err := parse(caddy.NewTestController("dns", `gslb gslb.example.com {
		geotag eu
		peers_from_ns 127.0.0.10
		strategy failover
		primary eu us
	}`))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	if g.disc == nil || strings.Join(g.disc.servers, " ") != "127.0.0.10:53" {
		t.Errorf("peers_from_ns servers: %+v", g.disc)
	}
	if g.defaults.strategy != failover || strings.Join(g.defaults.primary, ",") != "eu,us" {
		t.Errorf("lines after peers_from_ns lost: strategy %s primary %v", g.defaults.strategy, g.defaults.primary)
	}

	// An empty block and a block on the same line still parse.
	if _, err := parse(caddy.NewTestController("dns", "gslb gslb.example.com {\ngeotag eu\npeers_from_ns 127.0.0.10 {\n}\nttl 5\n}")); err != nil {
		t.Errorf("empty block: %v", err)
	}
	if _, err := parse(caddy.NewTestController("dns", "gslb gslb.example.com {\ngeotag eu\npeers_from_ns 127.0.0.10 {\nbogus 1\n}\n}")); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("unknown property in the block: want an error naming it, got %v", err)
	}
}

// zoneOnlyPeer is a peer's DNS server that serves the GSLB zone and nothing
// else: NXDOMAIN with the SOA for every name inside the zone (no host is
// declared there), and, outside it, REFUSED as an authoritative-only
// CoreDNS block says, or no answer at all as k8gb's k8s_crd plugin does for
// a name outside its zones.
type zoneOnlyPeer struct {
	srv     *dns.Server
	addr    string
	outside atomic.Int64 // questions outside the zone
}

func startZoneOnlyPeer(t *testing.T, outsideRcode int) *zoneOnlyPeer {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &zoneOnlyPeer{addr: pc.LocalAddr().String()}
	started := make(chan struct{})
	p.srv = &dns.Server{PacketConn: pc, NotifyStartedFunc: func() { close(started) }, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		if !dns.IsSubDomain(zone, strings.ToLower(r.Question[0].Name)) {
			p.outside.Add(1)
			if outsideRcode < 0 {
				return // k8gb's gateway writes nothing
			}
			m.Rcode = outsideRcode
			w.WriteMsg(m)
			return
		}
		m.Authoritative = true
		m.Rcode = dns.RcodeNameError
		m.Ns = []dns.RR{test.SOA(zone + " 30 IN SOA ns1." + zone + " hostmaster." + zone + " 1 7200 1800 86400 30")}
		w.WriteMsg(m)
	})}
	go p.srv.ActivateAndServe()
	<-started
	t.Cleanup(func() { p.srv.Shutdown() })
	return p
}

// TestPeerServingOnlyTheZoneIsUp: with no host declared yet (a new GSLB
// zone), a peer that serves only the GSLB zone is judged up by the probe,
// and coredns_gslb_peer_state says so; the probe never asks a name outside
// the zone. Once up, the peer is still probed (every refresh), so when it
// stops answering it goes stale, then down.
func TestPeerServingOnlyTheZoneIsUp(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tag     string
		outside int
	}{
		{"authoritative only, REFUSED outside the zone", "zoneonly", dns.RcodeRefused},
		{"k8gb k8s_crd, silent outside the zone", "k8gbonly", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startZoneOnlyPeer(t, tc.outside)
			g, _ := newGSLB(t, fmt.Sprintf(`gslb %s {
				geotag eu
				peer %s %s
				timeout 200ms
				refresh 300ms
				split_brain_threshold 600ms
			}`, zone, tc.tag, p.addr), newFakeStore())
			waitReady(t, g)
			testkit.Eventually(t, 5*time.Second, "peer "+tc.tag+" up from the probe alone", func() bool { return stateOf(g, tc.tag) == stateUp })
			for _, s := range stateNames {
				want := 0.0
				if s == "up" {
					want = 1
				}
				if v := testutil.ToFloat64(peerState.WithLabelValues(zone, tc.tag, s)); v != want {
					t.Errorf("coredns_gslb_peer_state{peer=%q,state=%q} = %v, want %v", tc.tag, s, v, want)
				}
			}
			if n := p.outside.Load(); n != 0 {
				t.Errorf("the probe asked %d names outside the zone", n)
			}

			p.srv.Shutdown()
			testkit.Eventually(t, 5*time.Second, "peer "+tc.tag+" stale once it stops answering", func() bool { return stateOf(g, tc.tag) != stateUp })
			testkit.Eventually(t, 5*time.Second, "peer "+tc.tag+" down after split_brain_threshold", func() bool {
				return testutil.ToFloat64(peerState.WithLabelValues(zone, tc.tag, "down")) == 1
			})
		})
	}
}

// TestFreshAnswerIsNotFetchedAgain: a refresh cycle that found a host due,
// or a client query that found no answer cached, does not ask the peer
// again when the other path's query for the same host ended in between and
// cached a fresh answer (test/gslb's 50 concurrent misses then cost the
// peer 4 queries instead of 2).
func TestFreshAnswerIsNotFetchedAgain(t *testing.T) {
	g, us, _ := onePeer(t, "timeout 200ms\nrefresh 1h", app)
	waitReady(t, g)
	p := g.peers.Load().byTag["us"]
	testkit.Eventually(t, 5*time.Second, "app cached", func() bool { _, ok := p.cache.Load(app); return ok })
	before := us.queries.Load()
	e, err := p.fetchShared(app)
	if err != nil || len(e.a) != 1 || e.a[0].String() != "10.0.2.1" {
		t.Fatalf("fetchShared(%s) = %+v, %v, want the cached answer", app, e, err)
	}
	if n := us.queries.Load() - before; n != 0 {
		t.Errorf("a fresh cached answer cost the peer %d more queries", n)
	}
}
