package reliability

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

// soakBound is the staleness the soak accepts: "served within a second" for
// a DNSEndpoint change (docs/architecture.md, "The data path"). An answer to a query sent later than
// change+soakBound must show the change.
const soakBound = time.Second

// churnName is one DNSEndpoint the soak created and (later) deleted.
type churnName struct {
	name    string
	target  string
	created time.Time // when the file was in place
	deleted atomic.Int64
}

// TestSoak (make soak; skipped unless FLEETDNS_SOAK_DURATION is set) runs a
// GSLB cluster for the duration at half its measured maximum query rate (or
// FLEETDNS_SOAK_QPS), with DNSEndpoints created and deleted all along and its
// gslb peer flapping (SIGSTOP/SIGCONT). Every answer is checked against what
// the data was when the query was sent; RSS and goroutines are read from the
// prometheus endpoint at start and end.
func TestSoak(t *testing.T) {
	durS := os.Getenv("FLEETDNS_SOAK_DURATION")
	if durS == "" {
		t.Skip("FLEETDNS_SOAK_DURATION not set: run make soak")
	}
	dur, err := time.ParseDuration(durS)
	if err != nil {
		t.Fatalf("FLEETDNS_SOAK_DURATION=%q: %v", durS, err)
	}
	harness.RequirePlugins(t, "any", "k8scrd", "localtargets", "gslb", "prometheus")

	// The peer cluster "us".
	usIP, usDir := harness.NewIP(t), t.TempDir()
	testkit.WriteFile(t, usDir, "hosts.yaml", testkit.DNSEndpoint("reliability", "hosts", nil, testkit.Endpoint{DNSName: appHost, RecordType: "A", TTL: 5, Targets: []string{"10.20.0.1"}}))
	us := harness.StartCoreDNS(t, fmt.Sprintf(`%s:53 {
    bind %s
    localtargets
    k8scrd {
        directory %s
    }
}
`, gslbZone, usIP, usDir), harness.WithProbe("localtargets-"+appHost, dns.TypeA))

	// The cluster under test "eu".
	ip, dir := harness.NewIP(t), t.TempDir()
	promAddr := fmt.Sprintf("%s:%d", ip, harness.FreePort(t, ip))
	testkit.WriteFile(t, dir, "static.yaml", testkit.DNSEndpoint("reliability", "static", nil,
		testkit.Endpoint{DNSName: "www.example.org", RecordType: "A", TTL: 60, Targets: []string{"192.0.2.1"}},
		testkit.Endpoint{DNSName: appHost, RecordType: "A", TTL: 5, Targets: []string{"10.10.0.1", "10.10.0.2"}},
	))
	eu := harness.StartCoreDNS(t, fmt.Sprintf(`%s:53 %s:53 {
    bind %s
    any
    localtargets
    gslb %s {
        geotag eu
        peer us %s
        strategy roundRobin
        timeout 500ms
        refresh 1s
        split_brain_threshold 10s
        ttl 5
    }
    k8scrd %s %s {
        directory %s
    }
    prometheus %s
    errors
}
`, zone, gslbZone, ip, gslbZone, usIP, zone, gslbZone, dir, promAddr), harness.WithProbe("www."+zone, dns.TypeA))
	promURL := "http://" + promAddr + "/metrics"
	testkit.Eventually(t, 15*time.Second, "every cluster's app targets at eu", func() (bool, string) {
		m, err := harness.Ask(eu.Addr, appHost, dns.TypeA)
		return err == nil && len(addrsOf(m)) == 3, "app: " + summary(m, err)
	})

	// The rate: half the measured maximum, unless given.
	qps := 0
	if s := os.Getenv("FLEETDNS_SOAK_QPS"); s != "" && s != "0" {
		qps, _ = strconv.Atoi(s)
	}
	if qps <= 0 {
		maxQPS := measureMaxQPS(t, eu.Addr)
		qps = int(maxQPS / 2)
		t.Logf("maximum rate measured with dnsperf: %.0f q/s; soak rate: %d q/s", maxQPS, qps)
	}

	sample := func(when string) (rss, gor float64) {
		m, err := harness.ScrapeMetrics(promURL)
		rss, ok1 := m.Value("process_resident_memory_bytes")
		gor, ok2 := m.Value("go_goroutines")
		if err != nil || !ok1 || !ok2 {
			t.Errorf("metrics at %s: %v (RSS found %v, goroutines found %v)", when, err, ok1, ok2) // Errorf: called from a goroutine too
		}
		t.Logf("%s: RSS %.1f MiB, %v goroutines", when, rss/(1<<20), gor)
		return rss, gor
	}

	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	var wg sync.WaitGroup

	// Churn: a DNSEndpoint created every 100 ms, each deleted 2 s later.
	var (
		churnMu sync.RWMutex
		churn   []*churnName
		created atomic.Int64
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			c := &churnName{name: fmt.Sprintf("c%d.example.org.", i), target: fmt.Sprintf("10.99.%d.%d", (i/250)%250, i%250+1)}
			file := fmt.Sprintf("c%d.yaml", i)
			body := testkit.DNSEndpoint("reliability", fmt.Sprintf("c%d", i), nil, testkit.Endpoint{DNSName: strings.TrimSuffix(c.name, "."), RecordType: "A", TTL: 1, Targets: []string{c.target}})
			if err := testkit.WriteFileAtomic(dir, file, body); err != nil {
				t.Error(err)
				return
			}
			c.created = time.Now()
			created.Add(1)
			churnMu.Lock()
			churn = append(churn, c)
			// Delete the one created 2 s ago; forget those long gone.
			if n := len(churn); n > 20 {
				old := churn[n-21]
				if old.deleted.Load() == 0 {
					os.Remove(filepath.Join(dir, strings.TrimSuffix(old.name, ".example.org.")+".yaml"))
					old.deleted.Store(time.Now().UnixNano())
				}
			}
			if len(churn) > 100 {
				churn = slices.Clone(churn[len(churn)-60:])
			}
			churnMu.Unlock()
		}
	}()

	// The peer flaps: stopped 2 s, running 3 s.
	var flaps atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer us.Resume()
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(3 * time.Second):
			}
			us.Pause()
			flaps.Add(1)
			select {
			case <-ctx.Done():
				return
			case <-time.After(2 * time.Second):
			}
			us.Resume()
		}
	}()

	// Warm up, then the first sample.
	time.Sleep(2 * time.Second)
	rss0, gor0 := sample("start")

	type result struct {
		total, errs, wrong, stale, servfail, usMissing int64
		// churn answers by what the data was when the query was sent
		mustHave, mustNotHave, inTransition int64
		firstWrong                          []string
	}
	var (
		resMu sync.Mutex
		res   result
	)
	record := func(bad, kind string) {
		resMu.Lock()
		defer resMu.Unlock()
		if len(res.firstWrong) < 20 {
			res.firstWrong = append(res.firstWrong, time.Now().Format("15:04:05.000")+" "+kind+": "+bad)
		}
	}
	const workers = 8
	interval := time.Duration(float64(time.Second) * workers / float64(qps))
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			cl := dns.Client{Net: "udp", Timeout: 2 * time.Second}
			next := time.Now()
			for ctx.Err() == nil {
				next = next.Add(interval)
				if d := time.Until(next); d > 0 {
					time.Sleep(d)
				} else if d < -time.Second {
					next = time.Now() // behind by more than a second: do not burst to catch up
				}
				var (
					name  string
					check func(m *dns.Msg, sent time.Time) (bad, kind string)
				)
				switch p := rng.IntN(10); {
				case p < 5:
					name = "www." + zone
					check = func(m *dns.Msg, _ time.Time) (string, string) {
						if got := addrsOf(m); m.Rcode != dns.RcodeSuccess || !slices.Equal(got, []string{"192.0.2.1"}) {
							return summary(m, nil), "wrong"
						}
						return "", ""
					}
				case p < 8:
					churnMu.RLock()
					if len(churn) == 0 {
						churnMu.RUnlock()
						continue
					}
					c := churn[rng.IntN(len(churn))]
					churnMu.RUnlock()
					name = c.name
					check = func(m *dns.Msg, sent time.Time) (string, string) {
						del := c.deleted.Load()
						resMu.Lock()
						switch {
						case del != 0 && sent.After(time.Unix(0, del).Add(soakBound)):
							res.mustNotHave++
						case (del == 0 || sent.Before(time.Unix(0, del))) && sent.After(c.created.Add(soakBound)):
							res.mustHave++
						default:
							res.inTransition++
						}
						resMu.Unlock()
						present := m.Rcode == dns.RcodeSuccess && slices.Equal(addrsOf(m), []string{c.target})
						absent := m.Rcode == dns.RcodeNameError
						switch {
						case !present && !absent:
							return summary(m, nil), "wrong"
						case del != 0 && sent.After(time.Unix(0, del).Add(soakBound)) && present:
							return fmt.Sprintf("%s still answered %v after its deletion", c.name, sent.Sub(time.Unix(0, del))), "stale"
						case (del == 0 || sent.Before(time.Unix(0, del))) && sent.After(c.created.Add(soakBound)) && absent:
							return fmt.Sprintf("%s NXDOMAIN %v after its creation", c.name, sent.Sub(c.created)), "stale"
						}
						return "", ""
					}
				default:
					name = appHost
					check = func(m *dns.Msg, _ time.Time) (string, string) {
						got := addrsOf(m)
						switch {
						case m.Rcode == dns.RcodeSuccess && slices.Equal(got, []string{"10.10.0.1", "10.10.0.2", "10.20.0.1"}):
							return "", ""
						case m.Rcode == dns.RcodeSuccess && slices.Equal(got, []string{"10.10.0.1", "10.10.0.2"}):
							return "", "usMissing"
						}
						return summary(m, nil), "wrong"
					}
				}
				q := new(dns.Msg)
				q.SetQuestion(name, dns.TypeA)
				sent := time.Now()
				r, _, err := cl.Exchange(q, eu.Addr)
				resMu.Lock()
				res.total++
				resMu.Unlock()
				if err != nil {
					resMu.Lock()
					res.errs++
					resMu.Unlock()
					record(name+": "+err.Error(), "error")
					continue
				}
				bad, kind := check(r, sent)
				resMu.Lock()
				if r.Rcode == dns.RcodeServerFailure {
					res.servfail++
				}
				switch kind {
				case "wrong":
					res.wrong++
				case "stale":
					res.stale++
				case "usMissing":
					res.usMissing++
				}
				resMu.Unlock()
				if bad != "" {
					record(name+": "+bad, kind)
				}
			}
		}()
	}

	// Samples along the way, to see a trend rather than two points.
	start := time.Now()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(max(dur/5, 10*time.Second)):
				sample(fmt.Sprintf("after %v", time.Since(start).Round(time.Second)))
			}
		}
	}()
	wg.Wait()
	elapsed := time.Since(start)
	time.Sleep(2 * time.Second) // the last deletions settle, queries in flight end
	rss1, gor1 := sample("end")

	resMu.Lock()
	defer resMu.Unlock()
	t.Logf("soak: %v at a target of %d q/s: %d queries (%.0f q/s achieved), %d DNSEndpoints created (each deleted 2 s later), peer stopped %d times",
		elapsed.Round(time.Second), qps, res.total, float64(res.total)/elapsed.Seconds(), created.Load(), flaps.Load())
	t.Logf("soak: errors (timeouts) %d (%.4f%%), SERVFAIL %d, wrong answers %d, stale past %v %d, gslb answers without the stopped peer %d",
		res.errs, 100*float64(res.errs)/float64(max(res.total, 1)), res.servfail, res.wrong, soakBound, res.stale, res.usMissing)
	t.Logf("soak: churned names asked %d times while they had to exist, %d times while they had to be gone, %d times within %v of a change (either answer accepted)",
		res.mustHave, res.mustNotHave, res.inTransition, soakBound)
	t.Logf("soak: RSS %.1f -> %.1f MiB, goroutines %v -> %v", rss0/(1<<20), rss1/(1<<20), gor0, gor1)
	for _, s := range res.firstWrong {
		t.Logf("  %s", s)
	}
	if res.wrong > 0 || res.stale > 0 || res.servfail > 0 {
		t.Errorf("%d wrong, %d stale, %d SERVFAIL answers", res.wrong, res.stale, res.servfail)
	}
	if float64(res.errs) > 0.001*float64(res.total) {
		t.Errorf("%d of %d queries timed out (above 0.1%%)", res.errs, res.total)
	}
	if gor1 > gor0+50 {
		t.Errorf("goroutines grew from %v to %v", gor0, gor1)
	}
	if rss1 > rss0*1.5+16<<20 {
		t.Errorf("RSS grew from %.1f to %.1f MiB", rss0/(1<<20), rss1/(1<<20))
	}
}

var reQPS = regexp.MustCompile(`Queries per second:\s+([0-9.]+)`)

// measureMaxQPS runs dnsperf for 10 s without a rate limit against the
// static name and the gslb host, and returns its queries per second.
func measureMaxQPS(t *testing.T, addr string) float64 {
	t.Helper()
	perf := harness.LookPath(t, "dnsperf")
	qfile := filepath.Join(t.TempDir(), "queries")
	if err := os.WriteFile(qfile, []byte("www."+zone+" A\n"+appHost+" A\nnope."+zone+" A\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	host, port, _ := strings.Cut(addr, ":")
	out, err := exec.Command(perf, "-s", host, "-p", port, "-d", qfile, "-l", "10", "-c", "4", "-T", "2", "-q", "200").CombinedOutput()
	if err != nil {
		t.Fatalf("dnsperf: %v\n%s", err, out)
	}
	m := reQPS.FindSubmatch(out)
	if m == nil {
		t.Fatalf("no rate in dnsperf output:\n%s", out)
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}
