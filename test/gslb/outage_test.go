package gslb

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

// Slack for scheduling on a shared 2-core machine, on top of each bound the
// design gives.
const slack = 400 * time.Millisecond

// sample is one client query during a fault.
type sample struct {
	at      time.Duration // since the fault
	from    string        // the cluster asked
	name    string
	targets []string
	latency time.Duration
	err     error
}

// clients asks each cluster in from for each name in turn, every 25 ms,
// until stop is called, and returns every sample taken.
func clients(f *fleet, t0 time.Time, from []string, names ...string) (stop func() []sample) {
	var mu sync.Mutex
	var samples []sample
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, tag := range from {
		c := f.clusters[tag]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				case <-time.After(25 * time.Millisecond):
				}
				name := names[i%len(names)]
				start := time.Now()
				got, err := ask(c.addr, name, dns.TypeA)
				s := sample{at: start.Sub(t0), from: c.tag, name: name, targets: got, latency: time.Since(start), err: err}
				mu.Lock()
				samples = append(samples, s)
				mu.Unlock()
			}
		}()
	}
	return func() []sample {
		close(done)
		wg.Wait()
		return samples
	}
}

// switchTime is when every asking cluster answered name with want and kept
// answering it: the time of the first sample of the final run of want.
func switchTime(samples []sample, from []string, name string, want []string) (time.Duration, bool) {
	var at time.Duration
	for _, tag := range from {
		last := time.Duration(-1)
		for _, s := range samples {
			if s.from != tag || s.name != name {
				continue
			}
			if s.err == nil && equal(s.targets, want) {
				if last < 0 {
					last = s.at
				}
			} else {
				last = -1
			}
		}
		if last < 0 {
			return 0, false
		}
		at = max(at, last)
	}
	return at, true
}

// checkAnsweredWithinTimeout fails for every client query that was not
// answered, or waited on a peer longer than the gslb timeout.
func checkAnsweredWithinTimeout(t *testing.T, samples []sample) {
	t.Helper()
	var worst time.Duration
	var bad []string
	for _, s := range samples {
		worst = max(worst, s.latency)
		if s.err != nil || s.latency > peerTimeout+slack {
			bad = append(bad, fmt.Sprintf("%s@%s at %v: %v in %v", s.name, s.from, s.at.Round(time.Millisecond), s.err, s.latency.Round(time.Millisecond)))
		}
	}
	t.Logf("%d client queries during the fault, slowest %v", len(samples), worst.Round(time.Millisecond))
	if len(bad) > 0 {
		t.Errorf("%d of %d client queries not answered within timeout %v (+%v slack), e.g.:\n%s",
			len(bad), len(samples), peerTimeout, slack, strings.Join(bad[:min(len(bad), 10)], "\n"))
	}
}

// TestFailoverWhenClusterStopsOrDies stops the primary cluster with SIGSTOP
// (it keeps its socket and answers nothing), resumes it, then kills it (the
// port is closed) and restarts it. The other clusters fail over within
// split_brain_threshold plus one refresh, answer every client within the
// peer timeout meanwhile, and return to the primary once it is back.
func TestFailoverWhenClusterStopsOrDies(t *testing.T) {
	f := newFleet(t)
	f.start(t, fleetOptions{})
	eu := f.clusters["eu"]
	from := []string{"us", "ap"}
	failoverBound := splitBrain + peerRefresh + peerTimeout + slack

	fault := func(t *testing.T, name string, inject, heal func()) {
		t.Run(name, func(t *testing.T) {
			t0 := time.Now()
			stop := clients(f, t0, from, hostFailover, hostRR)
			inject()
			// A host declared at us during the fault: its first queries miss
			// the peer answer cache and may wait on eu, at most the timeout.
			us := f.clusters["us"]
			fresh := "fresh-" + strings.ToLower(name) + "." + zone
			testkit.WriteFile(t, us.dir, "fresh.yaml", testkit.DNSEndpoint("apps", "fresh", nil,
				testkit.Endpoint{DNSName: fresh, RecordType: "A", TTL: 7, Targets: f.targets["us"], ProviderSpecific: [][2]string{{"gslb/strategy", "roundRobin"}}}))
			var slowest time.Duration
			for n := 0; ; n++ {
				start := time.Now()
				m, err := harness.Ask(us.addr, fresh, dns.TypeA, harness.Attempts(1))
				d := time.Since(start)
				slowest = max(slowest, d)
				if err != nil || d > peerTimeout+slack {
					t.Errorf("query %d for %s at us during the fault: %v after %v, want an answer within timeout %v", n, fresh, err, d.Round(time.Millisecond), peerTimeout)
				}
				if err == nil && len(m.Answer) > 0 {
					t.Logf("%s: %s declared during the fault answered %v after %d queries, slowest %v", name, fresh, harness.Targets(m, dns.TypeA), n+1, slowest.Round(time.Millisecond))
					break
				}
				if n > 200 {
					t.Fatalf("%s never answered at us", fresh)
				}
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(failoverBound + time.Second)
			samples := stop()

			at, ok := switchTime(samples, from, hostFailover, f.union("us"))
			if !ok {
				t.Fatalf("no failover to us within %v: last answers %v", failoverBound+time.Second, lastAnswers(samples, hostFailover))
			}
			t.Logf("%s: failover to us after %v", name, at.Round(time.Millisecond))
			if at > failoverBound {
				t.Errorf("failover after %v, want within split_brain_threshold %v + refresh %v (+ timeout, slack)", at, splitBrain, peerRefresh)
			}
			// The silent peer's last answer is believed until the threshold.
			if early := splitBrain - peerRefresh - peerTimeout; at < early {
				t.Errorf("failover after only %v: the last answer of a silent peer should stand for split_brain_threshold %v", at, splitBrain)
			}
			if rrAt, ok := switchTime(samples, from, hostRR, f.union("us", "ap")); !ok || rrAt > failoverBound {
				t.Errorf("roundRobin without eu after %v (ok=%v), want within %v", rrAt, ok, failoverBound)
			}
			checkAnsweredWithinTimeout(t, samples)

			// Recovery.
			t1 := time.Now()
			stop = clients(f, t1, from, hostFailover)
			heal()
			recoverBound := 2*peerRefresh + peerTimeout + slack
			time.Sleep(recoverBound + 3*time.Second)
			samples = stop()
			back, ok := switchTime(samples, from, hostFailover, f.union("eu"))
			if !ok {
				t.Fatalf("never back to eu after %s: last answers %v", name, lastAnswers(samples, hostFailover))
			}
			t.Logf("%s: back to eu after %v", name, back.Round(time.Millisecond))
			if back > recoverBound+3*time.Second {
				t.Errorf("back to eu after %v", back)
			}
			checkAnsweredWithinTimeout(t, samples)
		})
	}

	fault(t, "SIGSTOP", eu.srv.Pause, eu.srv.Resume)
	fault(t, "SIGKILL", eu.srv.Kill, eu.srv.Restart)
}

func lastAnswers(samples []sample, name string) map[string]string {
	out := map[string]string{}
	for _, s := range samples {
		if s.name == name {
			out[s.from] = fmt.Sprintf("%v %v at %v", s.targets, s.err, s.at.Round(time.Millisecond))
		}
	}
	return out
}
