package scale_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"
	"github.com/miekg/dns"
)

const (
	propagationGoal = 250 * time.Millisecond // p99, create to first answer
	pollers         = 16                     // goroutines polling names
	pollEvery       = 2 * time.Millisecond   // per name
	answerWithin    = 10 * time.Second       // a name not seen by then fails the run
)

// propRun is one propagation measurement.
type propRun struct {
	background int // endpoints the server also serves
	total      []time.Duration
	create     []time.Duration
}

// TestPropagation measures DNSEndpoint create -> first visible answer
// through the real API server over FLEETDNS_BENCH_PROPAGATION objects
// (default 200), created one every 20 ms by one client while a bounded set of
// goroutines polls each new name over UDP every 2 ms. It runs twice: with a
// server that holds nothing else, and with one that also serves the largest
// scale size (default 100,000 endpoints), where each change must not cost a
// rebuild of everything.
func TestPropagation(t *testing.T) {
	needBench(t)
	n := envInt(t, "FLEETDNS_BENCH_PROPAGATION", 200)
	every := time.Duration(envInt(t, "FLEETDNS_BENCH_PROP_INTERVAL_MS", 20)) * time.Millisecond
	sz := sizes(t)
	bg := envInt(t, "FLEETDNS_BENCH_PROP_BACKGROUND", sz[len(sz)-1])
	k := harness.SharedKube(t)

	var runs []*propRun
	for _, background := range []int{0, bg} {
		if background == 0 && len(runs) > 0 {
			continue
		}
		run := &propRun{background: background}
		runs = append(runs, run)
		t.Run(fmt.Sprintf("background-%d", background), func(t *testing.T) {
			ns := k.NewNamespace(t, "prop")
			watch := []string{ns}
			if background > 0 {
				if background%perObject != 0 {
					t.Fatalf("FLEETDNS_BENCH_PROP_BACKGROUND=%d: not a multiple of %d", background, perObject)
				}
				watch = append(watch, load(t, k, background).ns)
			}
			s := startK8sCRD(t, k, harness.NewIP(t), "", watch...)
			measurePropagation(t, k, s, ns, n, every, run)
		})
	}

	var b strings.Builder
	fmt.Fprintf(&b, "\n### DNSEndpoint create -> first answer through a real kube-apiserver (%s)\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "%s Load average (1/5/15 min) at the end: %s. %d objects of one A endpoint each, created one every %v by one client; %d goroutines poll each new name over UDP every %v from the start of its create call until the answer shows its address. Nothing pinned.\n\n",
		machine(), loadavg(), n, every, pollers, pollEvery)
	fmt.Fprintf(&b, "Command: `FLEETDNS_BENCH=1 FLEETDNS_BENCH_PROPAGATION=%d FLEETDNS_BENCH_PROP_BACKGROUND=%d go test -count=1 -v -timeout 60m -run TestPropagation ./test/bench/scale`\n\n", n, bg)
	b.WriteString("| also serving | objects | p50 | p90 | p99 | max | create call p50 / p99 | goal p99 < 250 ms |\n|---:|---:|---:|---:|---:|---:|---|---|\n")
	fail := false
	for _, r := range runs {
		if len(r.total) == 0 {
			continue
		}
		p99 := percentile(r.total, .99)
		ok := p99 < propagationGoal
		fail = fail || !ok
		ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
		fmt.Fprintf(&b, "| %d endpoints | %d | %s | %s | %s | %s | %s / %s | %s |\n", r.background, len(r.total),
			ms(percentile(r.total, .5)), ms(percentile(r.total, .9)), ms(p99), ms(slices.Max(r.total)),
			ms(percentile(r.create, .5)), ms(percentile(r.create, .99)), met(ok))
	}
	report(t, b.String())
	if fail && strict() {
		t.Errorf("propagation goal missed (FLEETDNS_BENCH_STRICT=1)")
	}
}

// measurePropagation creates n objects in ns, one every `every`, and records
// for each the time from the start of its create call to the first answer
// that carries its address.
func measurePropagation(t *testing.T, k *harness.Kube, s *server, ns string, n int, every time.Duration, run *propRun) {
	t.Helper()
	name := func(i int) string { return fmt.Sprintf("p%d.prop.scale.bench", i) }
	addr := func(i int) string { return fmt.Sprintf("192.0.%d.%d", 2+i/250, 1+i%250) }
	// Warm-up: the watch is established and one change has gone through.
	k.CreateDNSEndpoint(t, ns, "warmup", nil, harness.Endpoint{DNSName: "warmup.prop.scale.bench", RecordType: "A", Targets: []string{"192.0.2.250"}})
	testkit.Eventually(t, answerWithin, "the warm-up record served", func() (bool, string) {
		got, err := answerA(s.addr, "warmup.prop.scale.bench")
		return err == nil && len(got) == 1, fmt.Sprintf("warmup: %v %v", got, err)
	})

	type job struct {
		i     int
		start time.Time
	}
	jobs := make(chan job, n)
	var mu sync.Mutex
	var errs []string
	var wg sync.WaitGroup
	for range pollers {
		wg.Go(func() {
			for j := range jobs {
				m, q := harness.NewMsg(name(j.i), dns.TypeA, harness.NoRD, harness.Timeout(200*time.Millisecond), harness.Attempts(1))
				for {
					r, err := harness.AskMsg(s.addr, m, q)
					if err == nil && r.Rcode == dns.RcodeSuccess {
						if got := harness.Targets(r, dns.TypeA); len(got) == 1 && got[0] == addr(j.i) {
							d := time.Since(j.start)
							mu.Lock()
							run.total = append(run.total, d)
							mu.Unlock()
							break
						}
					}
					if time.Since(j.start) > answerWithin {
						mu.Lock()
						errs = append(errs, fmt.Sprintf("%s: no answer within %v of its create", name(j.i), answerWithin))
						mu.Unlock()
						break
					}
					time.Sleep(pollEvery)
				}
			}
		})
	}
	t0 := time.Now()
	for i := range n {
		if d := time.Until(t0.Add(time.Duration(i) * every)); d > 0 {
			time.Sleep(d)
		}
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := k.TryCreate(ctx, harness.DNSEndpointObject(ns, fmt.Sprintf("p%d", i), nil,
			harness.Endpoint{DNSName: name(i), RecordType: "A", Targets: []string{addr(i)}}))
		cancel()
		if err != nil {
			close(jobs)
			wg.Wait()
			t.Fatal(err)
		}
		run.create = append(run.create, time.Since(start))
		jobs <- job{i, start}
	}
	close(jobs)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d of %d names never answered: %s", len(errs), n, strings.Join(errs[:min(5, len(errs))], "; "))
	}
	t.Logf("also serving %d endpoints: create -> first answer over %d objects: p50 %v, p99 %v, max %v (load %s)",
		run.background, n, percentile(run.total, .5).Round(100*time.Microsecond), percentile(run.total, .99).Round(100*time.Microsecond),
		slices.Max(run.total).Round(100*time.Microsecond), loadavg())
}
