package resolve

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fakeDNS is a recursive resolver on loopback, UDP and TCP on one port,
// that answers what the test sets and records what it was asked.
type fakeDNS struct {
	addr string

	mu sync.Mutex
	// names: the rcode and records of each name; a query gets the CNAMEs and
	// the records of its type, an SOA with the negative answers.
	names map[string]fakeName
	// asked records when each "name/TYPE" was asked, and over which network.
	asked map[string][]time.Time
	tcp   int
	// truncate answers UDP queries with TC set and nothing else.
	truncate bool
	// delay holds each answer; inFlight and maxInFlight count the queries
	// being answered at once.
	delay                 time.Duration
	inFlight, maxInFlight int
}

type fakeName struct {
	rcode int
	rrs   []dns.RR
}

func startFakeDNS(t *testing.T) *fakeDNS {
	t.Helper()
	f := &fakeDNS{names: map[string]fakeName{}, asked: map[string][]time.Time{}}
	var pc net.PacketConn
	var l net.Listener
	// The TCP port of the same number may be taken: a few ports are tried.
	for range 10 {
		p, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		if l, err = net.Listen("tcp", p.LocalAddr().String()); err == nil {
			pc = p
			break
		}
		p.Close()
	}
	if pc == nil {
		t.Fatal("no loopback port free for both UDP and TCP")
	}
	f.addr = pc.LocalAddr().String()
	for _, s := range []*dns.Server{{PacketConn: pc, Handler: f}, {Listener: l, Handler: f}} {
		started := make(chan struct{})
		s.NotifyStartedFunc = func() { close(started) }
		go s.ActivateAndServe()
		<-started
		t.Cleanup(func() { s.Shutdown() })
	}
	return f
}

// set makes name answer rcode with the records rrs (zone file lines).
func (f *fakeDNS) set(t *testing.T, name string, rcode int, rrs ...string) {
	t.Helper()
	n := fakeName{rcode: rcode}
	for _, s := range rrs {
		rr, err := dns.NewRR(s)
		if err != nil {
			t.Fatal(err)
		}
		n.rrs = append(n.rrs, rr)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.names[dns.CanonicalName(name)] = n
}

func (f *fakeDNS) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	q := req.Question[0]
	m := new(dns.Msg)
	m.SetReply(req)
	m.RecursionAvailable = true

	f.mu.Lock()
	key := dns.CanonicalName(q.Name) + "/" + dns.TypeToString[q.Qtype]
	f.asked[key] = append(f.asked[key], time.Now())
	tcp := w.LocalAddr().Network() == "tcp"
	if tcp {
		f.tcp++
	}
	n, ok := f.names[dns.CanonicalName(q.Name)]
	truncate := f.truncate && !tcp
	delay := f.delay
	f.inFlight++
	f.maxInFlight = max(f.maxInFlight, f.inFlight)
	f.mu.Unlock()
	// The query stops counting as in flight before its answer is written:
	// the client may ask its next question as soon as it reads this one.
	done := sync.OnceFunc(func() {
		f.mu.Lock()
		f.inFlight--
		f.mu.Unlock()
	})
	defer done()
	time.Sleep(delay)

	switch {
	case truncate:
		m.Truncated = true
	case !ok:
		m.Rcode = dns.RcodeRefused
	default:
		m.Rcode = n.rcode
		for _, rr := range n.rrs {
			if t := rr.Header().Rrtype; t == q.Qtype || t == dns.TypeCNAME {
				m.Answer = append(m.Answer, rr)
			}
		}
		if len(m.Answer) == 0 || n.rcode == dns.RcodeNameError {
			soa, _ := dns.NewRR("example.com. 60 IN SOA ns.example.com. host.example.com. 1 3600 600 86400 1")
			m.Ns = []dns.RR{soa}
		}
		if !tcp {
			// What does not fit the client's buffer is truncated (TC), as a server does.
			size := dns.MinMsgSize
			if o := req.IsEdns0(); o != nil {
				size = int(o.UDPSize())
			}
			m.Truncate(size)
		}
	}
	done()
	w.WriteMsg(m)
}

// asks returns when "name/TYPE" was asked.
func (f *fakeDNS) asks(name string, qtype uint16) []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.asked[dns.CanonicalName(name)+"/"+dns.TypeToString[qtype]])
}

// changes records the calls of a resolver's changed.
type changes struct {
	mu    sync.Mutex
	calls [][]string
}

func (c *changes) record(keys []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, slices.Clone(keys))
}

func (c *changes) get() [][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.calls)
}

