package gslb

import (
	"strings"
	"testing"

	"github.com/coredns/caddy"
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
