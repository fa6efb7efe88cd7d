// Package rrl implements response rate limiting as BIND and Knot do it: UDP
// responses to one client network of one kind are limited by a token
// bucket, so that a server cannot be made to flood a spoofed address.
package rrl

import (
	"context"
	"hash/maphash"
	"net"
	"net/netip"
	"time"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/metadata"
	"github.com/coredns/coredns/request"
	"github.com/fleetdns/fleetdns/internal/store"

	"github.com/miekg/dns"
)

// RRL is the plugin.
type RRL struct {
	Next  plugin.Handler
	Zones []string

	responses, nxdomains, errors float64 // per second
	ipv4Prefix, ipv6Prefix       int
	exempt                       []netip.Prefix // clients never limited (BIND's exempt-clients): peers, monitors
	fleet                        store.Fleet    // gslb's fleet traffic, never limited; nil without gslb's fleet
	table                        *table
	now                          func() time.Time
}

// ServeDNS wraps the writer of UDP queries in the zones; TCP is never
// limited: its source address cannot be spoofed.
func (r *RRL) ServeDNS(ctx context.Context, w dns.ResponseWriter, m *dns.Msg) (int, error) {
	state := request.Request{W: w, Req: m}
	if state.Proto() != "udp" || plugin.Zones(r.Zones).Matches(state.Name()) == "" || r.exempted(state.IP()) || (r.fleet != nil && r.fleet.FleetTraffic(w, m)) {
		return plugin.NextOrFailure(r.Name(), r.Next, ctx, w, m)
	}
	if metadata.ValueFuncs(ctx) == nil {
		// Without the metadata plugin, a context that k8scrd can say
		// "wildcard" in (imputedName).
		ctx = metadata.ContextWithMetadata(ctx)
	}
	return plugin.NextOrFailure(r.Name(), r.Next, ctx, &limitedWriter{ResponseWriter: w, rrl: r, ctx: ctx}, m)
}

// Name implements plugin.Handler.
func (r *RRL) Name() string { return "rrl" }

// exempted reports whether the client at ip is never limited.
func (r *RRL) exempted(ip string) bool {
	if len(r.exempt) == 0 {
		return false
	}
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return false
	}
	a = a.Unmap()
	for _, p := range r.exempt {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// limitedWriter charges each response to its account before it is sent.
type limitedWriter struct {
	dns.ResponseWriter
	rrl *RRL
	ctx context.Context // the query's: the plugins' metadata
}

// WriteMsg sends, drops or slips res.
func (w *limitedWriter) WriteMsg(res *dns.Msg) error {
	kind, name := classify(res)
	rate := w.rrl.rate(kind)
	if rate <= 0 {
		return w.ResponseWriter.WriteMsg(res)
	}
	var qtype uint16
	if kind == kindAnswer {
		qtype = res.Question[0].Qtype
		if imputed := imputedName(w.ctx); imputed != "" {
			name = imputed
		}
	}
	key := w.rrl.key(w.RemoteAddr(), kind, name, qtype)
	v, evicted := w.rrl.table.debit(key, rate, w.rrl.now())
	if evicted {
		evictedCount.Inc()
	}
	switch v {
	case drop:
		droppedCount.WithLabelValues(kind).Inc()
		return nil
	case slipped:
		slippedCount.WithLabelValues(kind).Inc()
		tc := new(dns.Msg)
		tc.SetReply(res)
		tc.Rcode, tc.Authoritative, tc.Truncated = res.Rcode, res.Authoritative, true
		tc.Question = res.Question
		return w.ResponseWriter.WriteMsg(tc)
	}
	return w.ResponseWriter.WriteMsg(res)
}

// Kinds of response, each with accounts of its own.
const (
	kindAnswer   = "answer"   // keyed by qname (a wildcard's owner: imputedName) and qtype
	kindNoData   = "nodata"   // by the zone (the SOA's owner)
	kindNXDomain = "nxdomain" // by the zone
	kindReferral = "referral" // by the delegation (the NS owner)
	kindError    = "error"    // by the client prefix only
)

// classify returns res's kind and the name its account is keyed by.
func classify(res *dns.Msg) (kind, name string) {
	var qname string
	if len(res.Question) > 0 {
		qname = res.Question[0].Name
	}
	authority := func(t uint16) string {
		for _, rr := range res.Ns {
			if rr.Header().Rrtype == t {
				return rr.Header().Name
			}
		}
		return ""
	}
	switch res.Rcode {
	case dns.RcodeSuccess:
		if len(res.Answer) > 0 && qname != "" {
			return kindAnswer, qname
		}
		if z := authority(dns.TypeSOA); z != "" {
			return kindNoData, z
		}
		if d := authority(dns.TypeNS); d != "" {
			return kindReferral, d
		}
		return kindNoData, qname
	case dns.RcodeNameError:
		if z := authority(dns.TypeSOA); z != "" {
			return kindNXDomain, z
		}
		return kindNXDomain, qname
	}
	return kindError, ""
}

// rate is the limit of kind, per second.
func (r *RRL) rate(kind string) float64 {
	switch kind {
	case kindNXDomain:
		return r.nxdomains
	case kindError:
		return r.errors
	}
	return r.responses
}

// key is the account of a response of kind keyed by name (and qtype for
// answers) to the client at addr: a hash of the client's network (/24 for
// IPv4, /56 for IPv6 by default, as BIND's ipv4-prefix-length and
// ipv6-prefix-length), the kind, the name (case-insensitively) and qtype,
// so that an account costs the same whatever the names that clients ask.
// The hash is seeded per table: clients cannot choose names that collide.
func (r *RRL) key(addr net.Addr, kind, name string, qtype uint16) uint64 {
	var h maphash.Hash
	h.SetSeed(r.table.seed)
	p := r.prefix(addr)
	a := p.Addr().As16()
	h.Write(a[:])
	h.WriteByte(byte(p.Bits()))
	h.WriteString(kind)
	h.WriteByte(0)
	for i := 0; i < len(name); i++ {
		c := name[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		h.WriteByte(c)
	}
	if name != "" && name[len(name)-1] != '.' {
		h.WriteByte('.') // fully qualified or not, one account
	}
	h.WriteByte(byte(qtype >> 8))
	h.WriteByte(byte(qtype))
	return h.Sum64()
}

// prefix returns the client's network: /24 for IPv4, /56 for IPv6 by
// default; an address that does not parse is its own network.
func (r *RRL) prefix(addr net.Addr) netip.Prefix {
	var ap netip.AddrPort
	switch a := addr.(type) {
	case *net.UDPAddr:
		ap = a.AddrPort()
	case *net.TCPAddr:
		ap = a.AddrPort()
	default:
		ap, _ = netip.ParseAddrPort(addr.String())
	}
	ip := ap.Addr().Unmap()
	bits := r.ipv6Prefix
	if ip.Is4() {
		bits = r.ipv4Prefix
	}
	p, err := ip.Prefix(bits)
	if err != nil {
		return netip.Prefix{}
	}
	return p
}

// wildcardLabel is the metadata k8scrd sets on an answer synthesized from
// a wildcard: the wildcard's owner name.
const wildcardLabel = "k8scrd/wildcard"

// imputedName is the name an answer is charged to when it differs from
// the query name: a wildcard answer's is the wildcard's owner name (as NSD
// and Windows DNS impute it), so that random names under one wildcard
// share one account instead of each having a fresh one.
func imputedName(ctx context.Context) string {
	if ctx == nil {
		return ""
	}
	if f := metadata.ValueFunc(ctx, wildcardLabel); f != nil {
		return f()
	}
	return ""
}