// startResolver runs a resolver asking servers, with a query timeout short
// enough for a test, until the test ends.
func startResolver(t *testing.T, servers []string, floor, ceiling time.Duration, maxNames int) (*resolver, *changes) {
	t.Helper()
	c := &changes{}
	r := newResolver(servers, floor, ceiling, maxNames, c.record)
	r.timeout = 300 * time.Millisecond
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		r.run(stop)
	}()
	t.Cleanup(func() {
		close(stop)
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			t.Error("the resolver did not stop within 2s")
		}
	})
	return r, c
}

func addrList(s ...string) []netip.Addr {
	var a []netip.Addr
	for _, x := range s {
		a = append(a, netip.MustParseAddr(x))
	}
	return a
}

// addrsAre is a condition: hostname's addresses are want.
func addrsAre(r *resolver, hostname string, want ...string) func() (bool, string) {
	return func() (bool, string) {
		got := r.addrs(hostname)
		return slices.Equal(got, addrList(want...)), fmt.Sprintf("addresses of %s: %v, want %v", hostname, got, want)
	}
}

func TestResolverResolvesTrackedNameFollowingCNAME(t *testing.T) {
	f := startFakeDNS(t)
	f.set(t, "lb.example.com.", dns.RcodeSuccess,
		"lb.example.com. 30 IN CNAME a.elb.example.net.",
		"a.elb.example.net. 30 IN CNAME b.elb.example.net.",
		"b.elb.example.net. 30 IN A 192.0.2.2",
		"b.elb.example.net. 30 IN A 192.0.2.1",
		"b.elb.example.net. 30 IN AAAA 2001:db8::1",
		// Not on the chain: never an address of lb.example.com.
		"other.example.net. 30 IN A 192.0.2.99",
	)
	r, c := startResolver(t, []string{f.addr}, 100*time.Millisecond, 5*time.Second, 10)
	if got := r.addrs("lb.example.com."); got != nil {
		t.Fatalf("addresses before any track: %v, want none", got)
	}
	start := time.Now()
	r.track("Ingress:ns/a", []string{"LB.example.com"}, false)
	testkit.Eventually(t, time.Second, "the tracked name resolved", addrsAre(r, "lb.example.com.", "192.0.2.1", "192.0.2.2", "2001:db8::1"))
	if d := time.Since(start); !testkit.Race && d > 500*time.Millisecond {
		t.Errorf("a new name resolved %v after track, want promptly", d)
	}
	testkit.Eventually(t, time.Second, "changed called", func() (bool, string) {
		got := c.get()
		return slices.EqualFunc(got, [][]string{{"Ingress:ns/a"}}, slices.Equal), fmt.Sprintf("changed calls %v, want [[Ingress:ns/a]]", got)
	})
	// Any spelling of the name reads the same addresses.
	if got := r.addrs("Lb.Example.Com"); len(got) != 3 {
		t.Errorf("addresses of Lb.Example.Com: %v, want those of lb.example.com.", got)
	}
}

func TestResolverSeesChangeAfterTTL(t *testing.T) {
	f := startFakeDNS(t)
	f.set(t, "lb.example.com.", dns.RcodeSuccess, "lb.example.com. 1 IN A 192.0.2.1")
	r, c := startResolver(t, []string{f.addr}, 100*time.Millisecond, 5*time.Second, 10)
	r.track("Service:ns/b", []string{"lb.example.com."}, false)
	r.track("Ingress:ns/a", []string{"lb.example.com.", "lb.example.com."}, false)
	testkit.Eventually(t, time.Second, "the first answer", addrsAre(r, "lb.example.com.", "192.0.2.1"))
	resolved := time.Now()

	f.set(t, "lb.example.com.", dns.RcodeSuccess, "lb.example.com. 1 IN A 192.0.2.9", "lb.example.com. 1 IN AAAA 2001:db8::9")
	testkit.Eventually(t, 2500*time.Millisecond, "the new answer after its TTL", addrsAre(r, "lb.example.com.", "192.0.2.9", "2001:db8::9"))
	if d := time.Since(resolved); d < 800*time.Millisecond {
		t.Errorf("re-asked %v after a 1s answer, want not before its TTL", d)
	}
	testkit.Eventually(t, time.Second, "changed names both keys", func() (bool, string) {
		got := c.get()
		return len(got) == 2 && slices.Equal(got[1], []string{"Ingress:ns/a", "Service:ns/b"}), fmt.Sprintf("changed calls %v", got)
	})
}

