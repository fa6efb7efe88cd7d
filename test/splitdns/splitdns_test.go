// Package splitdns tests the splitdns plugin end to end: the built coredns
// binary routing to real upstream processes (unbound and coredns with stock
// plugins) over real sockets, a DNS over TLS upstream, forwarding loops, the
// loopback sidecar in a network namespace queried by getent, and a Corefile
// reload under load.
package splitdns

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

// The answers each upstream gives, so that a test can tell who answered.
const (
	acmeAnswer    = "10.0.1.1" // acme.internal: coredns template, any name
	acme2Answer   = "10.0.1.2" // acme.internal: a second coredns template (reload test)
	svcApex       = "10.0.2.1" // svc.acme.internal: coredns file, the apex
	svcDB         = "10.0.2.2" // db.svc.acme.internal
	publicWWW     = "192.0.2.80"
	publicTricky  = "192.0.2.81" // svc.acme.internal.example.net, from the "public" upstream
	bigTXTRecords = 30
)

const svcZone = `$ORIGIN svc.acme.internal.
@   300 IN SOA ns hostmaster 1 7200 3600 1209600 300
@   300 IN NS  ns
@   300 IN A   ` + svcApex + `
ns  300 IN A   10.0.2.53
db  300 IN A   ` + svcDB + `
`

// world is the set of upstreams most tests route to.
type world struct {
	acme, acme2, svc, public string // ip:53 of each upstream
}

// startWorld starts a coredns process serving acme.internal (two
// variants) and svc.acme.internal, each on its own loopback address, and an
// unbound standing in for the internet.
func startWorld(t *testing.T) world {
	t.Helper()
	w := world{
		acme:  harness.NewAddr(t),
		acme2: harness.NewAddr(t),
		svc:   harness.NewAddr(t),
	}
	ip := func(a string) string { return strings.TrimSuffix(a, ":53") }
	harness.StartCoreDNS(t, fmt.Sprintf(`acme.internal:53 {
    bind %s
    template IN A {
        answer "{{ .Name }} 60 IN A %s"
    }
}
acme.internal:53 {
    bind %s
    template IN A {
        answer "{{ .Name }} 60 IN A %s"
    }
}
svc.acme.internal:53 {
    bind %s
    file db.svc
}
`, ip(w.acme), acmeAnswer, ip(w.acme2), acme2Answer, ip(w.svc)),
		harness.WithFile("db.svc", svcZone), harness.WithDNSAddr(w.svc))
	w.public = startUnbound(t, harness.NewIP(t))
	return w
}

