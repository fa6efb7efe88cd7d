package splitdns

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/coredns/coredns/plugin/pkg/parse"
	"github.com/coredns/coredns/request"

	"github.com/miekg/dns"
)

// Run-time loop detection.
//
// Every query that splitdns forwards carries an EDNS0 option from the local
// range (RFC 6891 §6.1.2), code markerCode, whose data is the list of the
// 8-byte identities of the splitdns processes it went through. A process
// draws its identity at random when it starts. Servers that relay a query as
// they received it (CoreDNS forward, splitdns) keep the option; a query that
// comes back to a process that already forwarded it finds that process's
// identity in the list and is answered SERVFAIL at once, without being
// forwarded again. A query that has been through maxHops splitdns processes
// is refused the same way, so a loop through many replicas is bounded too.
// The option is removed from the answer before it goes back to the client,
// and an OPT record added only to carry it is removed as well.
const (
	markerCode = 65053 // from the local/experimental range 65001-65534
	maxHops    = 8
)

// identity is this process's entry in the marker.
var identity = func() [8]byte {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return b
}()

// looped reports whether r has been forwarded by this process before, or by
// too many splitdns processes.
func looped(r *dns.Msg) bool {
	o := r.IsEdns0()
	if o == nil {
		return false
	}
	for _, e := range o.Option {
		l, ok := e.(*dns.EDNS0_LOCAL)
		if !ok || l.Code != markerCode {
			continue
		}
		if len(l.Data) >= maxHops*len(identity) {
			return true
		}
		for i := 0; i+len(identity) <= len(l.Data); i += len(identity) {
			if bytes.Equal(l.Data[i:i+len(identity)], identity[:]) {
				return true
			}
		}
	}
	return false
}

// marked records how mark changed a request, so that unmark can undo it.
type marked struct {
	opt      *dns.OPT
	addedOPT bool
	local    *dns.EDNS0_LOCAL
	addedOpt bool
	prev     []byte
	scratch  *markScratch
}

// markScratch is what mark adds to a query that has no OPT record (most stub
// resolvers send none), reused from query to query: the records only live
// until the query has been packed and sent.
type markScratch struct {
	opt   dns.OPT
	local dns.EDNS0_LOCAL
	opts  [1]dns.EDNS0
	extra [1]dns.RR
}

var scratchPool = sync.Pool{New: func() any { return new(markScratch) }}

// mark adds this process's identity to r's marker, adding the option (and
// an OPT record sized as the client's non-EDNS limit, 512) when missing.
func mark(r *dns.Msg) marked {
	m := marked{opt: r.IsEdns0()}
	if m.opt == nil {
		sc := scratchPool.Get().(*markScratch)
		sc.opt = dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT, Class: dns.MinMsgSize}}
		sc.local = dns.EDNS0_LOCAL{Code: markerCode, Data: identity[:]}
		sc.opts[0] = &sc.local
		sc.opt.Option = sc.opts[:1:1]
		if len(r.Extra) == 0 {
			r.Extra = sc.extra[:0:1]
		}
		r.Extra = append(r.Extra, &sc.opt)
		m.opt, m.local, m.scratch, m.addedOPT = &sc.opt, &sc.local, sc, true
		return m
	}
	for _, e := range m.opt.Option {
		if l, ok := e.(*dns.EDNS0_LOCAL); ok && l.Code == markerCode {
			m.local = l
			m.prev = l.Data
			n := len(l.Data)
			l.Data = append(l.Data[:n:n], identity[:]...)
			return m
		}
	}
	m.local = &dns.EDNS0_LOCAL{Code: markerCode, Data: identity[:]}
	m.addedOpt = true
	m.opt.Option = append(m.opt.Option, m.local)
	return m
}

// unmark undoes mark on r; on a zero marked it does nothing.
func (m marked) unmark(r *dns.Msg) {
	switch {
	case m.opt == nil:
	case m.addedOPT:
		for i := len(r.Extra) - 1; i >= 0; i-- {
			if r.Extra[i] == m.opt {
				r.Extra = append(r.Extra[:i], r.Extra[i+1:]...)
				break
			}
		}
		if len(r.Extra) == 0 {
			r.Extra = nil // as it was, and not the scratch's array
		}
		if m.scratch != nil {
			m.scratch.extra[0] = nil
			scratchPool.Put(m.scratch)
		}
	case m.addedOpt:
		for i := len(m.opt.Option) - 1; i >= 0; i-- {
			if m.opt.Option[i] == m.local {
				m.opt.Option = append(m.opt.Option[:i], m.opt.Option[i+1:]...)
				break
			}
		}
	default:
		m.local.Data = m.prev
	}
}

// unmarkReply removes the marker from an upstream's reply, and the whole OPT
// record when the client sent none (RFC 6891 §7: no OPT in a reply to a
// query without one). Every OPT record is visited: a broken upstream may
// send more than one.
func (m marked) unmarkReply(ret *dns.Msg) {
	if m.opt == nil {
		return
	}
	for i := len(ret.Extra) - 1; i >= 0; i-- {
		o, ok := ret.Extra[i].(*dns.OPT)
		if !ok {
			continue
		}
		if m.addedOPT {
			ret.Extra = append(ret.Extra[:i], ret.Extra[i+1:]...)
			continue
		}
		for j := len(o.Option) - 1; j >= 0; j-- {
			if l, ok := o.Option[j].(*dns.EDNS0_LOCAL); ok && l.Code == markerCode {
				o.Option = append(o.Option[:j], o.Option[j+1:]...)
			}
		}
	}
}

