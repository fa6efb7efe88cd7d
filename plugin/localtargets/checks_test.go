package localtargets

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/store"
	"github.com/fleetdns/fleetdns/internal/store/storetest"
	"github.com/fleetdns/fleetdns/internal/testkit"

	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// httpServer serves handler on 127.0.0.1 and counts the requests it gets:
// its access log.
func httpServer(t *testing.T, handler http.HandlerFunc) (port int, requests *atomic.Int64) {
	t.Helper()
	requests = new(atomic.Int64)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		handler(w, r)
	}))
	l, port := listener(t)
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return port, requests
}

// ask returns the A targets of lt's answer to localtargets-<label>, and
// whether lt answered (rather than passing the query on).
func ask(lt *LocalTargets, label string) ([]string, bool) {
	m := new(dns.Msg)
	m.SetQuestion("localtargets-"+label+".example.org.", dns.TypeA)
	rec := dnstest.NewRecorder(&test.ResponseWriter{})
	lt.ServeDNS(context.Background(), rec, m)
	if rec.Msg == nil || rec.Msg.Rcode != dns.RcodeSuccess || !rec.Msg.Authoritative {
		return nil, false
	}
	var out []string
	for _, rr := range rec.Msg.Answer {
		out = append(out, rr.(*dns.A).A.String())
	}
	return out, true
}

func startChecker(t *testing.T, s *storetest.Store, hc healthCheck) *LocalTargets {
	t.Helper()
	lt := newTestLocalTargets(s)
	hc.interval, hc.timeout = 100*time.Millisecond, 100*time.Millisecond
	lt.health = newChecker(hc, lt.Zones, lt.prefix, s)
	lt.health.start()
	t.Cleanup(lt.health.stop)
	testkit.Eventually(t, 5*time.Second, "ready", lt.Ready)
	return lt
}

func answersWithin(t *testing.T, lt *LocalTargets, label string, want ...string) {
	t.Helper()
	testkit.Eventually(t, 5*time.Second, "localtargets-"+label, func() error {
		got, _ := ask(lt, label)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("targets %v, want %v", got, want)
		}
		return nil
	})
}

// TestRefusedAddressNeverChecked: an HTTP server on a loopback target is
// never contacted without allow, the target is withheld and its verdict is
// nowhere; with allow it is checked and served.
func TestRefusedAddressNeverChecked(t *testing.T) {
	port, requests := httpServer(t, func(http.ResponseWriter, *http.Request) {})
	s := storetest.New(storetest.Host("app.example.org.", "127.0.0.1"), storetest.Host("meta.example.org.", "169.254.169.254", "fd00:ec2::254", "0.0.0.0", "::ffff:127.0.0.1"))
	refused0 := testutil.ToFloat64(uncheckedTargets.WithLabelValues(reasonRefused))

	hc := httpHealthCheck("http", port, "/healthz", "app.example.org")
	hc.allow = nil
	lt := startChecker(t, s, hc)
	time.Sleep(300 * time.Millisecond) // three intervals
	if n := requests.Load(); n != 0 {
		t.Fatalf("the refused address got %d requests", n)
	}
	if got, ok := ask(lt, "app"); !ok || len(got) != 0 {
		t.Errorf("refused target: answer %v (answered %v), want NODATA", got, ok)
	}
	if d := testutil.ToFloat64(uncheckedTargets.WithLabelValues(reasonRefused)) - refused0; d != 5 {
		t.Errorf("unchecked_targets{refused} grew by %v, want 5", d)
	}
	lt.health.mu.Lock()
	n := len(lt.health.checks)
	lt.health.mu.Unlock()
	if n != 0 {
		t.Errorf("%d checks of refused addresses", n)
	}
	lt.health.stop()

	hc.allow = loopback
	lt = startChecker(t, s, hc)
	answersWithin(t, lt, "app", "127.0.0.1")
	if requests.Load() == 0 {
		t.Error("the allowed address was never checked")
	}
}

