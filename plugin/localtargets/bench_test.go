package localtargets

import (
	"context"
	"net/netip"
	"testing"

	"github.com/fleetdns/fleetdns/internal/store/storetest"

	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
)

// BenchmarkServeDNSWithChecks is the query path of a localtargets-
// answer under health checks: the stanza's check (all healthy, one
// unhealthy) and a host with its own health/* properties.
func BenchmarkServeDNSWithChecks(b *testing.B) {
	targets := []string{"198.18.0.1", "198.18.0.2", "198.18.0.3", "198.18.0.4"}
	stanza := storetest.Host("app.example.org.", targets...)
	own := storetest.Host("own.example.org.", targets...)
	own.Properties[propCheck] = "http 8080 /healthz own.example.org"
	s := storetest.New(stanza, own)
	lt := newTestLocalTargets(s)
	c := newChecker(tcpHealthCheck(80), lt.Zones, lt.prefix, s)
	lt.health = c
	for _, a := range targets {
		ip := netip.MustParseAddr(a)
		stubCheck(c, ip).healthy.Store(true)
		hc := c.hc.forHost(own)
		c.mu.Lock()
		key := hc.spec
		key.addr = ip
		c.add(key).healthy.Store(true)
		c.publish(map[string]cachedHost{own.Name: {props: hostProps(own), hc: hc}})
		c.mu.Unlock()
	}
	for _, tc := range []struct{ name, qname string }{
		{"healthy", "localtargets-app.example.org."},
		{"own", "localtargets-own.example.org."},
	} {
		b.Run(tc.name, func(b *testing.B) {
			m := new(dns.Msg)
			m.SetQuestion(tc.qname, dns.TypeA)
			w := &test.ResponseWriter{}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				lt.ServeDNS(ctx, w, m)
			}
		})
	}
	b.Run("one_unhealthy", func(b *testing.B) {
		c.mu.Lock()
		key := c.hc.def
		key.addr = netip.MustParseAddr(targets[2])
		c.checks[key].healthy.Store(false)
		c.mu.Unlock()
		m := new(dns.Msg)
		m.SetQuestion("localtargets-app.example.org.", dns.TypeA)
		w := &test.ResponseWriter{}
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			lt.ServeDNS(ctx, w, m)
		}
	})
}
