package gslb

import (
	"fmt"
	"testing"

	"github.com/fleetdns/fleetdns/internal/testkit/mmdbtest"
	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

// continentOf are the networks of the test's MaxMind DB and their
// continent.code; geo map turns the codes into the clusters' tags.
var continentOf = []struct {
	network string
	code    string
	tag     string
	client  string // an ECS source inside the network
}{
	{"81.2.64.0/20", "EU", "eu", "81.2.69.0/24"},
	{"63.245.208.0/20", "NA", "us", "63.245.210.0/24"},
	{"1.0.16.0/20", "AS", "ap", "1.0.18.0/24"},
}

// continentNetworks are continentOf's networks for mmdbtest.
func continentNetworks() []mmdbtest.Network {
	var ns []mmdbtest.Network
	for _, c := range continentOf {
		ns = append(ns, mmdbtest.Network{CIDR: c.network, Continent: c.code})
	}
	return ns
}

// TestGeoFromMaxMindDB maps the ECS source through a MaxMind DB written by
// the test (continent.code, then geo map) in every cluster; the ECS scope is
// the prefix of the database's network.
func TestGeoFromMaxMindDB(t *testing.T) {
	f := newFleet(t)
	extra := "        geo mmdb geo.mmdb continent.code\n"
	for _, c := range continentOf {
		extra += fmt.Sprintf("        geo map %s %s\n", c.code, c.tag)
	}
	f.start(t, fleetOptions{gslbExtra: map[string]string{"": extra}, files: map[string]string{"geo.mmdb": string(mmdbtest.Continents(t, continentNetworks()...))}})

	for _, tag := range tags {
		addr := f.clusters[tag].addr
		for _, c := range continentOf {
			m, err := harness.Ask(addr, hostGeo, dns.TypeA, harness.ECS(c.client))
			if err != nil {
				t.Fatal(err)
			}
			if got := harness.Targets(m, dns.TypeA); !equal(got, f.union(c.tag)) {
				t.Errorf("from %s, ECS %s (%s): %v, want %s's %v", tag, c.client, c.code, got, c.tag, f.union(c.tag))
			}
			if ecs := replyECS(m); ecs == nil || ecs.SourceScope != 20 {
				t.Errorf("from %s, ECS %s: reply ECS %v, want scope /20 (the database's network)", tag, c.client, ecs)
			}
		}
		// Not in the database: every target.
		if got, err := ask(addr, hostGeo, dns.TypeA, harness.ECS("198.18.0.0/24")); err != nil || !equal(got, f.union(tags...)) {
			t.Errorf("from %s, ECS outside the database: %v (%v), want %v", tag, got, err, f.union(tags...))
		}
	}
}

// TestGeoFromGeoipPluginMetadata lets CoreDNS's own geoip plugin look the
// ECS source up in the same test-written database and put the continent in
// metadata; gslb maps that value (geo metadata + geo map) to a tag.
func TestGeoFromGeoipPluginMetadata(t *testing.T) {
	f := newFleet(t)
	extra := "        geo metadata geoip/continent/code\n"
	for _, c := range continentOf {
		extra += fmt.Sprintf("        geo map %s %s\n", c.code, c.tag)
	}
	f.start(t, fleetOptions{
		blockExtra: map[string]string{"": "    metadata\n    geoip geo.mmdb {\n        edns-subnet\n    }\n"},
		gslbExtra:  map[string]string{"": extra},
		files:      map[string]string{"geo.mmdb": string(mmdbtest.Continents(t, continentNetworks()...))},
	})

	for _, tag := range tags {
		addr := f.clusters[tag].addr
		for _, c := range continentOf {
			if got, err := ask(addr, hostGeo, dns.TypeA, harness.ECS(c.client)); err != nil || !equal(got, f.union(c.tag)) {
				t.Errorf("from %s, ECS %s (%s via geoip metadata): %v (%v), want %s's %v", tag, c.client, c.code, got, err, c.tag, f.union(c.tag))
			}
		}
		if got, err := ask(addr, hostGeo, dns.TypeA, harness.ECS("198.18.0.0/24")); err != nil || !equal(got, f.union(tags...)) {
			t.Errorf("from %s, ECS outside the database: %v (%v), want %v", tag, got, err, f.union(tags...))
		}
	}
}
