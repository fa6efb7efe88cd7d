package gslb

import (
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fakeParent is the parent zone's server: it answers the GSLB zone's NS
// query with a referral (NS in authority, glue in additional).
type fakeParent struct {
	addr   string
	mu     sync.Mutex
	ns     map[string]string // name server -> glue address ("" for none)
	silent bool
}

func startParent(t *testing.T, ns map[string]string) *fakeParent {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &fakeParent{addr: pc.LocalAddr().String(), ns: ns}
	started := make(chan struct{})
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(p.serve), NotifyStartedFunc: func() { close(started) }}
	go srv.ActivateAndServe()
	<-started
	t.Cleanup(func() { srv.Shutdown() })
	return p
}

func (p *fakeParent) set(ns map[string]string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ns = ns
}

func (p *fakeParent) serve(w dns.ResponseWriter, r *dns.Msg) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.silent {
		return
	}
	m := new(dns.Msg)
	m.SetReply(r)
	q := r.Question[0]
	for _, n := range slices.Sorted(maps.Keys(p.ns)) {
		glue := p.ns[n]
		if q.Qtype == dns.TypeNS && q.Name == zone {
			m.Ns = append(m.Ns, &dns.NS{Hdr: dns.RR_Header{Name: zone, Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: 3600}, Ns: n})
			if glue != "" {
				m.Extra = append(m.Extra, &dns.A{Hdr: dns.RR_Header{Name: n, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 3600}, A: net.ParseIP(glue)})
			}
		}
		if q.Qtype == dns.TypeA && q.Name == n && glue == "" {
			// Out-of-bailiwick name server: its address by a direct query.
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: n, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 3600}, A: net.ParseIP("127.0.0.33")})
		}
	}
	w.WriteMsg(m)
}

func peerTags(g *GSLB) []string {
	var tags []string
	for _, p := range g.peers.Load().list {
		tags = append(tags, p.tag+"="+p.addr())
	}
	return tags
}

func TestPeersFromNSDelegation(t *testing.T) {
	us := startPeerAt(t, "127.0.0.21:0", map[string][]string{app: {"10.0.2.1"}})
	_, port, _ := net.SplitHostPort(us.addr)
	ap := startPeerAt(t, "127.0.0.22:"+port, map[string][]string{app: {"10.0.3.1"}})
	parent := startParent(t, map[string]string{
		"gslb-ns-eu." + zone: "127.0.0.20",
		"gslb-ns-us." + zone: "127.0.0.21",
		// k8gb's naming: gslb-ns-<geotag>-<zone with dashes>.<parent>
		"gslb-ns-ap-gslb-example-com.example.com.": "127.0.0.22",
		"ns1.example.net.":                         "127.0.0.99", // no geo tag: not a peer
	})
	g, _ := newGSLB(t, fmt.Sprintf(`gslb %s {
		geotag eu
		peers_from_ns %s {
			refresh 1s
			port %s
			allow 127.0.0.0/8
		}
		timeout 300ms
		refresh 300ms
	}`, zone, parent.addr, port), newFakeStore(host(app, "10.0.1.1")))
	waitReady(t, g)

	want := []string{"ap=127.0.0.22:" + port, "us=127.0.0.21:" + port}
	if got := peerTags(g); !slices.Equal(got, want) {
		t.Fatalf("peers %v, want %v (own tag eu excluded)", got, want)
	}
	if got := addrs(ask(t, g, app, dns.TypeA)); !slices.Equal(got, []string{"10.0.1.1", "10.0.3.1", "10.0.2.1"}) {
		t.Errorf("got %v, want every cluster's targets", got)
	}
	if v := testutil.ToFloat64(parentLink.WithLabelValues(zone, "eu")); v != 1 {
		t.Errorf("parent_link %v, want 1", v)
	}

	// ap leaves the delegation, and eu's own name server too.
	parent.set(map[string]string{"gslb-ns-us." + zone: "127.0.0.21"})
	testkit.Eventually(t, 5*time.Second, "ap dropped", func() bool { return slices.Equal(peerTags(g), want[1:]) })
	if got := addrs(ask(t, g, app, dns.TypeA)); !slices.Equal(got, []string{"10.0.1.1", "10.0.2.1"}) {
		t.Errorf("after ap left: got %v", got)
	}
	testkit.Eventually(t, 5*time.Second, "parent_link 0", func() bool { return testutil.ToFloat64(parentLink.WithLabelValues(zone, "eu")) == 0 })

	// The parent stops answering: the last good set is kept.
	errs := testutil.ToFloat64(discoveryErrors.WithLabelValues(zone))
	parent.mu.Lock()
	parent.silent = true
	parent.mu.Unlock()
	testkit.Eventually(t, 5*time.Second, "discovery error counted", func() bool { return testutil.ToFloat64(discoveryErrors.WithLabelValues(zone)) > errs })
	if got := peerTags(g); !slices.Equal(got, want[1:]) {
		t.Errorf("parent unreachable: peers %v, want the last good set %v", got, want[1:])
	}

	// It answers again with ap back: ap is a peer again, asked at once.
	parent.mu.Lock()
	parent.silent = false
	parent.ns = map[string]string{"gslb-ns-us." + zone: "127.0.0.21", "gslb-ns-ap." + zone: "127.0.0.22", "gslb-ns-eu." + zone: "127.0.0.20"}
	parent.mu.Unlock()
	testkit.Eventually(t, 5*time.Second, "ap back and answering", func() bool {
		return slices.Equal(addrs(ask(t, g, app, dns.TypeA)), []string{"10.0.1.1", "10.0.3.1", "10.0.2.1"})
	})
	_ = ap
}

func TestDiscoveryOutOfBailiwickNameServer(t *testing.T) {
	parent := startParent(t, map[string]string{"gslb-ns-us-gslb-example-com.example.com.": ""})
	g := New(zone)
	g.geotag = "eu"
	g.disc = &discovery{servers: []string{parent.addr}, refresh: time.Hour, port: "5300", allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	var err error
	if g.ns, err = newNSPattern(defaultNSPattern, zone); err != nil {
		t.Fatal(err)
	}
	g.derive()
	d, err := g.discover(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got := d.peers["us"]; !slices.Equal(got, []string{"127.0.0.33:5300"}) || d.own {
		t.Errorf("got %v own %v, want us at 127.0.0.33:5300 from a direct query", d.peers, d.own)
	}
}

func TestDiscoveryParentUnreachableIsError(t *testing.T) {
	g := New(zone)
	g.geotag = "eu"
	g.timeout = 100 * time.Millisecond
	g.disc = &discovery{servers: []string{"127.0.0.1:1"}, refresh: time.Hour, port: "53"}
	g.ns, _ = newNSPattern(defaultNSPattern, zone)
	if _, err := g.discover(t.Context()); err == nil {
		t.Error("no error from an unreachable parent")
	}
}
