// Command coredns is CoreDNS with every stock plugin plus fleetdns's own, in
// the order that plugin.cfg at the repository root gives.
package main

//go:generate go run directives_generate.go

import (
	"flag"
	"fmt"
	"io"
	golog "log"
	"os"

	"github.com/coredns/coredns/core/dnsserver"
	_ "github.com/coredns/coredns/core/plugin" // every stock plugin
	"github.com/coredns/coredns/coremain"

	"github.com/fleetdns/fleetdns/internal/version" // coredns_fleetdns_build_info
	"github.com/fleetdns/fleetdns/plugin/k8scrd"
)

// lint is -lint DIR: check the manifests under DIR against the k8scrd
// blocks of -conf, print what would be served, and exit (plugin/k8scrd's README).
var (
	lint     = flag.String("lint", "", "Check the manifests under this folder against the k8scrd blocks of -conf, print what would and would not be served, and exit (0 all served, 1 something not, 2 a bad file or Corefile)")
	lintJSON = flag.Bool("json", false, "With -lint: print JSON Lines")
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
	if *lint != "" {
		conf := flag.Lookup("conf").Value.String()
		if conf == "" {
			conf = "Corefile"
		}
		// The lint's lines are its output; the plugins' log lines of the
		// same findings would only repeat them.
		golog.SetOutput(io.Discard)
		os.Exit(k8scrd.Lint(os.Stdout, *lint, conf, *lintJSON))
	}
	coremain.Run()
}