// unboundConfig writes an unbound configuration for ip:53 into a temp dir:
// unbound in the foreground, every name local data (local-zone "." static),
// so it never asks the internet; answers larger than 512 bytes over UDP are
// truncated.
func unboundConfig(t *testing.T, ip string) (dir, conf string) {
	t.Helper()
	dir = t.TempDir()
	var c strings.Builder
	fmt.Fprintf(&c, `server:
  interface: %s
  port: 53
  do-daemonize: no
  chroot: ""
  username: ""
  directory: "%s"
  pidfile: ""
  use-syslog: no
  logfile: ""
  verbosity: 1
  do-ip6: no
  access-control: 0.0.0.0/0 allow
  module-config: "iterator"
  max-udp-size: 512
  local-zone: "." static
  local-data: "www.example.com. 300 IN A %s"
  local-data: "svc.acme.internal.example.net. 300 IN A %s"
`, ip, dir, publicWWW, publicTricky)
	for i := range bigTXTRecords {
		fmt.Fprintf(&c, "  local-data: \"big.example.com. 300 IN TXT \\\"%s-%02d\\\"\"\n", strings.Repeat("x", 60), i)
	}
	c.WriteString("remote-control:\n  control-enable: no\n")
	conf = filepath.Join(dir, "unbound.conf")
	if err := os.WriteFile(conf, []byte(c.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, conf
}

// startUnbound runs unbound on ip:53 (see unboundConfig) and waits until it answers.
func startUnbound(t *testing.T, ip string) string {
	t.Helper()
	bin := harness.LookPath(t, "unbound")
	dir, conf := unboundConfig(t, ip)
	p := harness.StartProcess(t, "unbound", bin, []string{"-d", "-c", conf}, dir)
	addr := ip + ":53"
	testkit.Eventually(t, 10*time.Second, "unbound answering", func() (bool, string) {
		if !p.Running() {
			t.Fatalf("unbound exited: %v\n%s", p.ExitErr(), p.Log())
		}
		m, err := harness.Ask(addr, "www.example.com.", dns.TypeA, harness.Timeout(300*time.Millisecond))
		if err != nil {
			return false, err.Error()
		}
		return len(m.Answer) == 1, m.String()
	})
	return addr
}

// splitdns starts coredns with a splitdns block (body inside splitdns { })
// on a fresh address, with prometheus on port 9153 of the same address.
func startSplitDNS(t *testing.T, body string, opts ...harness.Option) (*harness.CoreDNS, string) {
	t.Helper()
	ip := harness.NewIP(t)
	srv := harness.StartCoreDNS(t, fmt.Sprintf(`.:53 {
    bind %s
    prometheus %s:9153
    splitdns {
%s
    }
}
`, ip, ip, body), opts...)
	return srv, "http://" + ip + ":9153/metrics"
}

// answerA asks addr for name's A record and returns the first address, or
// the rcode when there is none.
func answerA(t *testing.T, addr, name string, opts ...harness.QueryOption) string {
	t.Helper()
	m := harness.Exchange(t, addr, name, dns.TypeA, opts...)
	if a := harness.Targets(m, dns.TypeA); len(a) > 0 {
		return a[0]
	}
	return dns.RcodeToString[m.Rcode]
}

func TestRoutesByLongestZoneOnLabelBoundaries(t *testing.T) {
	w := startWorld(t)
	srv, _ := startSplitDNS(t, fmt.Sprintf(`        route acme.internal %s
        route svc.acme.internal %s
        default %s`, w.acme, w.svc, w.public))

	tests := []struct{ name, want, why string }{
		{"db.svc.acme.internal.", svcDB, "longest suffix"},
		{"svc.acme.internal.", svcApex, "the apex belongs to its zone"},
		{"DB.Svc.ACME.internal.", svcDB, "case-insensitive"},
		{"xsvc.acme.internal.", acmeAnswer, "xsvc is not below svc: label boundary"},
		{"deep.down.acme.internal.", acmeAnswer, "the shorter zone"},
		{"acme.internal.", acmeAnswer, "apex of the shorter zone"},
		{"svc.acme.internal.example.net.", publicTricky, "a zone as a prefix is not a match: default"},
		{"www.example.com.", publicWWW, "default"},
		{"nothing.example.org.", "NXDOMAIN", "default, the upstream's own NXDOMAIN"},
	}
	for _, tc := range tests {
		if got := answerA(t, srv.Addr, tc.name); got != tc.want {
			t.Errorf("%s (%s): got %s, want %s", tc.name, tc.why, got, tc.want)
		}
	}
	// The question's case comes back as asked.
	m := harness.Exchange(t, srv.Addr, "DB.Svc.ACME.internal.", dns.TypeA)
	if m.Question[0].Name != "DB.Svc.ACME.internal." {
		t.Errorf("question case not preserved: %s", m.Question[0].Name)
	}
	// And through a real client.
	if got := harness.DigShort(t, srv.Addr, "db.svc.acme.internal", "A"); len(got) != 1 || got[0] != svcDB {
		t.Errorf("dig: %v, want %s", got, svcDB)
	}
}

func TestResolvConfIsTheDefaultRoute(t *testing.T) {
	w := startWorld(t)
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	os.WriteFile(resolv, []byte("nameserver "+strings.TrimSuffix(w.public, ":53")+"\noptions ndots:5\nsearch cluster.local\n"), 0o644)
	srv, _ := startSplitDNS(t, fmt.Sprintf(`        route acme.internal %s
        resolv %s`, w.acme, resolv))
	if got := answerA(t, srv.Addr, "www.example.com."); got != publicWWW {
		t.Errorf("www.example.com via resolv.conf: %s, want %s", got, publicWWW)
	}
	if got := answerA(t, srv.Addr, "db.acme.internal."); got != acmeAnswer {
		t.Errorf("db.acme.internal: %s, want %s", got, acmeAnswer)
	}
}

func TestKubeDNSFilesAndTheirChangeAtRunTime(t *testing.T) {
	w := startWorld(t)
	dir := t.TempDir()
	// As kubelet updates a ConfigMap volume: write aside, rename into place.
	write := func(name, content string) { testkit.WriteFile(t, dir, name, content) }
	write("stubDomains", fmt.Sprintf(`{"acme.internal": [%q]}`, w.acme))
	write("upstreamNameservers", fmt.Sprintf(`[%q]`, strings.TrimSuffix(w.public, ":53")))
	srv, metrics := startSplitDNS(t, "        kubedns "+dir)

	if got := answerA(t, srv.Addr, "svc.acme.internal."); got != acmeAnswer {
		t.Errorf("stubDomains acme.internal: %s, want %s", got, acmeAnswer)
	}
	if got := answerA(t, srv.Addr, "www.example.com."); got != publicWWW {
		t.Errorf("upstreamNameservers: %s, want %s", got, publicWWW)
	}

	// Add a longer stub domain: it takes over its part of the tree, no restart.
	write("stubDomains", fmt.Sprintf(`{"acme.internal": [%q], "svc.acme.internal": [%q]}`, w.acme, w.svc))
	testkit.Eventually(t, 10*time.Second, "svc.acme.internal from the kube-dns stub domain", func() (bool, string) {
		got := answerA(t, srv.Addr, "svc.acme.internal.")
		return got == svcApex, "svc.acme.internal answered " + got
	})
	if got := answerA(t, srv.Addr, "xsvc.acme.internal."); got != acmeAnswer {
		t.Errorf("after the change xsvc.acme.internal: %s, want %s", got, acmeAnswer)
	}

	// A broken file is logged and the last good routes stay.
	write("stubDomains", `{"acme.internal": [`)
	testkit.Eventually(t, 10*time.Second, "a kubedns error counted", func() (bool, string) {
		v := harness.Scrape(t, metrics).Sum("coredns_splitdns_kubedns_errors_total")
		return v >= 1, fmt.Sprintf("kubedns_errors_total %v", v)
	})
	if got := answerA(t, srv.Addr, "svc.acme.internal."); got != svcApex {
		t.Errorf("after a malformed stubDomains: %s, want the last good route's %s", got, svcApex)
	}
	if !srv.WaitLog("keeping the current routes", time.Second) {
		t.Errorf("malformed stubDomains not logged")
	}
}

func TestDeadFirstUpstreamIsSkipped(t *testing.T) {
	w := startWorld(t)
	dead := harness.NewAddr(t) // nothing listens there
	srv, metrics := startSplitDNS(t, fmt.Sprintf(`        route acme.internal %s %s
        default %s
        policy sequential
        health_check 100ms`, dead, w.acme, w.public))

	ask := func(i int) {
		t.Helper()
		if got := answerA(t, srv.Addr, fmt.Sprintf("q%d.acme.internal.", i)); got != acmeAnswer {
			t.Fatalf("query %d: %s, want %s", i, got, acmeAnswer)
		}
	}
	// Every query is answered, the first ones after a failed try of the dead upstream.
	for i := range 10 {
		ask(i)
	}
	testkit.Eventually(t, 5*time.Second, "the dead upstream marked unhealthy", func() (bool, string) {
		v, ok := harness.Scrape(t, metrics).Value("coredns_splitdns_upstream_healthy", "upstream", dead)
		return ok && v == 0, fmt.Sprintf("upstream_healthy{%s} = %v (series present: %v)", dead, v, ok)
	})
	// Held down, it is not even tried: no connection to it is taken any more.
	tries := func() float64 {
		m, l := harness.Scrape(t, metrics), []string{"proxy_name", "splitdns", "to", dead}
		return m.Sum("coredns_proxy_conn_cache_misses_total", l...) + m.Sum("coredns_proxy_conn_cache_hits_total", l...)
	}
	before := tries()
	for i := 10; i < 30; i++ {
		ask(i)
	}
	if after := tries(); after != before {
		t.Errorf("the held-down first upstream was still tried %v times in 20 queries", after-before)
	}
	t.Logf("dead first upstream: tried %v times until health checks held it down, then 0 times in 20 queries", before)
}

func TestTruncatedAnswerIsAskedAgainOverTCP(t *testing.T) {
	w := startWorld(t) // unbound truncates UDP answers over 512 bytes
	srv, metrics := startSplitDNS(t, "        default "+w.public)

	// The client can take 4096 bytes over UDP: splitdns gets the whole
	// answer from unbound over TCP and hands it over UDP, no TC.
	m := harness.Exchange(t, srv.Addr, "big.example.com.", dns.TypeTXT, harness.EDNS(4096))
	if m.Truncated || len(m.Answer) != bigTXTRecords {
		t.Errorf("bufsize 4096: TC=%v, %d answers, want the full %d", m.Truncated, len(m.Answer), bigTXTRecords)
	}
	if v := harness.Scrape(t, metrics).Sum("coredns_splitdns_tcp_retries_total"); v < 1 {
		t.Errorf("tcp_retries_total %v: the truncated UDP answer was not asked again over TCP", v)
	}
	// A client with a small buffer gets TC and retries over TCP itself.
	m = harness.Exchange(t, srv.Addr, "big.example.com.", dns.TypeTXT, harness.EDNS(1232))
	if !m.Truncated {
		t.Errorf("bufsize 1232: no TC bit on a %d-record answer", len(m.Answer))
	}
	m = harness.Exchange(t, srv.Addr, "big.example.com.", dns.TypeTXT, harness.TCP)
	if m.Truncated || len(m.Answer) != bigTXTRecords {
		t.Errorf("TCP: TC=%v, %d answers, want %d", m.Truncated, len(m.Answer), bigTXTRecords)
	}
	// dig does all of this by itself.
	out := harness.Dig(t, srv.Addr, "big.example.com", "TXT", "+bufsize=1232")
	if !strings.Contains(out, "Truncated, retrying in TCP mode") || !strings.Contains(out, fmt.Sprintf("ANSWER: %d", bigTXTRecords)) {
		t.Errorf("dig did not get the whole answer over TCP:\n%s", out)
	}
}

func TestUpstreamThatIsThisServerStopsStartUp(t *testing.T) {
	ip := harness.NewIP(t)
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	os.WriteFile(resolv, []byte("nameserver "+ip+"\noptions ndots:5\n"), 0o644)
	port := harness.FreePort(t, "127.0.0.1")
	tests := []struct{ name, corefile, want string }{
		{"resolv.conf points at the sidecar", fmt.Sprintf(`.:53 {
    bind %s
    splitdns {
        resolv %s
    }
}`, ip, resolv), "upstream " + ip + ":53 is this server itself (it listens on " + ip + ":53)"},
		{"wildcard bind, loopback upstream", fmt.Sprintf(`.:%d {
    splitdns {
        route acme.internal 10.0.0.1
        default 127.0.0.53:%d
    }
}`, port, port), fmt.Sprintf("upstream 127.0.0.53:%d is this server itself (it listens on every local address, port %d)", port, port)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := harness.StartCoreDNS(t, tc.corefile, harness.WithoutWait())
			select {
			case <-srv.Exited():
			case <-time.After(10 * time.Second):
				t.Fatalf("coredns still running with an upstream that is itself")
			}
			if srv.ExitErr() == nil {
				t.Errorf("coredns exited with status 0")
			}
			if !strings.Contains(srv.Log(), tc.want) {
				t.Errorf("start-up error does not say %q:\n%s", tc.want, srv.Log())
			}
			t.Logf("start-up refusal: %s", strings.TrimSpace(lastLine(srv.Log())))
		})
	}
}

func TestRunTimeLoopIsServfailNotAmplified(t *testing.T) {
	w := startWorld(t)
	ipA, ipB := harness.NewIP(t), harness.NewIP(t)
	ipC := harness.NewIP(t)
	// A: splitdns, routing loop.test to B and strip.test to C. B: stock
	// forward of everything to A. C: the same, but it drops the marker first.
	a := harness.StartCoreDNS(t, fmt.Sprintf(`.:53 {
    bind %s
    prometheus %s:9153
    splitdns {
        route loop.test %s:53
        route strip.test %s:53
        default %s
        timeout 500ms
    }
}`, ipA, ipA, ipB, ipC, w.public))
	c := harness.StartCoreDNS(t, fmt.Sprintf(`.:53 {
    bind %s
    prometheus %s:9153
    rewrite edns0 local unset 0x%x
    forward . %s:53
}`, ipC, ipC, 65053, ipA))
	b := harness.StartCoreDNS(t, fmt.Sprintf(`b.test:53 {
    bind %s
    template IN A {
        answer "{{ .Name }} 60 IN A 10.9.9.9"
    }
}
.:53 {
    bind %s
    prometheus %s:9153
    forward . %s:53
}`, ipB, ipB, ipB, ipA), harness.WithDNSAddr(ipB+":53"))
	metricsA, metricsB := "http://"+ipA+":9153/metrics", "http://"+ipB+":9153/metrics"

	copies := func() (aToB, bToA float64) {
		aToB = harness.Scrape(t, metricsA).Sum("coredns_proxy_request_duration_seconds_count", "proxy_name", "splitdns", "to", ipB+":53")
		bToA = harness.Scrape(t, metricsB).Sum("coredns_proxy_request_duration_seconds_count", "proxy_name", "forward", "to", ipA+":53")
		return aToB, bToA
	}
	aToB0, bToA0 := copies() // the start-up probes went around too, without a loop
	const queries = 5
	for i := range queries {
		start := time.Now()
		m := harness.Exchange(t, a.Addr, fmt.Sprintf("q%d.loop.test.", i), dns.TypeA, harness.Attempts(1))
		if m.Rcode != dns.RcodeServerFailure {
			t.Errorf("looping query %d: %s, want SERVFAIL", i, dns.RcodeToString[m.Rcode])
		}
		if d := time.Since(start); d > 1500*time.Millisecond { // answered at once, not when the 2s upstream timeout runs out
			t.Errorf("looping query %d took %v", i, d)
		}
	}
	aToB, bToA := copies()
	aToB, bToA = aToB-aToB0, bToA-bToA0
	loops := harness.Scrape(t, metricsA).Sum("coredns_splitdns_loops_total")
	t.Logf("%d looping client queries: A forwarded %v copies to B, B forwarded %v copies to A, A detected %v loops", queries, aToB, bToA, loops)
	if aToB+bToA > 2*queries {
		t.Errorf("%v forwarded copies for %d client queries, want at most %d (one per server on the loop)", aToB+bToA, queries, 2*queries)
	}
	if loops != queries {
		t.Errorf("loops_total %v, want %d", loops, queries)
	}

	// Through C the marker is lost; the query that comes back finds itself
	// in flight (coalesced) and is not forwarded again: the loop ends when
	// A's copy times out (500ms), with one copy per server.
	// A's copies to C time out (C waits on A), so they are not in the proxy
	// histogram: count the A queries C received (A's health checks of C
	// after each timeout are NS queries).
	seenByC := func() float64 {
		return harness.Scrape(t, "http://"+ipC+":9153/metrics").Sum("coredns_dns_requests_total", "type", "A")
	}
	seen0 := seenByC()
	seenByA0 := harness.Scrape(t, metricsA).Sum("coredns_dns_requests_total", "type", "A")
	coalesced0 := harness.Scrape(t, metricsA).Sum("coredns_splitdns_coalesced_total")
	for i := range queries {
		start := time.Now()
		m := harness.Exchange(t, a.Addr, fmt.Sprintf("q%d.strip.test.", i), dns.TypeA, harness.Attempts(1), harness.Timeout(5*time.Second))
		if m.Rcode != dns.RcodeServerFailure {
			t.Errorf("query %d looping through a marker-dropping server: %s, want SERVFAIL", i, dns.RcodeToString[m.Rcode])
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("query %d looping through a marker-dropping server took %v", i, d)
		}
	}
	time.Sleep(time.Second) // let C's late answers and A's health checks settle
	seen := seenByC() - seen0
	coalesced := harness.Scrape(t, metricsA).Sum("coredns_splitdns_coalesced_total") - coalesced0
	returned := harness.Scrape(t, metricsA).Sum("coredns_dns_requests_total", "type", "A") - seenByA0 - queries
	t.Logf("%d client queries looping through a marker-dropping server: A sent C %v copies, C sent A %v copies back, A coalesced %v of them (answered SERVFAIL when A's copy timed out)", queries, seen, returned, coalesced)
	if returned != queries {
		t.Errorf("C sent A %v copies back for %d client queries, want %d", returned, queries, queries)
	}
	if coalesced != queries {
		t.Errorf("coalesced %v returning copies, want %d", coalesced, queries)
	}
	if seen != queries {
		t.Errorf("C received %v copies of the looping queries for %d client queries, want %d", seen, queries, queries)
	}

	// All still serve.
	if got := answerA(t, a.Addr, "www.example.com."); got != publicWWW {
		t.Errorf("A after the loop: %s", got)
	}
	if got := answerA(t, b.Addr, "x.b.test."); got != "10.9.9.9" {
		t.Errorf("B after the loop: %s", got)
	}
	if got := answerA(t, b.Addr, "www.example.com."); got != publicWWW {
		t.Errorf("B through A after the loop: %s", got)
	}
	if got := answerA(t, c.Addr, "www.example.com."); got != publicWWW {
		t.Errorf("C through A after the loop: %s", got)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
