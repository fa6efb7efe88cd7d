package reliability

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

const (
	zone     = "example.org."
	gslbZone = "gslb.example.org."
	appHost  = "app." + gslbZone
)

// authServer is a GSLB cluster as docs/architecture.md ("Plugin order")
// places it: the stock `any` plugin, localtargets, gslb and k8scrd, transfer allowed to one address;
// its peer "us" is a second coredns process.
type authServer struct {
	srv       *harness.CoreDNS
	addr      string
	xfrClient string // the only address allowed to transfer
	explainer string // the only address allowed explain records
	other     string // a client address allowed neither
}

// bigTXT is a TXT RRset larger than any UDP buffer: 40 strings of 200 bytes.
func bigTXT() []string {
	var out []string
	for i := range 40 {
		out = append(out, fmt.Sprintf("%02d%s", i, strings.Repeat("x", 198)))
	}
	return out
}

func manyA() []string {
	var out []string
	for i := range 100 {
		out = append(out, fmt.Sprintf("192.0.2.%d", i+1))
	}
	return out
}

func startAuthServer(t *testing.T) *authServer {
	t.Helper()
	harness.RequirePlugins(t, "any", "k8scrd", "localtargets", "gslb", "transfer")
	a := &authServer{xfrClient: harness.NewIP(t), explainer: harness.NewIP(t), other: harness.NewIP(t)}

	usIP, usDir := harness.NewIP(t), t.TempDir()
	testkit.WriteFile(t, usDir, "hosts.yaml", testkit.DNSEndpoint("reliability", "hosts", nil, testkit.Endpoint{DNSName: appHost, RecordType: "A", TTL: 7, Targets: []string{"10.20.0.1"}}))
	harness.StartCoreDNS(t, fmt.Sprintf(`%s:53 {
    bind %s
    localtargets
    k8scrd {
        directory %s
    }
}
`, gslbZone, usIP, usDir), harness.WithProbe("localtargets-"+appHost, dns.TypeA))

	ip, dir := harness.NewIP(t), t.TempDir()
	testkit.WriteFile(t, dir, "zone.yaml", testkit.DNSEndpoint("reliability", "zone", nil,
		testkit.Endpoint{DNSName: "www.example.org", RecordType: "A", TTL: 60, Targets: []string{"192.0.2.1"}},
		testkit.Endpoint{DNSName: "www.example.org", RecordType: "AAAA", TTL: 60, Targets: []string{"2001:db8::1"}},
		testkit.Endpoint{DNSName: "big.example.org", RecordType: "TXT", TTL: 60, Targets: bigTXT()},
		testkit.Endpoint{DNSName: "many.example.org", RecordType: "A", TTL: 60, Targets: manyA()},
		testkit.Endpoint{DNSName: "example.org", RecordType: "MX", TTL: 60, Targets: []string{"10 mail.example.org"}},
		testkit.Endpoint{DNSName: "mail.example.org", RecordType: "A", TTL: 60, Targets: []string{"192.0.2.25"}},
		testkit.Endpoint{DNSName: appHost, RecordType: "A", TTL: 7, Targets: []string{"10.10.0.1", "10.10.0.2"}},
	))
	a.srv = harness.StartCoreDNS(t, fmt.Sprintf(`%s:53 %s:53 {
    bind %s
    any
    localtargets
    gslb %s {
        geotag eu
        peer us %s
        strategy roundRobin
        timeout 500ms
        refresh 1s
        ttl 5
        explain %s/32
    }
    k8scrd %s %s {
        directory %s
    }
    transfer %s {
        to %s
    }
    errors
}
`, zone, gslbZone, ip, gslbZone, usIP, a.explainer, zone, gslbZone, dir, zone, a.xfrClient),
		harness.WithProbe("www."+zone, dns.TypeA))
	a.addr = a.srv.Addr
	// Wait until gslb has asked its peer: the answer carries both clusters.
	testkit.Eventually(t, 15*time.Second, "every cluster's app targets", func() (bool, string) {
		m, err := harness.Ask(a.addr, appHost, dns.TypeA)
		return err == nil && len(addrsOf(m)) == 3, "app: " + summary(m, err)
	})
	return a
}

