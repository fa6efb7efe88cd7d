package fleet_test

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"

	"github.com/fleetdns/fleetdns/plugin/gslb/fleet"
	"github.com/fleetdns/fleetdns/plugin/gslb/fleet/fleettest"

	"github.com/miekg/dns"
)

// BenchmarkSet10000 is a change of one host in a view of 10,000: the
// normalization, the encoding and the diff for the journal.
func BenchmarkSet10000(b *testing.B) {
	p := fleet.NewPublisher(zone, nil, fleet.Limits{})
	views := [2][]fleet.Host{hosts(10000, 0), hosts(10000, 0)}
	views[1][5000].A = views[1][5000].A[:1]
	p.Set(views[0])
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, changed := p.Set(views[(i+1)%2]); !changed {
			b.Fatal("not changed")
		}
	}
}

// BenchmarkEncode10000 is the first view of 10,000 hosts.
func BenchmarkEncode10000(b *testing.B) {
	hs := hosts(10000, 0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		fleet.NewPublisher(zone, nil, fleet.Limits{}).Set(hs)
	}
}

// BenchmarkAXFR10000 is a Follower's first Check of a view of 10,000 hosts
// over loopback (SOA query, AXFR, validation, decoding), signed.
func BenchmarkAXFR10000(b *testing.B) {
	keys := fleettest.Keys(b, fleettest.Key("fleet"))
	p := fleet.NewPublisher(zone, keys, fleet.Limits{})
	p.Set(hosts(10000, 0))
	addr := fleettest.Serve(b, "127.0.0.1:0", fleettest.Handler(p), keys.Secrets())
	octets := axfrOctets(b, addr, keys)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := fleet.NewFollower(zone, addr, keys, fleet.Limits{}).Check(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(octets), "octets")
}

// BenchmarkIXFR10000 is a Follower's Check after one host of 10,000 changed.
func BenchmarkIXFR10000(b *testing.B) {
	keys := fleettest.Keys(b, fleettest.Key("fleet"))
	p := fleet.NewPublisher(zone, keys, fleet.Limits{})
	views := [2][]fleet.Host{hosts(10000, 0), hosts(10000, 0)}
	views[1][5000].A = views[1][5000].A[:1]
	p.Set(views[0])
	addr := fleettest.Serve(b, "127.0.0.1:0", fleettest.Handler(p), keys.Secrets())
	f := fleet.NewFollower(zone, addr, keys, fleet.Limits{})
	if _, _, err := f.Check(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		p.Set(views[(i+1)%2])
		b.StartTimer()
		if _, changed, err := f.Check(context.Background()); err != nil || !changed {
			b.Fatal(changed, err)
		}
	}
}

// axfrOctets transfers the view at addr and counts the octets on the wire.
func axfrOctets(tb testing.TB, addr string, keys *fleet.Keys) int {
	m := new(dns.Msg)
	m.SetAxfr(fleet.Name(zone))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	co := &dns.Conn{Conn: c, TsigSecret: keys.Secrets()}
	keys.Sign(m)
	if err := co.WriteMsg(m); err != nil {
		tb.Fatal(err)
	}
	total, soas := 0, 0
	for soas < 2 {
		var l uint16
		if err := binary.Read(c, binary.BigEndian, &l); err != nil {
			tb.Fatal(err)
		}
		buf := make([]byte, l)
		if _, err := io.ReadFull(c, buf); err != nil {
			tb.Fatal(err)
		}
		total += 2 + int(l)
		r := new(dns.Msg)
		if err := r.Unpack(buf); err != nil {
			tb.Fatal(err)
		}
		for _, rr := range r.Answer {
			if rr.Header().Rrtype == dns.TypeSOA {
				soas++
			}
		}
	}
	return total
}