// TestSharedAddressDifferentHost: two hosts on one load balancer address,
// checked with their own Host header; one 404s, the other keeps the address.
func TestSharedAddressDifferentHost(t *testing.T) {
	port, _ := httpServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Host != "good.example.org" {
			w.WriteHeader(http.StatusNotFound)
		}
	})
	good, bad := storetest.Host("good.example.org.", "127.0.0.1"), storetest.Host("bad.example.org.", "127.0.0.1")
	good.Properties[propCheck] = "http " + strconv.Itoa(port) + " /healthz good.example.org"
	bad.Properties[propCheck] = "http " + strconv.Itoa(port) + " /healthz bad.example.org"
	lt := startChecker(t, storetest.New(good, bad), tcpHealthCheck(port))
	answersWithin(t, lt, "good", "127.0.0.1")
	answersWithin(t, lt, "bad")
}

// TestPerHostCheckLeavesOthersAlone: a host whose own check fails loses its
// targets; the zone's other hosts, checked by the stanza, keep theirs.
func TestPerHostCheckLeavesOthersAlone(t *testing.T) {
	port, _ := httpServer(t, func(http.ResponseWriter, *http.Request) {})
	l, closed := listener(t) // a port nothing answers on once closed
	l.Close()
	broken := storetest.Host("broken.example.org.", "127.0.0.1")
	broken.Properties[propCheck] = "tcp " + strconv.Itoa(closed)
	unchecked := storetest.Host("unchecked.example.org.", "127.0.0.3")
	unchecked.Properties[propCheck] = "none"
	s := storetest.New(broken, unchecked, storetest.Host("app.example.org.", "127.0.0.1"), storetest.Host("other.example.org.", "127.0.0.1"))
	closeListener(t, closed)
	lt := startChecker(t, s, tcpHealthCheck(port))
	answersWithin(t, lt, "app", "127.0.0.1")
	answersWithin(t, lt, "other", "127.0.0.1")
	answersWithin(t, lt, "broken")
	answersWithin(t, lt, "unchecked", "127.0.0.3")
}

