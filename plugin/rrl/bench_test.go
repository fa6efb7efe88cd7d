package rrl

import (
	"context"
	"fmt"
	"testing"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin/test"

	"github.com/miekg/dns"
)

// BenchmarkServeDNS is rrl's cost per UDP query on the query path: one
// account (the same name, the same client network), and distinct names
// (an account each, as a flood of names that exist would make), in a
// table of the default size.
func BenchmarkServeDNS(b *testing.B) {
	r, err := parse(caddy.NewTestController("dns", "rrl {\n responses_per_second 1000000000\n}"))
	if err != nil {
		b.Fatal(err)
	}
	r.Zones = []string{"example.org."}
	answer := test.A("www.example.org. 30 IN A 10.0.0.1")
	r.Next = test.HandlerFunc(func(_ context.Context, w dns.ResponseWriter, m *dns.Msg) (int, error) {
		res := new(dns.Msg)
		res.SetReply(m)
		res.Answer = []dns.RR{answer}
		w.WriteMsg(res)
		return dns.RcodeSuccess, nil
	})
	w := &test.ResponseWriter{RemoteIP: "10.1.1.1"}
	names := make([]*dns.Msg, 4096)
	for i := range names {
		names[i] = new(dns.Msg)
		names[i].SetQuestion(fmt.Sprintf("host%d.example.org.", i), dns.TypeA)
	}
	ctx := context.Background()
	b.Run("one account", func(b *testing.B) {
		m := names[0]
		b.ReportAllocs()
		for b.Loop() {
			r.ServeDNS(ctx, w, m)
		}
	})
	b.Run("distinct names", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			r.ServeDNS(ctx, w, names[i%len(names)])
			i++
		}
	})
}