// listener is what this server listens on: its bind addresses ("" for a
// wildcard) and port.
type listener struct {
	hosts []string
	port  string
	local []net.IP // the machine's own addresses, for a wildcard bind
}

// self returns an error when addr (as parse.HostPortOrFile normalizes it) is
// one of the listener's own addresses: forwarding there would send every
// query back to this server.
func (l listener) self(addr string) error {
	_, hostport := parse.Transport(addr)
	host, port, err := net.SplitHostPort(hostport)
	if err != nil || port != l.port {
		return nil
	}
	ip := net.ParseIP(strings.SplitN(host, "%", 2)[0])
	if ip == nil {
		return nil
	}
	for _, h := range l.hosts {
		bind := net.ParseIP(strings.SplitN(h, "%", 2)[0])
		wildcard := h == "" || bind == nil || bind.IsUnspecified()
		switch {
		case ip.IsUnspecified():
			return fmt.Errorf("upstream %s is this server itself (it listens on port %s of this machine)", addr, l.port)
		case wildcard && (ip.IsLoopback() || l.isLocal(ip)):
			return fmt.Errorf("upstream %s is this server itself (it listens on every local address, port %s)", addr, l.port)
		case !wildcard && bind.Equal(ip):
			return fmt.Errorf("upstream %s is this server itself (it listens on %s)", addr, net.JoinHostPort(h, l.port))
		}
	}
	return nil
}

func (l listener) isLocal(ip net.IP) bool {
	for _, a := range l.local {
		if a.Equal(ip) {
			return true
		}
	}
	return false
}

// localAddrs returns the addresses of this machine's interfaces.
func localAddrs() []net.IP {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	ips := make([]net.IP, 0, len(addrs))
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			ips = append(ips, n.IP)
		}
	}
	return ips
}

// The seen-set: identical queries in flight are coalesced.
//
// A query that arrives while an identical one (same name in any case, type,
// class, DO and CD bits, buffer size, transport and EDNS options other than
// the marker)
// is being forwarded waits for that one's answer instead of being forwarded
// again. Besides sparing the upstream a burst of identical queries, this
// bounds a loop through a server that drops the marker: the query that comes
// back finds itself in flight and waits, so it is forwarded once per server,
// and the loop ends with SERVFAIL when the first copy's upstream times out.
// The name is compared without case (RFC 4343): a relay that randomizes the
// case of the names it forwards (0x20, as Unbound and many public resolvers
// do) would otherwise bring each copy back as a new query, and every copy
// would be forwarded again until the first one timed out. Each waiter is
// given the answer with its own question, so a 0x20 client still finds the
// case it asked in.
// The flights are a singleflight.Group keyed by newFlightKey.

// newFlightKey is the key of the query's flight: the fixed-size fields
// first, then the name in lower case after its length, then the other EDNS0 options (client subnet, cookies
// ...), so that no two different queries share a key.
func newFlightKey(state request.Request) string {
	r := state.Req
	q := r.Question[0]
	var flags byte
	if r.CheckingDisabled {
		flags |= 1
	}
	if state.Proto() == "tcp" {
		flags |= 2
	}
	o := r.IsEdns0()
	if o != nil && o.Do() {
		flags |= 4
	}
	size := state.Size() // the client's buffer: a smaller one may have been given a truncated answer

	var b strings.Builder
	b.Grow(9 + len(q.Name))
	for _, v := range [...]uint16{q.Qtype, q.Qclass, uint16(size), uint16(len(q.Name))} { // a buffer size and a name fit in 16 bits
		b.WriteByte(byte(v >> 8))
		b.WriteByte(byte(v))
	}
	b.WriteByte(flags)
	for i := 0; i < len(q.Name); i++ { // ASCII only (RFC 4343 §3): other octets are compared as they are
		c := q.Name[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b.WriteByte(c)
	}
	if o != nil {
		for _, e := range o.Option {
			if e.Option() == markerCode {
				continue
			}
			b.WriteString(strconv.Itoa(int(e.Option())))
			b.WriteByte('=')
			b.WriteString(e.String())
			b.WriteByte(';')
		}
	}
	return b.String()
}

// answerFor returns the flight's answer ret fitted to a waiting query r: a
// copy (the leader and the other waiters hold ret too) with r's ID, r's
// question (its name in the case r wrote it: the flight's key ignores case),
// and no OPT record if r had none.
func answerFor(ret, r *dns.Msg) *dns.Msg {
	ret = ret.Copy()
	ret.Id = r.Id
	ret.Question = append([]dns.Question(nil), r.Question...)
	if r.IsEdns0() == nil {
		for i := len(ret.Extra) - 1; i >= 0; i-- {
			if ret.Extra[i].Header().Rrtype == dns.TypeOPT {
				ret.Extra = append(ret.Extra[:i], ret.Extra[i+1:]...)
			}
		}
	}
	return ret
}
