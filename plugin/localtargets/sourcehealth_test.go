package localtargets

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/fleetdns/fleetdns/internal/store/storetest"
	"github.com/fleetdns/fleetdns/internal/testkit"

	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
)

// TestSourceHealthWithdrawsTargets: targets that only unready source objects
// contribute are not in the localtargets- answer; a host whose targets are
// all withdrawn answers NODATA (it keeps its declaration).
func TestSourceHealthWithdrawsTargets(t *testing.T) {
	s := storetest.New(
		storetest.Withdraw(storetest.Host("shop.example.org.", "10.0.0.1", "10.0.0.2", "fd00::1", "fd00::2"), "10.0.0.2", "fd00::1"),
		storetest.Withdraw(storetest.Host("down.example.org.", "10.0.0.3", "fd00::3"), "10.0.0.3", "fd00::3"),
	)
	lt := newTestLocalTargets(s)
	for _, tc := range []test.Case{
		{Qname: "localtargets-shop.example.org.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("localtargets-shop.example.org. 30 IN A 10.0.0.1")}},
		{Qname: "localtargets-shop.example.org.", Qtype: dns.TypeAAAA,
			Answer: []dns.RR{test.AAAA("localtargets-shop.example.org. 30 IN AAAA fd00::2")}},
		nodata("localtargets-down.example.org.", dns.TypeA),
		nodata("localtargets-down.example.org.", dns.TypeAAAA),
	} {
		rec := dnstest.NewRecorder(&test.ResponseWriter{})
		lt.ServeDNS(context.Background(), rec, tc.Msg())
		if rec.Msg == nil || !rec.Msg.Authoritative {
			t.Fatalf("%s %s: no authoritative answer: %v", tc.Qname, dns.TypeToString[tc.Qtype], rec.Msg)
		}
		if err := test.SortAndCheck(rec.Msg, tc); err != nil {
			t.Errorf("%s %s: %v", tc.Qname, dns.TypeToString[tc.Qtype], err)
		}
	}

	// Without checks and with nothing withdrawn, Healthy is the host's own
	// slices (the query path allocates nothing for it).
	h := storetest.Host("app.example.org.", "10.0.0.1", "fd00::1")
	a, aaaa := lt.Healthy(h)
	if unsafe.SliceData(a) != unsafe.SliceData(h.A) || unsafe.SliceData(aaaa) != unsafe.SliceData(h.AAAA) || len(a) != 1 || len(aaaa) != 1 {
		t.Errorf("Healthy = %v %v, want the host's own %v %v", a, aaaa, h.A, h.AAAA)
	}
}

// TestSourceHealthAndChecksBothMustPass: with active checks, a target is
// served only when its source is ready and its check passes. A withdrawn
// target is still checked, so that it is served at once when its source is
// ready again.
func TestSourceHealthAndChecksBothMustPass(t *testing.T) {
	l, port := listener(t) // 127.0.0.1: the check passes
	go acceptAll(l)
	l3, err := net.Listen("tcp", net.JoinHostPort("127.0.0.3", strconv.Itoa(port)))
	if err != nil {
		testkit.Missing(t, "a listener on 127.0.0.3:%d (a second loopback address): %v", port, err)
	}
	t.Cleanup(func() { l3.Close() })
	go acceptAll(l3)
	// 127.0.0.2 on that port refuses: its check fails. 127.0.0.4 refuses too.
	all := storetest.Host("both.example.org.", "127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4")
	s := storetest.New(storetest.Withdraw(all, "127.0.0.3", "127.0.0.4"))
	hc := tcpHealthCheck(port)
	lt := startChecker(t, s, hc)

	// ready and passing: served; ready and failing, withdrawn and passing,
	// withdrawn and failing: not.
	answersWithin(t, lt, "both", "127.0.0.1")
	testkit.Eventually(t, 5*time.Second, "the withdrawn target's check passes", func() bool {
		ch := lt.health.snap.Load().checks[spec(hc, "127.0.0.3")]
		return ch != nil && ch.healthy.Load()
	})
	if got, _ := ask(lt, "both"); len(got) != 1 || got[0] != "127.0.0.1" {
		t.Fatalf("localtargets-both: %v, want only 127.0.0.1", got)
	}

	// The source is ready again: its target that passes is served at once,
	// on the verdict it kept while withdrawn.
	s.Put(all)
	if got, _ := ask(lt, "both"); len(got) != 2 || got[0] != "127.0.0.1" || got[1] != "127.0.0.3" {
		t.Errorf("source ready again: %v, want 127.0.0.1 127.0.0.3 without waiting for a check", got)
	}
}

// acceptAll accepts and closes connections until l is closed.
func acceptAll(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		c.Close()
	}
}
