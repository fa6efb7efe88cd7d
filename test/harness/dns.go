package harness

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
	"github.com/miekg/dns"
)

// Query describes one DNS query; QueryOptions change it.
type Query struct {
	Net      string // "udp" (default) or "tcp"
	RD       bool   // recursion desired (default true, as dig sets it)
	EDNS     bool   // add an OPT record
	UDPSize  uint16 // EDNS buffer size (default 1232 when EDNS)
	DO       bool   // DNSSEC OK
	ECS      *dns.EDNS0_SUBNET
	Timeout  time.Duration // per exchange (default 2 s)
	Attempts int           // UDP attempts before giving up (default 2)
}

// QueryOption changes a Query.
type QueryOption func(*Query)

// TCP sends the query over TCP.
func TCP(q *Query) { q.Net = "tcp" }

// NoRD clears the RD bit, as a resolver asking an authoritative server does.
func NoRD(q *Query) { q.RD = false }

// DO sets the DNSSEC OK bit (and adds EDNS).
func DO(q *Query) { q.EDNS, q.DO = true, true }

// EDNS adds an OPT record advertising size.
func EDNS(size uint16) QueryOption { return func(q *Query) { q.EDNS, q.UDPSize = true, size } }

// ECS adds an EDNS Client Subnet option (RFC 7871) for prefix, e.g.
// "192.0.2.0/24" or "2001:db8::/56".
func ECS(prefix string) QueryOption {
	return func(q *Query) {
		p := netip.MustParsePrefix(prefix)
		o := &dns.EDNS0_SUBNET{
			Code:          dns.EDNS0SUBNET,
			SourceNetmask: uint8(p.Bits()),
			Address:       p.Masked().Addr().AsSlice(),
		}
		if p.Addr().Is4() {
			o.Family = 1
		} else {
			o.Family = 2
		}
		q.EDNS, q.ECS = true, o
	}
}

// Timeout sets the per-exchange timeout.
func Timeout(d time.Duration) QueryOption { return func(q *Query) { q.Timeout = d } }

// Attempts sets how many times a UDP query is sent before it fails.
func Attempts(n int) QueryOption { return func(q *Query) { q.Attempts = n } }

// NewMsg builds the query message that Ask sends.
func NewMsg(name string, qtype uint16, opts ...QueryOption) (*dns.Msg, Query) {
	q := Query{Net: "udp", RD: true, Timeout: 2 * time.Second, Attempts: 2}
	for _, f := range opts {
		f(&q)
	}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	m.RecursionDesired = q.RD
	if q.EDNS {
		size := q.UDPSize
		if size == 0 {
			size = 1232
		}
		m.SetEdns0(size, q.DO)
		if q.ECS != nil {
			opt := m.IsEdns0()
			opt.Option = append(opt.Option, q.ECS)
		}
	}
	return m, q
}

// Ask sends one query to addr ("ip:port") over a real socket and returns the
// reply, or an error after the attempts time out.
func Ask(addr, name string, qtype uint16, opts ...QueryOption) (*dns.Msg, error) {
	m, q := NewMsg(name, qtype, opts...)
	return AskMsg(addr, m, q)
}

// AskMsg sends a prepared message (see NewMsg).
func AskMsg(addr string, m *dns.Msg, q Query) (*dns.Msg, error) {
	c := dns.Client{Net: q.Net, Timeout: q.Timeout}
	if q.Net == "udp" && m.IsEdns0() != nil {
		c.UDPSize = m.IsEdns0().UDPSize()
	}
	attempts := q.Attempts
	if q.Net == "tcp" || attempts < 1 {
		attempts = 1
	}
	var err error
	for range attempts {
		var r *dns.Msg
		r, _, err = c.Exchange(m.Copy(), addr)
		if err == nil {
			return r, nil
		}
	}
	return nil, fmt.Errorf("%s %s @%s over %s: %w", m.Question[0].Name, dns.TypeToString[m.Question[0].Qtype], addr, q.Net, err)
}

