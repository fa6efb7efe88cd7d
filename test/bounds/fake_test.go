package bounds_test

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/test/harness"

	"github.com/miekg/dns"
)

// The fake peer is this test binary run again with fakeRoleEnv set: a
// process of its own, as a peer cluster is, on one UDP address.
const (
	fakeRoleEnv    = "BOUNDS_FAKE_ROLE"
	fakeAddrEnv    = "BOUNDS_FAKE_ADDR"
	fakeTargetsEnv = "BOUNDS_FAKE_TARGETS"

	// rolePeer answers localtargets- A queries with its targets.
	rolePeer = "peer"
	// roleStrayPeer sends a 2-byte datagram from its address to the asker
	// before every answer, as a peer's broken middlebox or an attacker
	// racing the answer can.
	roleStrayPeer = "stray-peer"
	// roleSilentPeer never answers a peer query.
	roleSilentPeer = "silent-peer"

	// countName asks any fake how many peer queries it has received.
	countName = "count.fake.bounds."
)

// fake is a fake peer process.
type fake struct {
	*harness.Process
	Addr string
}

// startFake runs this test binary in role on ip:53, answering targets.
func startFake(t *testing.T, role, ip string, targets ...string) *fake {
	t.Helper()
	addr := net.JoinHostPort(ip, "53")
	p := harness.StartProcess(t, role, os.Args[0], []string{"-test.run=^$"}, "",
		fakeRoleEnv+"="+role, fakeAddrEnv+"="+addr, fakeTargetsEnv+"="+strings.Join(targets, ","))
	f := &fake{Process: p, Addr: addr}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := f.count(); err == nil {
			return f
		} else if time.Now().After(deadline) {
			t.Fatalf("fake %s on %s did not answer: %v\n%s", role, addr, err, p.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// count returns how many peer queries the fake has received.
func (f *fake) count() (int, error) {
	m, err := harness.Ask(f.Addr, countName, dns.TypeTXT, harness.Attempts(1), harness.Timeout(300*time.Millisecond))
	if err != nil {
		return 0, err
	}
	if len(m.Answer) != 1 {
		return 0, fmt.Errorf("count: %v", m)
	}
	return strconv.Atoi(m.Answer[0].(*dns.TXT).Txt[0])
}

// runFake serves a fake role until killed.
func runFake(role string) int {
	conn, err := net.ListenPacket("udp", os.Getenv(fakeAddrEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var targets []string
	if s := os.Getenv(fakeTargetsEnv); s != "" {
		targets = strings.Split(s, ",")
	}
	fmt.Printf("fake %s on %s, targets %v\n", role, conn.LocalAddr(), targets)
	var queries atomic.Int64
	buf := make([]byte, 65535)
	for {
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		q := new(dns.Msg)
		if q.Unpack(buf[:n]) != nil || len(q.Question) != 1 {
			continue
		}
		r := new(dns.Msg)
		r.SetReply(q)
		qn := q.Question[0]
		if strings.EqualFold(qn.Name, countName) {
			r.Answer = []dns.RR{&dns.TXT{Hdr: dns.RR_Header{Name: qn.Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET},
				Txt: []string{strconv.FormatInt(queries.Load(), 10)}}}
			b, _ := r.Pack()
			conn.WriteTo(b, from)
			continue
		}
		queries.Add(1)
		switch role {
		case roleSilentPeer:
			continue
		case roleStrayPeer:
			// Two bytes from the peer's own address and port: no DNS
			// message, but what a reader taking the first datagram as the
			// answer fails on ("dns: short read").
			conn.WriteTo([]byte{0x5a, 0x5a}, from)
			time.Sleep(5 * time.Millisecond)
		}
		if qn.Qtype == dns.TypeA {
			for _, ip := range targets {
				r.Answer = append(r.Answer, &dns.A{Hdr: dns.RR_Header{Name: qn.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5},
					A: net.ParseIP(ip)})
			}
		}
		b, err := r.Pack()
		if err != nil {
			continue
		}
		conn.WriteTo(b, from)
	}
}
