package gslb

import (
	"context"
	"testing"

	clog "github.com/coredns/coredns/plugin/pkg/log"
	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
)

// discard is a ResponseWriter that drops the reply, so the benchmark
// measures ServeDNS alone.
type discard struct{ test.ResponseWriter }

func (discard) WriteMsg(*dns.Msg) error { return nil }

func benchServe(b *testing.B, extra string, h string, qtype uint16, opts ...queryOpt) {
	clog.Discard()
	st := newFakeStore(host(app, "10.0.1.1", "fd00::1:1"),
		withProps(host("w."+zone, "10.0.1.1"), propStrategy, "weighted", propWeight, "eu=50,us=30,ap=20"))
	g, _, _, _ := twoPeers(b, extra, st)
	m := new(dns.Msg)
	m.SetQuestion(h, qtype)
	w := &discard{}
	for _, o := range opts {
		o(m, &w.ResponseWriter)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		g.ServeDNS(ctx, w, m)
	}
}

// BenchmarkServeDNS: steady state (every peer answer cached), two peers.
func BenchmarkServeDNS(b *testing.B) {
	b.Run("roundRobin", func(b *testing.B) { benchServe(b, "strategy roundRobin", app, dns.TypeA) })
	b.Run("failover", func(b *testing.B) { benchServe(b, "strategy failover\nprimary us eu ap", app, dns.TypeA) })
	b.Run("weighted-property", func(b *testing.B) { benchServe(b, "", "w."+zone, dns.TypeA) })
	b.Run("geoip-ecs", func(b *testing.B) {
		benchServe(b, geoCIDRs, app, dns.TypeA, withECS(1, "10.2.3.0", 24))
	})
	// A composed host beside the plain failover one above: tiers drawn
	// by weight, a fallback order and an all-down answer.
	b.Run("composed-tiers", func(b *testing.B) {
		benchServe(b, "strategy failover\nprimary us+eu ap\nweight us 70 eu 30\nall_down 198.18.9.9", app, dns.TypeA)
	})
	b.Run("composed-tiers-combined", func(b *testing.B) {
		benchServe(b, "strategy failover\nprimary us+eu ap\nall_down 198.18.9.9", app, dns.TypeA)
	})
	b.Run("geoip-fallback", func(b *testing.B) {
		benchServe(b, geoCIDRs+"\nfallback ap us eu", "w."+zone, dns.TypeA, withECS(1, "10.3.0.0", 24))
	})
	b.Run("fallthrough", func(b *testing.B) { benchServe(b, "", "nothere."+zone, dns.TypeA) })
}

// BenchmarkDecide: the strategy's choice alone, a composed policy beside a
// plain failover one, three tags with targets.
func BenchmarkDecide(b *testing.B) {
	views := []tagView{tv("eu", "198.18.1.1"), tv("us", "198.18.2.1"), tv("ap", "198.18.3.1")}
	for _, bc := range []struct{ name, body string }{
		{"failover", "strategy failover\nprimary us eu ap"},
		{"composed-tiers", "strategy failover\nprimary us+eu ap\nweight us 70 eu 30\nall_down 198.18.9.9"},
		{"composed-tiers-combined", "strategy failover\nprimary us+eu ap"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			g, pol := composed(b, bc.body)
			cl := &client{}
			for b.Loop() {
				g.decide(pol, views, cl, false)
			}
		})
	}
}