// from is a client bound to a source address.
func from(src, network string) *dns.Client {
	c := &dns.Client{Net: network, Timeout: 2 * time.Second, UDPSize: 65535}
	if network == "tcp" {
		c.Dialer = &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 2 * time.Second}
	} else {
		c.Dialer = &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(src)}, Timeout: 2 * time.Second}
	}
	return c
}

// alive fails the test when the server does not answer www A right.
func (a *authServer) alive(t *testing.T, after string) {
	t.Helper()
	m, err := harness.Ask(a.addr, "www."+zone, dns.TypeA)
	if err != nil || m.Rcode != dns.RcodeSuccess || !slices.Equal(addrsOf(m), []string{"192.0.2.1"}) {
		t.Fatalf("after %s the server no longer answers www A: %s\n--- log ---\n%s", after, summary(m, err), a.srv.Log())
	}
	if !a.srv.Running() {
		t.Fatalf("after %s the server exited: %v", after, a.srv.ExitErr())
	}
}

// rawExchange sends raw bytes over UDP and returns the raw reply, or nil
// when none came within wait.
func rawExchange(t *testing.T, addr string, pkt []byte, wait time.Duration) []byte {
	t.Helper()
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(pkt); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, 65535)
	n, err := c.Read(buf)
	if err != nil {
		return nil
	}
	return buf[:n]
}

func hdr(qd, an, ns, ar uint16) []byte {
	b := []byte{0x10, 0x92, 0x01, 0x00}
	for _, n := range []uint16{qd, an, ns, ar} {
		b = binary.BigEndian.AppendUint16(b, n)
	}
	return b
}

func packed(t *testing.T, m *dns.Msg) []byte {
	t.Helper()
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func ecsQuery(t *testing.T, name string, family uint16, bits uint8, addr net.IP) []byte {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	m.SetEdns0(1232, false)
	m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: family, SourceNetmask: bits, Address: addr})
	return packed(t, m)
}

