// Command coredns is CoreDNS with every stock plugin plus fleetdns's own, in
// the order that plugin.cfg at the repository root gives.
package main

//go:generate go run directives_generate.go

import (
	"github.com/coredns/coredns/core/dnsserver"
	_ "github.com/coredns/coredns/core/plugin" // every stock plugin
	"github.com/coredns/coredns/coremain"
)

func init() {
	// The stock list knows nothing of our plugins; ours is generated from
	// plugin.cfg (zdirectives.go) and a test keeps the two from drifting.
	dnsserver.Directives = directives
}

func main() {
	coremain.Run()
}