func TestResolverClampsTTLToFloor(t *testing.T) {
	f := startFakeDNS(t)
	f.set(t, "lb.example.com.", dns.RcodeSuccess, "lb.example.com. 0 IN A 192.0.2.1")
	floor := 300 * time.Millisecond
	r, _ := startResolver(t, []string{f.addr}, floor, 5*time.Second, 10)
	r.track("Ingress:ns/a", []string{"lb.example.com."}, false)
	testkit.Eventually(t, 2*time.Second, "three asks", func() (bool, string) {
		n := len(f.asks("lb.example.com.", dns.TypeA))
		return n >= 3, fmt.Sprintf("%d asks", n)
	})
	asks := f.asks("lb.example.com.", dns.TypeA)
	for i := 1; i < len(asks); i++ {
		if gap := asks[i].Sub(asks[i-1]); gap < floor-10*time.Millisecond {
			t.Errorf("a TTL-0 answer re-asked after %v, want at least the floor %v", gap, floor)
		}
	}
}

func TestResolverClampsTTLToCeiling(t *testing.T) {
	f := startFakeDNS(t)
	f.set(t, "lb.example.com.", dns.RcodeSuccess, "lb.example.com. 86400 IN A 192.0.2.1")
	ceiling := 400 * time.Millisecond
	r, _ := startResolver(t, []string{f.addr}, 100*time.Millisecond, ceiling, 10)
	r.track("Ingress:ns/a", []string{"lb.example.com."}, false)
	testkit.Eventually(t, 2*time.Second, "a day-long answer re-asked at the ceiling", func() (bool, string) {
		n := len(f.asks("lb.example.com.", dns.TypeA))
		return n >= 2, fmt.Sprintf("%d asks", n)
	})
	asks := f.asks("lb.example.com.", dns.TypeA)
	if gap := asks[1].Sub(asks[0]); gap < ceiling-10*time.Millisecond {
		t.Errorf("re-asked after %v, want the ceiling %v", gap, ceiling)
	}
}

func TestResolverFailsOverToSecondServer(t *testing.T) {
	// The first server never answers: it reads nothing.
	silent, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	f := startFakeDNS(t)
	f.set(t, "lb.example.com.", dns.RcodeSuccess, "lb.example.com. 30 IN A 192.0.2.1")
	r, _ := startResolver(t, []string{silent.LocalAddr().String(), f.addr}, 100*time.Millisecond, 5*time.Second, 10)
	r.track("Ingress:ns/a", []string{"lb.example.com."}, false)
	// The test's query timeout is 300ms.
	testkit.Eventually(t, 1500*time.Millisecond, "the second server's answer", addrsAre(r, "lb.example.com.", "192.0.2.1"))
}

func TestResolverServfailKeepsLastAddresses(t *testing.T) {
	f := startFakeDNS(t)
	f.set(t, "lb.example.com.", dns.RcodeSuccess, "lb.example.com. 0 IN A 192.0.2.1")
	r, c := startResolver(t, []string{f.addr}, 100*time.Millisecond, 5*time.Second, 10)
	r.track("Ingress:ns/a", []string{"lb.example.com."}, false)
	testkit.Eventually(t, time.Second, "the first answer", addrsAre(r, "lb.example.com.", "192.0.2.1"))

	f.set(t, "lb.example.com.", dns.RcodeServerFailure)
	before := len(f.asks("lb.example.com.", dns.TypeA))
	testkit.Eventually(t, 2*time.Second, "SERVFAIL retried after the floor", func() (bool, string) {
		n := len(f.asks("lb.example.com.", dns.TypeA))
		return n >= before+3, fmt.Sprintf("%d asks since SERVFAIL", n-before)
	})
	if got := r.addrs("lb.example.com."); !slices.Equal(got, addrList("192.0.2.1")) {
		t.Errorf("addresses after SERVFAIL: %v, want the last good 192.0.2.1", got)
	}
	if got := c.get(); len(got) != 1 {
		t.Errorf("changed calls %v, want only the first answer's", got)
	}

	// The server recovers with another answer: it is taken.
	f.set(t, "lb.example.com.", dns.RcodeSuccess, "lb.example.com. 0 IN A 192.0.2.7")
	testkit.Eventually(t, time.Second, "the answer after recovery", addrsAre(r, "lb.example.com.", "192.0.2.7"))
}

