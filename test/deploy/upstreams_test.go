package deploy

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/test/harness"
)

// upstream is one fake upstream DNS server address set: every A query in
// zone is answered with addr, so a test can tell which upstream a query
// reached.
type upstream struct {
	zone   string
	answer string   // the A record data every name in zone gets
	ips    []string // loopback addresses it listens on (port 53)
}

// startUpstreams runs one coredns process (stock plugins only) with a server
// block per upstream, each on its own loopback addresses, and returns when
// all of them answer.
func startUpstreams(t *testing.T, ups ...*upstream) {
	t.Helper()
	var cf strings.Builder
	for _, u := range ups {
		fmt.Fprintf(&cf, "%s:53 {\n    bind %s\n", u.zone, strings.Join(u.ips, " "))
		fmt.Fprintf(&cf, "    template IN A %s {\n        answer \"{{ .Name }} 60 IN A %s\"\n    }\n", u.zone, u.answer)
		// Health checks (". NS") and other types get an empty NOERROR.
		fmt.Fprintf(&cf, "    template ANY ANY %s {\n        rcode NOERROR\n    }\n}\n", u.zone)
	}
	srv := harness.StartCoreDNS(t, cf.String(), harness.WithDNSAddr(ups[0].ips[0]+":53"))
	for _, u := range ups {
		for _, ip := range u.ips {
			if err := waitDNS(srv.Process, ip+":53", 10*time.Second); err != nil {
				t.Fatalf("upstream %s on %s: %v\n%s", u.zone, ip, err, srv.Log())
			}
		}
	}
}
