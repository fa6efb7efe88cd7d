package localtargets

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/store"
	"github.com/fleetdns/fleetdns/internal/store/storetest"
	"github.com/fleetdns/fleetdns/internal/testkit"

	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
)

// loopback allows the checks of loopback targets: the tests' listeners.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

// stubCheck adds to c the wanted check of a tcp probe of ip, as a rescan
// would, and publishes it.
func stubCheck(c *checker, ip netip.Addr) *check {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := c.hc.def
	key.addr = ip
	ch := c.add(key)
	c.publish(nil)
	return ch
}

func tcpHealthCheck(port int) healthCheck {
	hc := newHealthCheck()
	hc.def.proto, hc.def.port = "tcp", uint16(port)
	hc.allow = loopback
	return hc
}

func TestStateTransitions(t *testing.T) {
	hc := tcpHealthCheck(80)
	hc.fails, hc.passes = 3, 2
	ip := netip.MustParseAddr("10.0.0.1")
	h := storetest.Host("app.example.org.", "10.0.0.1")
	steps := []struct {
		pass bool
		want targetState
	}{
		{false, stateUnhealthy}, // unknown: the first failure is unhealthy
		{true, stateUnhealthy},  // one pass of two
		{false, stateUnhealthy}, // run broken
		{true, stateUnhealthy},
		{true, stateHealthy}, // two passes in a row
		{false, stateHealthy},
		{false, stateHealthy},
		{true, stateHealthy}, // resets the failure run
		{false, stateHealthy},
		{false, stateHealthy},
		{false, stateUnhealthy}, // three failures in a row
	}
	c := newChecker(hc, nil, defaultPrefix, storetest.New())
	ch := stubCheck(c, ip)
	for i, s := range steps {
		var err error
		if !s.pass {
			err = errors.New("refused")
		}
		c.record(ch, err)
		if ch.state != s.want {
			t.Fatalf("step %d (pass=%v): state %s, want %s", i, s.pass, ch.state, s.want)
		}
		if served := len(c.healthy(h, h.A)) == 1; served != (s.want == stateHealthy) {
			t.Fatalf("step %d: served = %v with state %s", i, served, s.want)
		}
	}
}

func TestHealthyOnlyAfterFirstPass(t *testing.T) {
	c := newChecker(tcpHealthCheck(80), nil, defaultPrefix, storetest.New())
	h := storetest.Host("app.example.org.", "10.0.0.1")
	ch := stubCheck(c, h.A[0])
	if got := c.healthy(h, h.A); len(got) != 0 {
		t.Fatal("an unchecked target is served")
	}
	c.record(ch, nil)
	if got := c.healthy(h, h.A); len(got) != 1 {
		t.Fatal("a target is not served after its first pass")
	}
}

func TestHealthyKeepsOrderAndSharesWhenAllHealthy(t *testing.T) {
	c := newChecker(tcpHealthCheck(80), nil, defaultPrefix, storetest.New())
	h := storetest.Host("app.example.org.", "10.0.0.1", "10.0.0.2", "10.0.0.3")
	var chs []*check
	for _, ip := range h.A {
		ch := stubCheck(c, ip)
		c.record(ch, nil)
		chs = append(chs, ch)
	}
	if got := c.healthy(h, h.A); &got[0] != &h.A[0] {
		t.Error("healthy copied a slice with every target healthy")
	}
	c.record(chs[1], errors.New("refused"))
	c.record(chs[1], errors.New("refused"))
	c.record(chs[1], errors.New("refused"))
	if got, want := c.healthy(h, h.A), addrs("10.0.0.1", "10.0.0.3"); !slices.Equal(got, want) {
		t.Errorf("healthy = %v, want %v", got, want)
	}
}

// listener returns a TCP listener on 127.0.0.1 and its port; 127.0.0.2 on
// the same port refuses connections.
func listener(t *testing.T) (net.Listener, int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, l.Addr().(*net.TCPAddr).Port
}

func TestTCPCheck(t *testing.T) {
	l, port := listener(t)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	hc := tcpHealthCheck(port)
	c := newChecker(hc, nil, defaultPrefix, storetest.New())
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := c.check(ctx, spec(hc, "127.0.0.1")); err != nil {
		t.Errorf("tcp check of a listening port: %v", err)
	}
	if err := c.check(ctx, spec(hc, "127.0.0.2")); err == nil {
		t.Error("tcp check of a closed port passed")
	}
}

