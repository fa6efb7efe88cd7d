package gslb

import (
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/coredns/caddy"
	"github.com/miekg/dns"
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

// TestProbeAsksInsideTheZone: with no host declared yet, a peer that serves
// only the GSLB zone (and refuses everything else, as an authoritative-only
// server does) is judged up by the probe.
func TestProbeAsksInsideTheZone(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var outside atomic.Int64
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		if dns.IsSubDomain(zone, strings.ToLower(r.Question[0].Name)) {
			m.Rcode = dns.RcodeNameError
		} else {
			outside.Add(1)
			m.Rcode = dns.RcodeRefused
		}
		w.WriteMsg(m)
	})}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go srv.ActivateAndServe()
	<-started
	t.Cleanup(func() { srv.Shutdown() })

	g, _ := newGSLB(t, fmt.Sprintf(`gslb %s {
		geotag eu
		peer us %s
		timeout 200ms
		refresh 300ms
	}`, zone, pc.LocalAddr()), newFakeStore())
	eventually(t, "peer us up from the probe alone", func() bool { return stateOf(g, "us") == stateUp })
	if n := outside.Load(); n != 0 {
		t.Errorf("probe asked %d names outside the zone", n)
	}
}
