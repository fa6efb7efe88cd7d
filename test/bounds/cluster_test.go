package bounds_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

const (
	zone   = "gslb.bounds.test"
	parent = "bounds.test"
	host   = "www." + zone
)

// cluster is one coredns process serving the GSLB zone as the shipped
// stanza does (localtargets, gslb, k8scrd on a manifest folder), with
// prometheus and pprof on their own port.
type cluster struct {
	*harness.CoreDNS
	ip      string
	dir     string // k8scrd's directory
	metrics string // host:port of prometheus
	pprof   string // host:port of pprof
}

// startCluster runs a cluster with geo tag eu; gslbLines go inside its
// gslb block (peers, peers_from_ns, timeouts). manifest is k8scrd's data.
func startCluster(t *testing.T, gslbLines, manifest string, opts ...harness.Option) *cluster {
	t.Helper()
	c := &cluster{ip: harness.NewIP(t), dir: t.TempDir()}
	c.metrics = harness.HostPort(t, c.ip)
	c.pprof = harness.HostPort(t, c.ip)
	testkit.WriteFile(t, c.dir, "hosts.yaml", manifest)
	opts = append([]harness.Option{harness.WithStartTimeout(60 * time.Second)}, opts...)
	c.CoreDNS = harness.StartCoreDNS(t, fmt.Sprintf(`%s:53 {
    bind %s
    prometheus %s
    pprof %s
    localtargets %s
    gslb %s {
        geotag eu
%s
    }
    k8scrd %s {
        directory %s
    }
    errors
}
`, zone, c.ip, c.metrics, c.pprof, zone, zone, gslbLines, zone, c.dir), opts...)
	return c
}

// answer asks addr for name over UDP at EDNS 4096 and returns the message.
func answer(t testing.TB, addr, name string, qtype uint16) *dns.Msg {
	t.Helper()
	m, err := harness.Ask(addr, name, qtype, harness.EDNS(4096), harness.Attempts(2), harness.Timeout(2*time.Second))
	if err != nil {
		t.Fatalf("%s %s at %s: %v", name, dns.TypeToString[qtype], addr, err)
	}
	return m
}

// explain returns the explain TXT of h (asked from loopback, in the ACL).
func explain(t testing.TB, addr, h string) string {
	t.Helper()
	m := answer(t, addr, "_gslb-explain."+h, dns.TypeTXT)
	var out []string
	for _, rr := range m.Answer {
		if txt, ok := rr.(*dns.TXT); ok {
			out = append(out, strings.Join(txt.Txt, ""))
		}
	}
	return strings.Join(out, "\n")
}