func TestHTTPCheckSendsHostAndJudgesStatus(t *testing.T) {
	var mu sync.Mutex
	var gotHost, gotPath string
	status := http.StatusOK
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		gotHost, gotPath = r.Host, r.URL.Path
		w.WriteHeader(status)
	}))
	l, port := listener(t)
	srv.Listener = l
	srv.Start()
	defer srv.Close()

	hc := httpHealthCheck("http", port, "/healthz", "app.example.org")
	c := newChecker(hc, nil, defaultPrefix, storetest.New())
	ip := spec(hc, "127.0.0.1")
	for _, tt := range []struct {
		status int
		pass   bool
	}{{200, true}, {302, true}, {404, false}, {503, false}} {
		mu.Lock()
		status = tt.status
		mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.check(ctx, ip)
		cancel()
		if (err == nil) != tt.pass {
			t.Errorf("status %d: check error %v, want pass=%v", tt.status, err, tt.pass)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if gotHost != "app.example.org" || gotPath != "/healthz" {
		t.Errorf("request Host %q path %q, want app.example.org /healthz", gotHost, gotPath)
	}
}

func TestHTTPSCheckSendsServerName(t *testing.T) {
	var mu sync.Mutex
	var sni, host string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		sni, host = r.TLS.ServerName, r.Host
	}))
	l, port := listener(t)
	srv.Listener = l
	srv.TLS = &tls.Config{}
	srv.StartTLS()
	defer srv.Close()

	hc := httpHealthCheck("https", port, "/", "app.example.org")
	c := newChecker(hc, nil, defaultPrefix, storetest.New())
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := c.check(ctx, spec(hc, "127.0.0.1")); err != nil {
		t.Fatalf("https check: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if sni != "app.example.org" || host != "app.example.org" {
		t.Errorf("TLS server name %q, Host %q; want app.example.org for both", sni, host)
	}
}

func TestHTTPCheckTimesOut(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-block }))
	l, port := listener(t)
	srv.Listener = l
	srv.Start()
	defer func() { close(block); srv.Close() }()

	hc := httpHealthCheck("http", port, "/", "")
	c := newChecker(hc, nil, defaultPrefix, storetest.New())
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := c.check(ctx, spec(hc, "127.0.0.1")); err == nil {
		t.Error("a check of a server that never answers passed")
	}
	if d := time.Since(start); !testkit.Race && d > time.Second {
		t.Errorf("check took %s, beyond its 200ms timeout", d)
	}
}

// TestBackgroundChecksDriveAnswers runs the checker against real sockets:
// 127.0.0.1 listens, 127.0.0.2 refuses. localtargets- answers only the
// healthy target; when the listener goes away the answer becomes NODATA.
func TestBackgroundChecksDriveAnswers(t *testing.T) {

	l, port := listener(t)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()

	s := storetest.New(&store.Host{Name: "app.example.org.", A: addrs("127.0.0.1", "127.0.0.2"), TTL: 5, TTLSet: true})
	lt := newTestLocalTargets(s)
	hc := tcpHealthCheck(port)
	hc.interval, hc.timeout, hc.fails, hc.passes = 50*time.Millisecond, 50*time.Millisecond, 2, 1
	lt.health = newChecker(hc, lt.Zones, lt.prefix, s)
	if lt.Ready() {
		t.Fatal("ready before the first checks")
	}
	lt.health.start()
	defer lt.health.stop()

	answers := func(tc test.Case) func() error {
		return func() error {
			rec := dnstest.NewRecorder(&test.ResponseWriter{})
			lt.ServeDNS(context.Background(), rec, tc.Msg())
			return test.SortAndCheck(rec.Msg, tc)
		}
	}
	one := test.Case{Qname: "localtargets-app.example.org.", Qtype: dns.TypeA,
		Answer: []dns.RR{test.A("localtargets-app.example.org. 5 IN A 127.0.0.1")}}
	testkit.Eventually(t, 5*time.Second, "the listening target alone", answers(one))
	if !lt.Ready() {
		t.Error("not ready after every target was checked")
	}

	l.Close()
	none := nodata("localtargets-app.example.org.", dns.TypeA)
	testkit.Eventually(t, 5*time.Second, "NODATA once every target fails", answers(none))
	h, _ := s.Host("app.example.org.")
	if a, _ := lt.Healthy(h); len(a) != 0 {
		t.Errorf("Healthy = %v with every target failing", a)
	}
}

