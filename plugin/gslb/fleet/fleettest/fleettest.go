// Package fleettest serves a fleet view (or any handler playing a peer) on
// real sockets for tests, the way a CoreDNS server would.
package fleettest

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/request"

	"github.com/fleetdns/fleetdns/plugin/gslb/fleet"

	"github.com/miekg/dns"
)

// Handler serves p as a CoreDNS server would: through a ScrubWriter, and the
// rcodes p does not write (REFUSED, SERVFAIL, NOTIMP) are written for it.
func Handler(p *fleet.Publisher) dns.Handler {
	return dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		w = request.NewScrubWriter(r, w)
		rc, _ := p.ServeDNS(context.Background(), w, r)
		if !plugin.ClientWrite(rc) {
			m := new(dns.Msg)
			m.SetRcode(r, rc)
			w.WriteMsg(m)
		}
	})
}

// Serve runs h over UDP and TCP on addr ("127.0.0.1:0" picks a port free for
// both) with the TSIG secrets until the test ends, and returns the address.
func Serve(t testing.TB, addr string, h dns.Handler, secrets map[string]string) string {
	t.Helper()
	for try := 0; ; try++ {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			t.Fatalf("listen %s: %v", addr, err)
		}
		l, err := net.Listen("tcp", pc.LocalAddr().String())
		if err != nil {
			pc.Close()
			if try < 20 {
				continue
			}
			t.Fatalf("listen tcp %s: %v", pc.LocalAddr(), err)
		}
		for _, s := range []*dns.Server{
			{PacketConn: pc, Handler: h, TsigSecret: secrets},
			{Listener: l, Handler: h, TsigSecret: secrets, ReadTimeout: 5 * time.Second},
		} {
			started := make(chan struct{})
			s.NotifyStartedFunc = func() { close(started) }
			go s.ActivateAndServe()
			<-started
			t.Cleanup(func() { s.Shutdown() })
		}
		return pc.LocalAddr().String()
	}
}

// Key returns a key file in BIND's tsig-keygen format: one hmac-sha256 key
// with a fresh random secret.
func Key(name string) string {
	b := make([]byte, 32)
	rand.Read(b)
	return fmt.Sprintf("key %q {\n\talgorithm hmac-sha256;\n\tsecret %q;\n};\n", name, base64.StdEncoding.EncodeToString(b))
}

// Keys parses text (from Key) or fails the test.
func Keys(t testing.TB, text string) *fleet.Keys {
	t.Helper()
	k, err := fleet.ParseKeys("test.key", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Hosts returns n hosts of zone (h00000.<zone>, ...), each with two A (the
// second depends on gen), one AAAA and a gslb/* policy: views to publish.
func Hosts(zone string, n, gen int) []fleet.Host {
	hs := make([]fleet.Host, n)
	for i := range hs {
		hs[i] = fleet.Host{
			Name:   fmt.Sprintf("h%05d.%s", i, dns.Fqdn(zone)),
			TTL:    30,
			A:      []netip.Addr{netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}), netip.AddrFrom4([4]byte{198, 19, byte(gen), byte(i)})},
			AAAA:   []netip.Addr{netip.AddrFrom16([16]byte{0: 0xfd, 14: byte(i >> 8), 15: byte(i)})},
			Policy: map[string]string{"gslb/strategy": "roundrobin", "gslb/weight": fmt.Sprint(i % 7)},
		}
	}
	return hs
}