// closeListener makes sure nothing listens on port of 127.0.0.1.
func closeListener(t *testing.T, port int) {
	t.Helper()
	testkit.Eventually(t, 5*time.Second, "port closed", func() bool {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 100*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
}

// TestExpectBodyAndAddress: health/expect judges the status and the body;
// health/address checks another address than the target.
func TestExpectBodyAndAddress(t *testing.T) {
	var mu sync.Mutex
	body := "starting"
	port, _ := httpServer(t, func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprint(w, body)
	})
	h := storetest.Host("app.example.org.", "127.0.0.5") // nothing listens there
	h.Properties[propCheck] = "http " + strconv.Itoa(port) + " /healthz"
	h.Properties[propExpect] = "202 status: ready"
	h.Properties[propAddress] = "127.0.0.1"
	wrongStatus := storetest.Host("strict.example.org.", "127.0.0.1")
	wrongStatus.Properties[propCheck] = h.Properties[propCheck]
	wrongStatus.Properties[propExpect] = "200"
	lt := startChecker(t, storetest.New(h, wrongStatus), tcpHealthCheck(port))
	answersWithin(t, lt, "app")
	mu.Lock()
	body = "status: ready"
	mu.Unlock()
	answersWithin(t, lt, "app", "127.0.0.5")
	answersWithin(t, lt, "strict")
}

// TestHostMoveKeepsHealthyTargets: a host leaves one object (briefly
// absent from the store) and comes back in another, under a query every
// 50 ms; the new checks would be slow, so a lost verdict shows as NODATA.
func TestHostMoveKeepsHealthyTargets(t *testing.T) {
	s := storetest.New(&store.Host{Name: "app.example.org.", TTL: 30, AddressDeclared: true, A: addrs("10.0.0.1"),
		Labels: map[string]string{"owner": "k8gb-operator"}})
	lt := newTestLocalTargets(s)
	hc := tcpHealthCheck(80)
	hc.interval, hc.timeout, hc.fails = 50*time.Millisecond, time.Second, 1000
	var first atomic.Bool
	first.Store(true)
	lt.health = newChecker(hc, lt.Zones, lt.prefix, s)
	lt.health.probe = func(ctx context.Context, _ probeSpec) error {
		if first.Load() {
			return nil
		}
		<-ctx.Done() // from now on a check from unknown takes a second
		return ctx.Err()
	}
	lt.health.start()
	defer lt.health.stop()
	answersWithin(t, lt, "app", "10.0.0.1")
	first.Store(false)

	var wrong, answered atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 40 { // 2s
			if got, ok := ask(lt, "app"); ok {
				answered.Add(1)
				if fmt.Sprint(got) != "[10.0.0.1]" {
					wrong.Add(1)
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	time.Sleep(200 * time.Millisecond)
	s.Remove("app.example.org.") // the operator's object deleted
	time.Sleep(200 * time.Millisecond)
	s.Put(&store.Host{Name: "app.example.org.", TTL: 30, AddressDeclared: true, A: addrs("10.0.0.1"),
		Labels: map[string]string{"owner": "team"}}) // the team's own object
	<-done
	if wrong.Load() != 0 || answered.Load() < 20 {
		t.Errorf("%d wrong answers (NODATA or other targets) of %d", wrong.Load(), answered.Load())
	}
}

// TestBoundedAtScale: 6,000 and 60,000 targets are checked by the pool's
// workers, not a goroutine each; caps leave the rest unchecked, counted.
func TestBoundedAtScale(t *testing.T) {
	for _, n := range []int{6000, 60000} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			var hosts []*store.Host
			for i := range n / 10 {
				var ts []string
				for j := range 10 {
					ts = append(ts, netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), byte(j)}).String())
				}
				hosts = append(hosts, storetest.Host(fmt.Sprintf("h%d.example.org.", i), ts...))
			}
			s := storetest.New(hosts...)
			hc := tcpHealthCheck(80)
			hc.maxPerZone = n // all checked
			hc.interval, hc.timeout = time.Hour, time.Second
			c := newChecker(hc, []string{"example.org."}, defaultPrefix, s)
			var probes atomic.Int64
			c.probe = func(context.Context, probeSpec) error { probes.Add(1); return nil }
			before := runtime.NumGoroutine()
			c.start()
			defer c.stop()
			peak := 0
			testkit.Eventually(t, 30*time.Second, "every target checked", func() bool {
				peak = max(peak, runtime.NumGoroutine())
				return c.ready.Load()
			})
			if probes.Load() != int64(n) {
				t.Errorf("%d probes of %d targets", probes.Load(), n)
			}
			if extra := peak - before; extra > hc.workers+4 {
				t.Errorf("%d goroutines more while checking %d targets, want at most %d workers and a few", extra, n, hc.workers)
			}
		})
	}
	t.Run("caps", func(t *testing.T) {
		var hosts []*store.Host
		for i := range 20 {
			var ts []string
			for j := range 20 {
				ts = append(ts, netip.AddrFrom4([4]byte{10, 1, byte(i), byte(j)}).String())
			}
			hosts = append(hosts, storetest.Host(fmt.Sprintf("h%02d.example.org.", i), ts...))
		}
		host0, zone0 := testutil.ToFloat64(uncheckedTargets.WithLabelValues(reasonHost)), testutil.ToFloat64(uncheckedTargets.WithLabelValues(reasonZone))
		hc := tcpHealthCheck(80)
		hc.maxPerHost, hc.maxPerZone = 16, 100
		c := newChecker(hc, []string{"example.org."}, defaultPrefix, storetest.New(hosts...))
		c.probe = func(context.Context, probeSpec) error { return errors.New("refused") }
		c.start()
		defer c.stop()
		testkit.Eventually(t, 5*time.Second, "ready", c.ready.Load)
		c.mu.Lock()
		n := len(c.checks)
		c.mu.Unlock()
		if n != 100 {
			t.Errorf("%d checks, want the zone's cap of 100", n)
		}
		if d := testutil.ToFloat64(uncheckedTargets.WithLabelValues(reasonHost)) - host0; d != 20*4 {
			t.Errorf("unchecked_targets{host_cap} grew by %v, want 80", d)
		}
		if d := testutil.ToFloat64(uncheckedTargets.WithLabelValues(reasonZone)) - zone0; d != 20*16-100 {
			t.Errorf("unchecked_targets{zone_cap} grew by %v, want 220", d)
		}
	})
}