// Exchange is Ask that fails the test on a network error.
func Exchange(t testing.TB, addr, name string, qtype uint16, opts ...QueryOption) *dns.Msg {
	t.Helper()
	r, err := Ask(addr, name, qtype, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// RRStrings returns the records of a section as sorted zone-file lines, with
// the name lower-cased, for comparing answers in tests.
func RRStrings(rrs []dns.RR) []string {
	out := make([]string, 0, len(rrs))
	for _, rr := range rrs {
		if rr.Header().Rrtype == dns.TypeOPT {
			continue
		}
		rr = dns.Copy(rr)
		rr.Header().Name = strings.ToLower(rr.Header().Name)
		out = append(out, strings.ReplaceAll(rr.String(), "\t", " "))
	}
	sort.Strings(out)
	return out
}

// Targets returns the data of the answer records of type qtype (addresses
// for A/AAAA, the target for CNAME, ...), sorted; what `dig +short` shows.
func Targets(m *dns.Msg, qtype uint16) []string {
	var out []string
	for _, rr := range m.Answer {
		if rr.Header().Rrtype != qtype {
			continue
		}
		s := rr.String()
		hdr := rr.Header().String()
		out = append(out, strings.TrimSpace(strings.TrimPrefix(s, hdr)))
	}
	sort.Strings(out)
	return out
}

func hostPort(addr string) (string, string) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, "53"
	}
	return h, p
}

// Dig runs the real `dig` against addr ("ip:port") with the given arguments
// (name, type, +options) and returns its output. A dig that is not installed
// goes through Missing; a dig that fails (exit status) fails the test.
func Dig(t testing.TB, addr string, args ...string) string {
	t.Helper()
	return runClient(t, "dig", addr, args)
}

// Kdig runs Knot's `kdig` the same way.
func Kdig(t testing.TB, addr string, args ...string) string {
	t.Helper()
	return runClient(t, "kdig", addr, args)
}

// DigShort runs `dig +short` for name and qtype and returns its lines sorted.
func DigShort(t testing.TB, addr, name, qtype string, args ...string) []string {
	t.Helper()
	out := Dig(t, addr, append([]string{"+short", "+time=2", "+tries=2", name, qtype}, args...)...)
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, ";") {
			lines = append(lines, l)
		}
	}
	sort.Strings(lines)
	return lines
}

func runClient(t testing.TB, tool, addr string, args []string) string {
	t.Helper()
	path := LookPath(t, tool)
	host, port := hostPort(addr)
	full := append([]string{"@" + host, "-p", port}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := Run(ctx, path, full...)
	if err != nil {
		var ee *exec.ExitError
		if ctxErr := ctx.Err(); ctxErr != nil {
			t.Fatalf("%s %s: %v", tool, strings.Join(full, " "), ctxErr)
		}
		if ok := asExit(err, &ee); ok {
			t.Fatalf("%s %s: exit %d\n%s", tool, strings.Join(full, " "), ee.ExitCode(), out)
		}
		t.Fatalf("%s %s: %v\n%s", tool, strings.Join(full, " "), err, out)
	}
	return out
}

func asExit(err error, ee **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	if ok {
		*ee = e
	}
	return ok
}

// Burst sends n UDP queries for name and qtype from src (an address of this
// host) to addr, one at a time, as a flood from one client would (rrl,
// amplification): EDNS0 at size (0: none) with DO when do is set. It counts
// the whole answers, the truncated ones, those lost (no answer within
// 50 ms), and the bytes in and out as packed on the wire (compressed, as
// the server sent them).
func Burst(src, addr, name string, qtype uint16, size uint16, do bool, n int) (answered, truncated, lost, in, out int) {
	c := &dns.Client{Net: "udp", Timeout: 50 * time.Millisecond, UDPSize: 65535,
		Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(src)}}}
	for range n {
		m := new(dns.Msg)
		m.SetQuestion(name, qtype)
		if size > 0 {
			m.SetEdns0(size, do)
		}
		wire, _ := m.Pack()
		in += len(wire)
		r, _, err := c.Exchange(m, addr)
		if err != nil {
			lost++
			continue
		}
		r.Compress = true
		b, _ := r.Pack()
		out += len(b)
		if r.Truncated {
			truncated++
		} else {
			answered++
		}
	}
	return
}

// WaitTargets waits up to d until addr answers name and qtype with exactly
// want (as Targets gives them: sorted), and fails the test otherwise with
// what was awaited and the last answer.
func WaitTargets(t testing.TB, d time.Duration, what, addr, name string, qtype uint16, want ...string) {
	t.Helper()
	want = slices.Sorted(slices.Values(want))
	testkit.Eventually(t, d, what, func() (bool, string) {
		m, err := Ask(addr, name, qtype)
		if err != nil {
			return false, err.Error()
		}
		got := Targets(m, qtype)
		return dns.RcodeToString[m.Rcode] == "NOERROR" && slices.Equal(got, want), dns.RcodeToString[m.Rcode] + " " + strings.Join(got, ",")
	})
}
