package gslb

import (
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

// service is a TCP listener standing for a target's service on ip:53/tcp.
type service struct {
	addr string
	l    net.Listener
}

func (s *service) up(t *testing.T) {
	t.Helper()
	l, err := net.Listen("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	s.l = l
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	t.Cleanup(func() { l.Close() })
}

func (s *service) down() { s.l.Close() }

// TestHealthChecksLeaveFailingTargetsOut gives eu two targets whose service
// is a real TCP listener, checked by localtargets. A failing target leaves
// eu's localtargets- answer and so every cluster's failover answer; when all
// of eu's targets fail, eu answers NODATA and the others fail over to us at
// once (eu is up, with no targets: no split-brain wait); when the services
// return, so does eu.
func TestHealthChecksLeaveFailingTargetsOut(t *testing.T) {
	f := newFleet(t)
	s1, s2 := &service{addr: harness.NewIP(t) + ":53"}, &service{addr: harness.NewIP(t) + ":53"}
	s1.up(t)
	s2.up(t)
	ip1, _, _ := net.SplitHostPort(s1.addr)
	ip2, _, _ := net.SplitHostPort(s2.addr)
	f.targets["eu"] = sorted([]string{ip1, ip2})
	metrics := harness.HostPort(t, f.clusters["eu"].ip)
	f.start(t, fleetOptions{
		localtargets: map[string]string{"eu": `localtargets {
        healthcheck tcp 53 {
            allow 127.0.0.0/8
            interval 200ms
            timeout 100ms
            fails 2
            passes 1
        }
    }`},
		blockExtra: map[string]string{"eu": "    prometheus " + metrics + "\n"},
	})
	eu := f.clusters["eu"]
	// Health detection (fails x interval) plus one peer refresh.
	bound := 2*200*time.Millisecond + peerRefresh + peerTimeout + slack + time.Second

	expect := func(what string, eu, others []string) {
		t.Helper()
		testkit.Eventually(t, bound, "answers that follow the health change", func() (bool, string) {
			got, err := ask(f.clusters["eu"].addr, "localtargets-"+hostFailover, dns.TypeA)
			if err != nil || !equal(got, eu) {
				return false, fmt.Sprintf("%s: eu's localtargets-%s = %v (%v), want %v", what, hostFailover, got, err, eu)
			}
			for _, tag := range tags {
				got, err := ask(f.clusters[tag].addr, hostFailover, dns.TypeA)
				if err != nil || !equal(got, others) {
					return false, fmt.Sprintf("%s: %s at %s = %v (%v), want %v", what, hostFailover, tag, got, err, others)
				}
			}
			return true, ""
		})
	}

	expect("both services up", f.union("eu"), f.union("eu"))
	// Series count checks by state, never by address (tenants choose them).
	if v, ok := harness.Scrape(t, metrics).Value("coredns_localtargets_targets", "state", "healthy"); !ok || v != 2 {
		t.Errorf("targets{state=healthy} = %v (series present: %v), want 2", v, ok)
	}

	s2.down()
	expect("one service down", []string{ip1}, []string{ip1})
	if v, ok := harness.Scrape(t, metrics).Value("coredns_localtargets_targets", "state", "unhealthy"); !ok || v == 0 {
		t.Errorf("targets{state=unhealthy} = %v (series present: %v) after one service went down, want its checks counted", v, ok)
	}

	start := time.Now()
	s1.down()
	expect("every service down", nil, f.union("us"))
	t.Logf("failover to us %v after eu's last target failed", time.Since(start).Round(time.Millisecond))
	m := harness.Exchange(t, eu.addr, "localtargets-"+hostFailover, dns.TypeA)
	if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 0 || !m.Authoritative || !hasSOA(m.Ns) {
		t.Errorf("eu with every target failing: %s AA=%v answer %v ns %v, want authoritative NODATA with SOA",
			dns.RcodeToString[m.Rcode], m.Authoritative, m.Answer, m.Ns)
	}

	s1.up(t)
	s2.up(t)
	expect("services back", f.union("eu"), f.union("eu"))

	// A Corefile reload (SIGUSR1) starts new instances of every plugin: the
	// health state carries over, so eu never advertises fewer targets.
	reloads := strings.Count(eu.srv.Log(), "Reloading complete")
	eu.srv.Signal(syscall.SIGUSR1)
	var blips []string
	end := time.Now().Add(3 * time.Second)
	for time.Now().Before(end) {
		m, err := harness.Ask(eu.addr, "localtargets-"+hostFailover, dns.TypeA, harness.Attempts(1))
		if err != nil {
			blips = append(blips, err.Error())
		} else if got := harness.Targets(m, dns.TypeA); !equal(got, f.union("eu")) {
			blips = append(blips, fmt.Sprintf("%s %v", dns.RcodeToString[m.Rcode], got))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !eu.srv.WaitLog("Reloading complete", time.Second) || strings.Count(eu.srv.Log(), "Reloading complete") <= reloads {
		t.Fatalf("eu did not reload on SIGUSR1")
	}
	if len(blips) > 0 {
		t.Errorf("during the reload eu answered localtargets-%s %d times with other than %v, e.g. %v", hostFailover, len(blips), f.union("eu"), blips[:min(len(blips), 5)])
	}

	// A state change is logged once per check, not per check run.
	var lines []string
	for _, l := range strings.Split(eu.srv.Log(), "\n") {
		if strings.Contains(l, ip2) && strings.Contains(l, "is unhealthy") {
			lines = append(lines, l)
		}
	}
	t.Logf("%s", strings.Join(lines, "\n"))
	if n := len(lines); n != 1 {
		t.Errorf("eu logged %d lines that %s is unhealthy, want once", n, ip2)
	}
}
