// Package localtargets runs the built coredns with localtargets' health
// checks over a folder of DNSEndpoint manifests.
package localtargets

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

// manifests writes n loopback targets (127.1.0.0 on, ten per host) into
// files of 1,000 targets.
func manifests(t *testing.T, n int) string {
	dir := t.TempDir()
	for f := 0; f*1000 < n; f++ {
		var eps []testkit.Endpoint
		for h := range 100 {
			var ts []string
			for j := range 10 {
				i := f*1000 + h*10 + j
				ts = append(ts, netip.AddrFrom4([4]byte{127, 1 + byte(i>>16), byte(i >> 8), byte(i)}).String())
			}
			eps = append(eps, testkit.EP(fmt.Sprintf("h%d-%d.example.org", f, h), "A", 30, ts...))
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d.yaml", f)), []byte(testkit.DNSEndpoint("lt", fmt.Sprintf("f%d", f), nil, eps...)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestChecksAtScale: 6,000 and 60,000 targets in the store, each checked
// (nothing listens: refused at once). Goroutines stay flat and the
// anonymous RSS under 44 MiB (what was 100 MiB of VmRSS less the binary's
// own pages); the figures are logged for RELIABILITY.md.
func TestChecksAtScale(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	for _, n := range []int{6000, 60000} {
		for _, mode := range []string{"none", "default-caps", "all"} {
			checks := mode != "none"
			t.Run(fmt.Sprintf("%d/%s", n, mode), func(t *testing.T) {
				dir := manifests(t, n)
				ip := harness.NewIP(t)
				metrics := harness.HostPort(t, ip)
				hc := ""
				if checks {
					hc = "healthcheck tcp 9 {\n            interval 1m\n            allow 127.0.0.0/8\n        }"
				}
				want := n
				if mode == "default-caps" {
					want = min(n, 1024) // max_per_zone's default
				} else if mode == "all" {
					hc = strings.Replace(hc, "}", "    max_per_zone 100000\n        }", 1)
				}
				srv := harness.StartCoreDNS(t, fmt.Sprintf(`example.org:53 {
    bind %s
    prometheus %s
    localtargets {
        %s
    }
    k8scrd {
        directory %s
    }
}
`, ip, metrics, hc, dir), harness.WithProbe("h0-0.example.org", dns.TypeA), harness.WithStartTimeout(2*time.Minute))
				url := "http://" + metrics + "/metrics"
				start := time.Now()
				peak := 0.0
				if checks {
					testkit.Eventually(t, 3*time.Minute, "every target checked once", func() (bool, string) {
						peak = max(peak, harness.Scrape(t, url).Sum("go_goroutines"))
						done := harness.Scrape(t, url).Sum("coredns_localtargets_health_checks_total", "result", "fail")
						return done >= float64(want), fmt.Sprintf("%v of %d checked", done, want)
					})
				}
				took := time.Since(start)
				peak = max(peak, harness.Scrape(t, url).Sum("go_goroutines"))
				rss, err := srv.RSS()
				if err != nil {
					t.Fatal(err)
				}
				anon, err := srv.AnonRSS()
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%d targets, checks %s: goroutines peak %v, RSS %.0f MiB (anonymous %.0f MiB), first round %s", n, mode, peak, float64(rss)/(1<<20), float64(anon)/(1<<20), took.Round(100*time.Millisecond))
				// Every one of 60,000 targets checked (the cap lifted) costs
				// about 1.5 KiB each: measured, not held to the goal.
				// The bound is on anonymous memory: the binary's resident
				// pages (about 56 MiB) vary with the page cache, and took
				// one CI run over the 100 MiB this bound was in VmRSS.
				if anon > 44<<20 && mode != "all" {
					t.Errorf("anonymous RSS %.0f MiB with %d targets, want under 44 MiB", float64(anon)/(1<<20), n)
				}
				if peak > 60 {
					t.Errorf("%v goroutines with %d targets: not flat", peak, n)
				}
			})
		}
	}
}
