package gslb

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

// countingPeer is a peer (geo tag cnt) that answers every localtargets-
// A query with 10.60.0.1, counts the queries it gets per name, and can be
// made silent (it reads and drops, as a stopped process would).
type countingPeer struct {
	mu     sync.Mutex
	byName map[string]int
	total  int
	silent atomic.Bool
}

const cntTarget = "10.60.0.1"

func startCountingPeer(t *testing.T, ip string) *countingPeer {
	t.Helper()
	p := &countingPeer{byName: map[string]int{}}
	srv := &dns.Server{Addr: net.JoinHostPort(ip, "53"), Net: "udp",
		Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
			q := r.Question[0]
			p.mu.Lock()
			p.byName[strings.ToLower(q.Name)]++
			p.total++
			p.mu.Unlock()
			if p.silent.Load() {
				return
			}
			m := new(dns.Msg)
			m.SetReply(r)
			if q.Qtype == dns.TypeA && strings.HasPrefix(strings.ToLower(q.Name), "localtargets-") {
				rr, _ := dns.NewRR(q.Name + " 5 IN A " + cntTarget)
				m.Answer = []dns.RR{rr}
			}
			w.WriteMsg(m)
		})}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go srv.ListenAndServe()
	<-started
	t.Cleanup(func() { srv.Shutdown() })
	return p
}

// counts returns the queries per name and in all since the last reset.
func (p *countingPeer) reset() (map[string]int, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	by, total := p.byName, p.total
	p.byName, p.total = map[string]int{}, 0
	return by, total
}

// TestPeerQueryCost counts what a peer is asked: nothing for names no
// cluster declares, one query per (peer, host) for a burst of concurrent
// misses, and, once it is silent and judged down, about one probe per
// refresh cycle instead of one per host.
func TestPeerQueryCost(t *testing.T) {
	f := newFleet(t)
	cntIP := harness.NewIP(t)
	cnt := startCountingPeer(t, cntIP)
	f.delegation["cnt"] = nsEntry{name: nsName("cnt"), ip: cntIP}
	// 20 more roundRobin hosts in every cluster.
	const extra = 20
	for _, tag := range tags {
		var eps []testkit.Endpoint
		for i := range extra {
			eps = append(eps, testkit.Endpoint{DNSName: fmt.Sprintf("h%d.%s", i, zone), RecordType: "A", TTL: 5, Targets: f.targets[tag]})
		}
		testkit.WriteFile(t, f.clusters[tag].dir, "extra.yaml", testkit.DNSEndpoint("apps", "extra", nil, eps...))
	}
	f.start(t, fleetOptions{})
	eu := f.clusters["eu"]
	withCnt := sortedAppend(f.union(tags...), cntTarget)
	testkit.Eventually(t, 3*peerRefresh, "cnt's targets in the answer", func() (bool, string) {
		got, err := ask(eu.addr, hostRR, dns.TypeA)
		return err == nil && equal(got, withCnt), fmt.Sprintf("%s = %v (%v), want %v", hostRR, got, err, withCnt)
	})

	t.Run("undeclared names cost no peer query", func(t *testing.T) {
		cnt.reset()
		for i := range 100 {
			m := harness.Exchange(t, f.clusters[tags[i%3]].addr, fmt.Sprintf("random-%d.%s", i, zone), dns.TypeA)
			if m.Rcode != dns.RcodeNameError {
				t.Fatalf("random-%d: %s, want NXDOMAIN", i, dns.RcodeToString[m.Rcode])
			}
		}
		time.Sleep(200 * time.Millisecond)
		by, _ := cnt.reset()
		for name, n := range by {
			if strings.Contains(name, "random-") {
				t.Errorf("peer asked %d times for %s: an undeclared name made a peer query", n, name)
			}
		}
	})

	t.Run("concurrent misses for one host make one query", func(t *testing.T) {
		// A host declared now in eu only: nobody has asked a peer for it.
		testkit.WriteFile(t, eu.dir, "fresh.yaml", testkit.DNSEndpoint("apps", "fresh", nil,
			testkit.Endpoint{DNSName: "fresh." + zone, RecordType: "A", TTL: 5, Targets: f.targets["eu"], ProviderSpecific: [][2]string{{"gslb/strategy", "roundRobin"}}}))
		testkit.Eventually(t, 3*time.Second, "eu loaded the fresh host", func() (bool, string) {
			m := harness.Exchange(t, eu.addr, "localtargets-fresh."+zone, dns.TypeA)
			return len(m.Answer) > 0, "eu has not loaded fresh." + zone
		})
		cnt.reset()
		var wg sync.WaitGroup
		var mu sync.Mutex
		var answers [][]string
		for range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, err := ask(eu.addr, "fresh."+zone, dns.TypeA)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				answers = append(answers, got)
				mu.Unlock()
			}()
		}
		wg.Wait()
		by, _ := cnt.reset()
		n := by["localtargets-fresh."+zone+"."]
		t.Logf("50 concurrent client queries for a fresh host: the peer was asked %d times; answers e.g. %v", n, answers[0])
		if n > 2 {
			t.Errorf("the peer got %d queries for localtargets-fresh.%s from 50 concurrent client queries, want one per key (A, AAAA at most: 2)", n, zone)
		}
	})

	t.Run("a silent peer costs one probe per cycle, not one per host", func(t *testing.T) {
		cnt.silent.Store(true)
		defer cnt.silent.Store(false)
		without := f.union(tags...)
		for _, tag := range tags {
			c := f.clusters[tag]
			testkit.Eventually(t, splitBrain+2*peerRefresh+slack, "the answer without silent cnt", func() (bool, string) {
				got, err := ask(c.addr, hostRR, dns.TypeA)
				return err == nil && equal(got, without), fmt.Sprintf("%s at %s = %v (%v) with cnt silent", hostRR, tag, got, err)
			})
		}
		// Clients keep asking for every host meanwhile.
		cnt.reset()
		window := 3 * time.Second
		end := time.Now().Add(window)
		for time.Now().Before(end) {
			for i := range extra {
				ask(f.clusters[tags[i%3]].addr, fmt.Sprintf("h%d.%s", i, zone), dns.TypeA)
			}
		}
		_, total := cnt.reset()
		cycles := int(window / peerRefresh)
		perHost := len(tags) * (extra + 7) * cycles
		t.Logf("silent peer asked %d times in %v by %d clusters (per-host probing would be about %d)", total, window, len(tags), perHost)
		if total >= perHost/4 {
			t.Errorf("silent peer asked %d times in %v: judged per host, not per peer (per-host probing would be about %d)", total, window, perHost)
		}
	})
}

func sortedAppend(s []string, more ...string) []string {
	return sorted(append(append([]string(nil), s...), more...))
}
