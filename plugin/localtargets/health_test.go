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

func TestStateTransitions(t *testing.T) {
	hc := newHealthCheck()
	hc.fails, hc.passes = 3, 2
	ip := netip.MustParseAddr("10.0.0.1")
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
	tg := &target{addr: ip, cancel: func() {}}
	c.targets[ip] = tg
	for i, s := range steps {
		var err error
		if !s.pass {
			err = errors.New("refused")
		}
		c.record(tg, err)
		if tg.state != s.want {
			t.Fatalf("step %d (pass=%v): state %s, want %s", i, s.pass, tg.state, s.want)
		}
		_, inSet := c.snapshot()[ip]
		if inSet != (s.want == stateHealthy) {
			t.Fatalf("step %d: in healthy set = %v with state %s", i, inSet, s.want)
		}
	}
}

func TestHealthyOnlyAfterFirstPass(t *testing.T) {
	hc := newHealthCheck()
	ip := netip.MustParseAddr("10.0.0.1")
	c := newChecker(hc, nil, defaultPrefix, storetest.New())
	tg := &target{addr: ip, cancel: func() {}}
	c.targets[ip] = tg
	c.publish()
	if _, ok := c.snapshot()[ip]; ok {
		t.Fatal("an unchecked target is in the healthy set")
	}
	c.record(tg, nil)
	if _, ok := c.snapshot()[ip]; !ok {
		t.Fatal("a target is not healthy after its first pass")
	}
}

func TestFilterKeepsOrderAndSharesWhenAllHealthy(t *testing.T) {
	all := addrs("10.0.0.1", "10.0.0.2", "10.0.0.3")
	set := healthySet{all[0]: {}, all[1]: {}, all[2]: {}}
	if got := set.filter(all); &got[0] != &all[0] {
		t.Error("filter copied a slice with every target healthy")
	}
	delete(set, all[1])
	if got, want := set.filter(all), addrs("10.0.0.1", "10.0.0.3"); !slices.Equal(got, want) {
		t.Errorf("filter = %v, want %v", got, want)
	}
	if got := (healthySet{}).filter(all); len(got) != 0 {
		t.Errorf("filter with nothing healthy = %v", got)
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
	hc := newHealthCheck()
	hc.proto, hc.port = "tcp", port
	c := newChecker(hc, nil, defaultPrefix, storetest.New())
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := c.check(ctx, netip.MustParseAddr("127.0.0.1")); err != nil {
		t.Errorf("tcp check of a listening port: %v", err)
	}
	if err := c.check(ctx, netip.MustParseAddr("127.0.0.2")); err == nil {
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

	hc := newHealthCheck()
	hc.proto, hc.port, hc.path, hc.host = "http", port, "/healthz", "app.example.org"
	c := newChecker(hc, nil, defaultPrefix, storetest.New())
	ip := netip.MustParseAddr("127.0.0.1")
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

	hc := newHealthCheck()
	hc.proto, hc.port, hc.path, hc.host = "https", port, "/", "app.example.org"
	c := newChecker(hc, nil, defaultPrefix, storetest.New())
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := c.check(ctx, netip.MustParseAddr("127.0.0.1")); err != nil {
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

	hc := newHealthCheck()
	hc.proto, hc.port, hc.path = "http", port, "/"
	c := newChecker(hc, nil, defaultPrefix, storetest.New())
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := c.check(ctx, netip.MustParseAddr("127.0.0.1")); err == nil {
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
	hc := newHealthCheck()
	hc.proto, hc.port = "tcp", port
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
	c.probe = func(_ context.Context, ip netip.Addr) error {
		mu.Lock()
		probed[ip]++
		mu.Unlock()
		return nil
	}
	c.start()
	defer c.stop()
	testkit.Eventually(t, 5*time.Second, "both targets checked", func() error {
		if len(c.snapshot()) != 2 {
			return errors.New("not both healthy")
		}
		return nil
	})

	s.Set(&store.Host{Name: "app.example.org.", TTL: 30, A: addrs("10.0.0.1")})
	testkit.Eventually(t, 5*time.Second, "the removed target gone", func() error {
		c.mu.Lock()
		defer c.mu.Unlock()
		if len(c.targets) != 1 {
			return errors.New("still checking the removed target")
		}
		return nil
	})
	if _, ok := c.snapshot()[netip.MustParseAddr("10.0.0.2")]; ok {
		t.Error("removed target still in the healthy set")
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
	old := newChecker(hc, []string{"example.org."}, defaultPrefix, s)
	old.probe = func(_ context.Context, ip netip.Addr) error {
		if ip == healthy {
			return nil
		}
		return errors.New("refused")
	}
	old.start()
	testkit.Eventually(t, 5*time.Second, "the old checker's first round", func() error {
		if !old.ready.Load() || len(old.snapshot()) != 1 {
			return errors.New("not yet")
		}
		return nil
	})

	block := make(chan struct{})
	reloaded := newChecker(hc, []string{"example.org."}, defaultPrefix, s)
	reloaded.probe = func(ctx context.Context, _ netip.Addr) error {
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
		up := reloaded.snapshot()
		if _, ok := up[healthy]; !ok || len(up) != 1 || !reloaded.ready.Load() {
			t.Fatalf("after reload: healthy set %v ready %v, want just %s from the start", up, reloaded.ready.Load(), healthy)
		}
		time.Sleep(15 * time.Millisecond) // a few rescans
	}
	// A different stanza starts from unknown.
	hc2 := hc
	hc2.port = 8080
	other := newChecker(hc2, []string{"example.org."}, defaultPrefix, s)
	other.probe = reloaded.probe
	other.start()
	defer other.stop()
	if len(other.snapshot()) != 0 {
		t.Errorf("a checker with another stanza inherited %v", other.snapshot())
	}
}