func TestResolverNXDOMAINClearsAddresses(t *testing.T) {
	f := startFakeDNS(t)
	f.set(t, "lb.example.com.", dns.RcodeSuccess, "lb.example.com. 0 IN A 192.0.2.1", "lb.example.com. 0 IN AAAA 2001:db8::1")
	r, c := startResolver(t, []string{f.addr}, 100*time.Millisecond, 5*time.Second, 10)
	r.track("Ingress:ns/a", []string{"lb.example.com."}, false)
	testkit.Eventually(t, time.Second, "the first answer", addrsAre(r, "lb.example.com.", "192.0.2.1", "2001:db8::1"))

	// NODATA for AAAA: the IPv6 address goes, the IPv4 one stays.
	f.set(t, "lb.example.com.", dns.RcodeSuccess, "lb.example.com. 0 IN A 192.0.2.1")
	testkit.Eventually(t, time.Second, "NODATA for AAAA", addrsAre(r, "lb.example.com.", "192.0.2.1"))

	f.set(t, "lb.example.com.", dns.RcodeNameError)
	testkit.Eventually(t, time.Second, "NXDOMAIN clears the addresses", addrsAre(r, "lb.example.com."))
	testkit.Eventually(t, time.Second, "changed at each change", func() (bool, string) {
		got := c.get()
		return len(got) == 3, fmt.Sprintf("changed calls %v, want 3", got)
	})
}

func TestResolverCapsTheNamesResolved(t *testing.T) {
	f := startFakeDNS(t)
	for _, n := range []string{"a", "b", "c"} {
		f.set(t, n+".example.com.", dns.RcodeSuccess, n+".example.com. 30 IN A 192.0.2.1")
	}
	skipped := func() float64 { return testutil.ToFloat64(resolverSkippedNames.WithLabelValues("cap")) }
	base := skipped()
	r, _ := startResolver(t, []string{f.addr}, 100*time.Millisecond, 5*time.Second, 2)
	r.track("Ingress:ns/a", []string{"a.example.com.", "b.example.com."}, false)
	r.track("Ingress:ns/c", []string{"c.example.com.", "a.example.com."}, false)
	testkit.Eventually(t, time.Second, "a resolved", addrsAre(r, "a.example.com.", "192.0.2.1"))
	testkit.Eventually(t, time.Second, "b resolved", addrsAre(r, "b.example.com.", "192.0.2.1"))
	time.Sleep(300 * time.Millisecond)
	if got := r.addrs("c.example.com."); got != nil {
		t.Errorf("the name beyond the cap has addresses %v", got)
	}
	if n := len(f.asks("c.example.com.", dns.TypeA)); n != 0 {
		t.Errorf("the name beyond the cap was asked %d times", n)
	}
	if got := skipped() - base; got != 1 {
		t.Errorf("skipped names (cap): %v, want 1", got)
	}

	// b leaves: c takes its place.
	r.track("Ingress:ns/a", []string{"a.example.com."}, false)
	testkit.Eventually(t, time.Second, "c resolved once b left", addrsAre(r, "c.example.com.", "192.0.2.1"))
	if got := skipped() - base; got != 0 {
		t.Errorf("skipped names (cap) once within the cap: %v, want 0", got)
	}
}

func TestResolverUntrackDropsTheName(t *testing.T) {
	f := startFakeDNS(t)
	f.set(t, "lb.example.com.", dns.RcodeSuccess, "lb.example.com. 0 IN A 192.0.2.1")
	r, c := startResolver(t, []string{f.addr}, 100*time.Millisecond, 5*time.Second, 10)
	r.track("Ingress:ns/a", []string{"lb.example.com."}, false)
	r.track("Ingress:ns/b", []string{"lb.example.com."}, false)
	testkit.Eventually(t, time.Second, "the first answer", addrsAre(r, "lb.example.com.", "192.0.2.1"))

	// One key still tracks it: it stays.
	r.track("Ingress:ns/a", nil, false)
	if got := r.addrs("lb.example.com."); len(got) != 1 {
		t.Fatalf("addresses while ns/b tracks the name: %v", got)
	}
	r.track("Ingress:ns/b", []string{}, false)
	if got := r.addrs("lb.example.com."); got != nil {
		t.Errorf("addresses of an untracked name: %v, want none", got)
	}
	calls := len(c.get())
	asks := len(f.asks("lb.example.com.", dns.TypeA))
	f.set(t, "lb.example.com.", dns.RcodeSuccess, "lb.example.com. 0 IN A 192.0.2.9")
	time.Sleep(500 * time.Millisecond)
	// A lookup in flight at the untrack may still reach the server.
	if n := len(f.asks("lb.example.com.", dns.TypeA)) - asks; n > 1 {
		t.Errorf("an untracked name asked %d times more", n)
	}
	if got := c.get(); len(got) != calls {
		t.Errorf("changed called for an untracked name: %v", got[calls:])
	}
	if got := r.addrs("lb.example.com."); got != nil {
		t.Errorf("addresses of an untracked name: %v, want none", got)
	}
}