// TestBadClientInput sends what broken and hostile clients send to the
// built binary: every query type, ANY, AXFR from a stranger, malformed EDNS,
// impossible ECS prefixes, names at the 255-byte limit, compression loops.
// Each is answered correctly or refused, and the server keeps answering.
func TestBadClientInput(t *testing.T) {
	a := startAuthServer(t)

	t.Run("EveryQueryType", func(t *testing.T) {
		types := []uint16{}
		for qt := range uint16(260) {
			types = append(types, qt)
		}
		types = append(types, 32768, 32769, 65280, 65534, 65535)
		rcodes := map[string]int{}
		for _, name := range []string{"www." + zone, appHost, "nope." + zone, zone} {
			for _, qt := range types {
				m := new(dns.Msg)
				m.SetQuestion(name, qt)
				m.SetEdns0(1232, false)
				r, _, err := from(a.other, "udp").Exchange(m, a.addr)
				if err != nil {
					t.Errorf("%s type %d: %v", name, qt, err)
					continue
				}
				rcodes[dns.RcodeToString[r.Rcode]]++
				if r.Rcode == dns.RcodeServerFailure {
					t.Errorf("%s type %d: SERVFAIL", name, qt)
				}
				if qt == dns.TypeANY && r.Rcode == dns.RcodeSuccess {
					// RFC 8482 §4.2: one synthesized HINFO.
					if len(r.Answer) != 1 || r.Answer[0].Header().Rrtype != dns.TypeHINFO || !strings.Contains(r.Answer[0].(*dns.HINFO).Os, "RFC 8482") {
						t.Errorf("%s ANY: want one HINFO citing RFC 8482, got\n%s", name, r)
					}
				}
			}
		}
		t.Logf("rcodes over %d queries: %v", 4*len(types), rcodes)
		a.alive(t, "every query type")
	})

	t.Run("AXFRFromAStranger", func(t *testing.T) {
		m := new(dns.Msg)
		m.SetAxfr(zone)
		r, _, err := from(a.other, "tcp").Exchange(m, a.addr)
		if err != nil {
			t.Fatalf("AXFR from %s: %v", a.other, err)
		}
		if r.Rcode != dns.RcodeRefused || len(r.Answer) > 0 {
			t.Errorf("AXFR from a stranger: rcode %s with %d records, want REFUSED and none", dns.RcodeToString[r.Rcode], len(r.Answer))
		}
		// Over UDP neither.
		r, _, err = from(a.other, "udp").Exchange(m, a.addr)
		if err == nil && len(r.Answer) > 0 {
			t.Errorf("AXFR over UDP answered with %d records", len(r.Answer))
		}
		// The allowed address gets the zone: SOA first and last.
		tr := &dns.Transfer{}
		conn, err := net.DialTCP("tcp", &net.TCPAddr{IP: net.ParseIP(a.xfrClient)}, net.TCPAddrFromAddrPort(netip.MustParseAddrPort(a.addr)))
		if err != nil {
			t.Fatal(err)
		}
		tr.Conn = &dns.Conn{Conn: conn}
		env, err := tr.In(m, a.addr)
		if err != nil {
			t.Fatal(err)
		}
		var rrs []dns.RR
		for e := range env {
			if e.Error != nil {
				t.Fatalf("AXFR from the allowed address: %v", e.Error)
			}
			rrs = append(rrs, e.RR...)
		}
		if len(rrs) < 3 || rrs[0].Header().Rrtype != dns.TypeSOA || rrs[len(rrs)-1].Header().Rrtype != dns.TypeSOA {
			t.Errorf("AXFR from the allowed address: %d records, want SOA ... SOA", len(rrs))
		}
		a.alive(t, "AXFR attempts")
	})

	t.Run("MalformedPackets", func(t *testing.T) {
		long := "www." + zone
		for len(long) < 253-10 {
			long = "abcdefgh." + long
		}
		for len(long) < 254 {
			long = "x" + long
		}
		over := hdr(1, 0, 0, 0)
		for range 4 {
			over = append(over, 63)
			over = append(over, []byte(strings.Repeat("a", 63))...)
		}
		over = append(over, 0, 0, 1, 0, 1)

		q := func(name string, qt uint16) *dns.Msg { m := new(dns.Msg); m.SetQuestion(name, qt); return m }
		twoOPT := q("www."+zone, dns.TypeA)
		twoOPT.SetEdns0(1232, false)
		twoOPT.Extra = append(twoOPT.Extra, &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT, Class: 512}})
		v1 := q("www."+zone, dns.TypeA)
		v1.SetEdns0(1232, false)
		v1.IsEdns0().SetVersion(1)
		optOverrun := q("www."+zone, dns.TypeA)
		optOverrun.SetEdns0(1232, false)
		optOverrun.IsEdns0().Option = append(optOverrun.IsEdns0().Option, &dns.EDNS0_LOCAL{Code: 65001, Data: []byte("12345678")})
		overrun := packed(t, optOverrun)
		overrun[len(overrun)-9] = 0x40 // the option's length now runs past the OPT's RDATA

		ecs33 := ecsQuery(t, appHost, 1, 32, net.IPv4(192, 0, 2, 1).To4())
		ecs33[len(ecs33)-6] = 33
		ecs129 := ecsQuery(t, appHost, 2, 128, net.ParseIP("2001:db8::1"))
		ecs129[len(ecs129)-18] = 129
		ecsFam3 := ecsQuery(t, appHost, 1, 24, net.IPv4(192, 0, 2, 0).To4())
		ecsFam3[len(ecsFam3)-6] = 3
		ecsBits := ecsQuery(t, appHost, 1, 20, net.IPv4(10, 1, 240, 0).To4())
		ecsBits[len(ecsBits)-1] = 0xff // miekg/dns masks when packing: set the bits beyond /20 on the wire
		ecsFam0 := ecsQuery(t, appHost, 1, 8, net.IPv4(10, 0, 0, 0).To4())
		ecsFam0[len(ecsFam0)-4] = 0

		cases := []struct {
			name string
			pkt  []byte
			// want: the rcode wanted; -1 = any answer or none, but not SERVFAIL
			want int
		}{
			{"name of 255 octets", packed(t, q(long, dns.TypeA)), dns.RcodeNameError},
			{"name of 256 octets", over, dns.RcodeFormatError},
			{"compression pointer to itself", append(hdr(1, 0, 0, 0), 0xc0, 0x0c, 0, 1, 0, 1), dns.RcodeFormatError},
			{"two compression pointers in a loop", append(hdr(1, 0, 0, 0), 1, 'a', 0xc0, 0x10, 1, 'b', 0xc0, 0x0c, 0, 1, 0, 1), dns.RcodeFormatError},
			{"compression pointer past the end", append(hdr(1, 0, 0, 0), 0xc0, 0xff, 0, 1, 0, 1), dns.RcodeFormatError},
			// RFC 6891 §6.1.1 asks FORMERR; stock CoreDNS (miekg/dns) answers
			// from the first OPT. Recorded, not required: no fleetdns plugin reads a second OPT.
			{"two OPT records", packed(t, twoOPT), -1},
			{"EDNS version 1", packed(t, v1), dns.RcodeBadVers},
			{"EDNS option longer than the OPT", overrun, dns.RcodeFormatError},
			{"ECS IPv4 /33", ecs33, dns.RcodeFormatError},
			{"ECS IPv6 /129", ecs129, dns.RcodeFormatError},
			{"ECS family 3", ecsFam3, dns.RcodeFormatError},
			{"ECS address bits beyond the prefix", ecsBits, dns.RcodeFormatError},
			{"ECS family 0 with a prefix", ecsFam0, dns.RcodeFormatError},
			{"no question", hdr(0, 0, 0, 0), -1},
			{"header cut short", hdr(1, 0, 0, 0)[:7], -1},
			{"counts larger than the packet", append(hdr(1, 9, 9, 9), packed(t, q("www."+zone, dns.TypeA))[12:]...), -1},
			{"two questions", append(hdr(2, 0, 0, 0), append(packed(t, q("www."+zone, dns.TypeA))[12:], packed(t, q("mail."+zone, dns.TypeA))[12:]...)...), -1},
		}
		for _, tc := range cases {
			raw := rawExchange(t, a.addr, tc.pkt, time.Second)
			got := "no reply"
			if raw != nil {
				r := new(dns.Msg)
				if err := r.Unpack(raw); err != nil {
					// The reply to a broken query may carry just a header.
					if len(raw) >= 12 {
						rc := int(raw[3] & 0x0f)
						got = dns.RcodeToString[rc]
						if rc == dns.RcodeServerFailure {
							t.Errorf("%s: SERVFAIL", tc.name)
						}
						if tc.want >= 0 && rc != tc.want {
							t.Errorf("%s: rcode %s, want %s", tc.name, got, dns.RcodeToString[tc.want])
						}
					} else {
						t.Errorf("%s: reply of %d bytes does not unpack: %v", tc.name, len(raw), err)
					}
				} else {
					got = dns.RcodeToString[r.Rcode]
					if r.Rcode == dns.RcodeServerFailure {
						t.Errorf("%s: SERVFAIL", tc.name)
					}
					if tc.want >= 0 && r.Rcode != tc.want {
						t.Errorf("%s: rcode %s, want %s\n%s", tc.name, got, dns.RcodeToString[tc.want], r)
					}
				}
			} else if tc.want >= 0 {
				t.Errorf("%s: no reply, want %s", tc.name, dns.RcodeToString[tc.want])
			}
			if got == "BADSIG" {
				got = "BADVERS" // extended rcode 16 has both names
			}
			t.Logf("%-40s -> %s", tc.name, got)
			a.alive(t, tc.name)
		}
	})

	t.Run("UDPAnswersBoundedByEDNS", func(t *testing.T) {
		for _, name := range []string{"big." + zone, "many." + zone} {
			qt := dns.TypeTXT
			if strings.HasPrefix(name, "many") {
				qt = dns.TypeA
			}
			full, err := harness.Ask(a.addr, name, qt, harness.TCP)
			if err != nil || full.Truncated {
				t.Fatalf("%s over TCP: %s, truncated %v", name, summary(full, err), err == nil && full.Truncated)
			}
			fullLen := full.Len()
			for _, size := range []uint16{0, 512, 1232, 4096, 65535} {
				m := new(dns.Msg)
				m.SetQuestion(name, qt)
				limit := dns.MinMsgSize
				if size > 0 {
					m.SetEdns0(size, false)
					limit = int(size)
				}
				raw := rawExchange(t, a.addr, packed(t, m), 2*time.Second)
				if raw == nil {
					t.Errorf("%s EDNS %d: no reply", name, size)
					continue
				}
				r := new(dns.Msg)
				if err := r.Unpack(raw); err != nil {
					t.Errorf("%s EDNS %d: %v", name, size, err)
					continue
				}
				if len(raw) > limit {
					t.Errorf("%s EDNS %d: UDP answer of %d bytes, above the client's %d", name, size, len(raw), limit)
				}
				if fits := fullLen <= limit; fits == r.Truncated {
					t.Errorf("%s EDNS %d: TC=%v for a %d-byte answer (whole over TCP: %d bytes)", name, size, r.Truncated, len(raw), fullLen)
				}
				t.Logf("%s EDNS %5d: %5d bytes over UDP, TC=%v, %d of %d records (TCP: %d bytes)", name, size, len(raw), r.Truncated, len(r.Answer), len(full.Answer), fullLen)
			}
		}
		a.alive(t, "large answers")
	})

	t.Run("ExplainOnlyToAllowedClients", func(t *testing.T) {
		m := new(dns.Msg)
		m.SetQuestion("_gslb-explain."+appHost, dns.TypeTXT)
		r, _, err := from(a.explainer, "udp").Exchange(m, a.addr)
		if err != nil || len(r.Answer) == 0 || r.Answer[0].Header().Rrtype != dns.TypeTXT {
			t.Errorf("explain from the allowed %s: %v\n%v", a.explainer, err, r)
		}
		for _, src := range []string{a.other, a.xfrClient} {
			r, _, err := from(src, "udp").Exchange(m, a.addr)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Answer) > 0 {
				t.Errorf("explain record given to %s, outside the explain ACL:\n%s", src, r)
			}
		}
	})

	t.Run("Amplification", func(t *testing.T) {
		// Every type at every name, over UDP with the largest EDNS buffer
		// (65535) and with the common 1232: the largest answer over the
		// query that asked for it.
		type worst struct {
			what      string
			q, r      int
			truncated bool
		}
		best := map[uint16]worst{}
		for _, size := range []uint16{1232, 4096, 65535} {
			for _, name := range []string{"www." + zone, "big." + zone, "many." + zone, appHost, zone, "mail." + zone, "nope." + zone} {
				for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeTXT, dns.TypeMX, dns.TypeNS, dns.TypeSOA, dns.TypeANY, dns.TypeSRV, dns.TypeCAA} {
					m := new(dns.Msg)
					m.SetQuestion(name, qt)
					m.SetEdns0(size, true)
					pkt := packed(t, m)
					raw := rawExchange(t, a.addr, pkt, 2*time.Second)
					if raw == nil {
						continue
					}
					r := new(dns.Msg)
					r.Unpack(raw)
					w := best[size]
					if float64(len(raw))/float64(len(pkt)) > float64(w.r)/float64(max(w.q, 1)) {
						best[size] = worst{what: name + " " + dns.TypeToString[qt], q: len(pkt), r: len(raw), truncated: r.Truncated}
					}
				}
			}
		}
		for _, size := range []uint16{1232, 4096, 65535} {
			w := best[size]
			t.Logf("amplification at EDNS %5d: %.1fx (%s: %d-byte query, %d-byte UDP answer, TC=%v)", size, float64(w.r)/float64(w.q), w.what, w.q, w.r, w.truncated)
		}
	})

}
