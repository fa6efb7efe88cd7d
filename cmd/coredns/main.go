// Command coredns is CoreDNS with every stock plugin plus fleetdns's own, in
// the order that plugin.cfg at the repository root gives.
package main

//go:generate go run directives_generate.go

import (
	"flag"
	"fmt"

	"github.com/coredns/coredns/core/dnsserver"
	_ "github.com/coredns/coredns/core/plugin" // every stock plugin
	"github.com/coredns/coredns/coremain"

	"github.com/fleetdns/fleetdns/internal/version" // coredns_fleetdns_build_info
)

func init() {
	// The stock list knows nothing of our plugins; ours is generated from
	// plugin.cfg (zdirectives.go) and a test keeps the two from drifting.
	dnsserver.Directives = directives
}

func main() {
	// coremain defines -version and prints CoreDNS's lines, then exits:
	// fleetdns's go first. Parsing twice is harmless (coremain.Run parses
	// the same flag set again); a bad flag exits here with the same usage.
	flag.Parse()
	if f := flag.Lookup("version"); f != nil && f.Value.String() == "true" {
		fmt.Print(version.String())
	}
	coremain.Run()
}