func TestResolverRetriesTruncatedAnswerOverTCP(t *testing.T) {
	f := startFakeDNS(t)
	f.mu.Lock()
	f.truncate = true
	f.mu.Unlock()
	f.set(t, "lb.example.com.", dns.RcodeSuccess, "lb.example.com. 30 IN A 192.0.2.1")
	r, _ := startResolver(t, []string{f.addr}, 100*time.Millisecond, 5*time.Second, 10)
	r.track("Ingress:ns/a", []string{"lb.example.com."}, false)
	testkit.Eventually(t, time.Second, "the answer over TCP", addrsAre(r, "lb.example.com.", "192.0.2.1"))
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tcp == 0 {
		t.Error("no query over TCP")
	}
}

func TestResolverBoundsLookupsInFlight(t *testing.T) {
	f := startFakeDNS(t)
	f.mu.Lock()
	f.delay = 100 * time.Millisecond
	f.mu.Unlock()
	var names []string
	for i := range 30 {
		n := fmt.Sprintf("lb%d.example.com.", i)
		f.set(t, n, dns.RcodeSuccess, n+" 30 IN A 192.0.2.1")
		names = append(names, n)
	}
	r, _ := startResolver(t, []string{f.addr}, 100*time.Millisecond, 5*time.Second, 100)
	r.track("Ingress:ns/a", names[:15], false)
	r.track("Ingress:ns/b", names[15:], false)
	for _, n := range names {
		testkit.Eventually(t, 2*time.Second, n+" resolved", addrsAre(r, n, "192.0.2.1"))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	// A name is two queries, A and AAAA, at once.
	if f.maxInFlight > 2*resolverInFlight {
		t.Errorf("%d queries at once, want at most %d", f.maxInFlight, 2*resolverInFlight)
	}
}

func TestResolverWithoutServersReadsResolvConf(t *testing.T) {
	dir := t.TempDir()
	defer func(old string) { resolvConf = old }(resolvConf)

	resolvConf = filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(resolvConf, []byte("search example.com\nnameserver 127.0.0.53\nnameserver ::1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := newResolver(nil, time.Second, time.Minute, 10, nil)
	if want := []string{"127.0.0.53:53", "[::1]:53"}; !slices.Equal(r.servers, want) {
		t.Errorf("servers %v, want %v", r.servers, want)
	}

	// None there either: nothing is resolved, and the names are counted.
	if err := os.WriteFile(resolvConf, []byte("search example.com\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	noResolver := func() float64 { return testutil.ToFloat64(resolverSkippedNames.WithLabelValues("noresolver")) }
	base := noResolver()
	r, _ = startResolver(t, nil, 100*time.Millisecond, time.Second, 10)
	if len(r.servers) != 0 {
		t.Fatalf("servers %v from a resolv.conf without nameservers", r.servers)
	}
	r.track("Ingress:ns/a", []string{"lb.example.com.", "lb2.example.com."}, false)
	time.Sleep(200 * time.Millisecond)
	if got := r.addrs("lb.example.com."); got != nil {
		t.Errorf("addresses without a resolver: %v", got)
	}
	if got := noResolver() - base; got != 2 {
		t.Errorf("names counted without a resolver: %v, want 2", got)
	}
}

// The gauges a resolver set leave with it.
func TestResolverStopLeavesNoGauges(t *testing.T) {
	f := startFakeDNS(t)
	f.set(t, "lb.example.com.", dns.RcodeSuccess, "lb.example.com. 30 IN A 192.0.2.1")
	base := testutil.ToFloat64(resolverNames)
	r := newResolver([]string{f.addr}, 100*time.Millisecond, time.Second, 10, nil)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		r.run(stop)
	}()
	r.track("Ingress:ns/a", []string{"lb.example.com."}, false)
	testkit.Eventually(t, time.Second, "resolved", addrsAre(r, "lb.example.com.", "192.0.2.1"))
	if got := testutil.ToFloat64(resolverNames) - base; got != 1 {
		t.Errorf("names resolved: %v, want 1", got)
	}
	close(stop)
	<-done
	if got := testutil.ToFloat64(resolverNames) - base; got != 0 {
		t.Errorf("names resolved after stop: %v, want 0", got)
	}
}
