package gslb

import (
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

// TestLocalTargetsLargeAnswer serves a host with 100 A targets from one
// cluster: a peer asking localtargets- over UDP without EDNS gets TC, and
// the same question over TCP gets all 100, as real peers retry.
func TestLocalTargetsLargeAnswer(t *testing.T) {
	harness.RequirePlugins(t, "k8scrd", "localtargets")
	ip := harness.NewIP(t)
	dir := t.TempDir()
	var targets []string
	for i := range 100 {
		targets = append(targets, fmt.Sprintf("10.70.0.%d", i+1))
	}
	testkit.WriteFile(t, dir, "big.yaml", testkit.DNSEndpoint("apps", "big", nil,
		testkit.Endpoint{DNSName: "big." + zone, RecordType: "A", TTL: 7, Targets: targets}))
	srv := harness.StartCoreDNS(t, fmt.Sprintf(`%s:53 {
    bind %s
    localtargets
    k8scrd {
        directory %s
    }
}
`, zone, ip, dir), harness.WithProbe("big."+zone, dns.TypeA))

	m := harness.Exchange(t, srv.Addr, "localtargets-big."+zone, dns.TypeA)
	if !m.Truncated || len(m.Answer) >= 100 {
		t.Errorf("over UDP without EDNS: TC=%v with %d answers, want TC and fewer than 100", m.Truncated, len(m.Answer))
	}
	m = harness.Exchange(t, srv.Addr, "localtargets-big."+zone, dns.TypeA, harness.TCP)
	if got := harness.Targets(m, dns.TypeA); m.Truncated || len(got) != 100 {
		t.Errorf("over TCP: TC=%v with %d answers, want all 100", m.Truncated, len(got))
	}
	// dig retries over TCP on TC, as a resolver does.
	if got := harness.DigShort(t, srv.Addr, "localtargets-big."+zone, "A", "+noedns"); len(got) != 100 {
		t.Errorf("dig +noedns: %d targets, want 100 after its TCP retry", len(got))
	}
}

// TestLocalTargetsReadyAfterFirstChecks: with health checks, the `ready`
// endpoint answers 200 only once every target has had its first check; a
// target whose check hangs holds readiness for its timeout.
func TestLocalTargetsReadyAfterFirstChecks(t *testing.T) {
	harness.RequirePlugins(t, "k8scrd", "localtargets")
	ip, target := harness.NewIP(t), harness.NewIP(t)
	// The target's HTTP service accepts and never answers.
	hang := make(chan struct{})
	hs := &http.Server{Addr: target + ":80", Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-hang })}
	l, err := net.Listen("tcp", hs.Addr)
	if err != nil {
		t.Fatal(err)
	}
	go hs.Serve(l)
	t.Cleanup(func() { close(hang); hs.Close() })

	dir := t.TempDir()
	testkit.WriteFile(t, dir, "app.yaml", testkit.DNSEndpoint("apps", "app", nil,
		testkit.Endpoint{DNSName: "app." + zone, RecordType: "A", TTL: 7, Targets: []string{target}}))
	readyAddr := harness.HostPort(t, ip)
	start := time.Now()
	srv := harness.StartCoreDNS(t, fmt.Sprintf(`%s:53 {
    bind %s
    ready %s
    localtargets {
        healthcheck http 80 /healthz app.%s {
            allow 127.0.0.0/8
            interval 5s
            timeout 2s
        }
    }
    k8scrd {
        directory %s
    }
}
`, zone, ip, readyAddr, zone, dir))

	status := func() int {
		resp, err := (&http.Client{Timeout: time.Second}).Get("http://" + readyAddr + "/ready")
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := status(); s == http.StatusOK && time.Since(start) < 1500*time.Millisecond {
		t.Errorf("ready after %v, before the first check (timeout 2s) came back", time.Since(start))
	}
	testkit.Eventually(t, 5*time.Second, "/ready once the store synced", func() (bool, string) {
		s := status()
		return s == http.StatusOK, fmt.Sprintf("/ready = %d", s)
	})
	t.Logf("ready %v after start", time.Since(start).Round(10*time.Millisecond))
	// The target never passed: not served.
	m := harness.Exchange(t, srv.Addr, "localtargets-app."+zone, dns.TypeA)
	if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 0 {
		t.Errorf("localtargets-app with its only target failing: %s %v, want NODATA", dns.RcodeToString[m.Rcode], m.Answer)
	}
}