func TestRemovedTargetsStopBeingChecked(t *testing.T) {

	s := storetest.New(&store.Host{Name: "app.example.org.", TTL: 30, A: addrs("10.0.0.1", "10.0.0.2")})
	hc := newHealthCheck()
	hc.interval = 10 * time.Millisecond
	hc.timeout = 10 * time.Millisecond
	c := newChecker(hc, []string{"example.org."}, defaultPrefix, s)
	var mu sync.Mutex
	probed := map[netip.Addr]int{}
	c.probe = func(_ context.Context, p probeSpec) error {
		mu.Lock()
		probed[p.addr]++
		mu.Unlock()
		return nil
	}
	c.start()
	defer c.stop()
	h, _ := s.Host("app.example.org.")
	testkit.Eventually(t, 5*time.Second, "both targets checked", func() error {
		if len(c.healthy(h, h.A)) != 2 {
			return errors.New("not both healthy")
		}
		return nil
	})

	s.Set(&store.Host{Name: "app.example.org.", TTL: 30, A: addrs("10.0.0.1")})
	gone := netip.MustParseAddr("10.0.0.2")
	testkit.Eventually(t, 5*time.Second, "the removed target no longer wanted", func() error {
		c.mu.Lock()
		defer c.mu.Unlock()
		if ch := c.checks[spec(hc, "10.0.0.2")]; ch == nil || ch.wanted {
			return errors.New("still checking the removed target")
		}
		return nil
	})
	mu.Lock()
	before := probed[gone]
	mu.Unlock()
	time.Sleep(100 * time.Millisecond) // ten intervals
	mu.Lock()
	defer mu.Unlock()
	if n := probed[gone] - before; n > 1 { // one may have been in flight
		t.Errorf("the removed target was checked %d times after it went", n)
	}
}

// TestReloadKeepsHealthState starts a second checker with the same stanza
// while the first runs, as a Corefile reload does: the healthy target stays
// healthy from the first moment, before the new checker's own first check.
func TestReloadKeepsHealthState(t *testing.T) {

	s := storetest.New(&store.Host{Name: "app.example.org.", TTL: 30, A: addrs("10.0.0.1", "10.0.0.2")})
	hc := newHealthCheck()
	hc.interval, hc.timeout = 20*time.Millisecond, 10*time.Millisecond
	hc.fails = 1000 // the reloaded checker's own (timing out) checks never flip a target in the test
	healthy := netip.MustParseAddr("10.0.0.1")
	h, _ := s.Host("app.example.org.")
	old := newChecker(hc, []string{"example.org."}, defaultPrefix, s)
	old.probe = func(_ context.Context, p probeSpec) error {
		if p.addr == healthy {
			return nil
		}
		return errors.New("refused")
	}
	old.start()
	testkit.Eventually(t, 5*time.Second, "the old checker's first round", func() error {
		if !old.ready.Load() || len(old.healthy(h, h.A)) != 1 {
			return errors.New("not yet")
		}
		return nil
	})

	block := make(chan struct{})
	reloaded := newChecker(hc, []string{"example.org."}, defaultPrefix, s)
	reloaded.probe = func(ctx context.Context, _ probeSpec) error {
		select { // its own checks time out
		case <-block:
		case <-ctx.Done():
		}
		return errors.New("timeout")
	}
	reloaded.start()
	old.stop() // CoreDNS stops the old instance after the new one started
	defer func() { close(block); reloaded.stop() }()

	for range 5 {
		up := reloaded.healthy(h, h.A)
		if !slices.Equal(up, []netip.Addr{healthy}) || !reloaded.ready.Load() {
			t.Fatalf("after reload: healthy set %v ready %v, want just %s from the start", up, reloaded.ready.Load(), healthy)
		}
		time.Sleep(15 * time.Millisecond) // a few rescans
	}
	// A different stanza starts from unknown.
	hc2 := hc
	hc2.def.port = 8080
	other := newChecker(hc2, []string{"example.org."}, defaultPrefix, s)
	other.probe = reloaded.probe
	other.start()
	defer other.stop()
	if up := other.healthy(h, h.A); len(up) != 0 {
		t.Errorf("a checker with another stanza inherited %v", up)
	}
}

// spec is the key of hc's check of ip.
func spec(hc healthCheck, ip string) probeSpec {
	p := hc.def
	p.addr = netip.MustParseAddr(ip)
	return p
}

func httpHealthCheck(proto string, port int, path, host string) healthCheck {
	hc := newHealthCheck()
	hc.def.proto, hc.def.port, hc.def.path, hc.def.host = proto, uint16(port), path, host
	hc.allow = loopback
	return hc
}
