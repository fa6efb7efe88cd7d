// Package rrl implements response rate limiting as BIND and Knot do it: UDP
// responses to one client network of one kind are limited by a token
// bucket, so that a server cannot be made to flood a spoofed address.
package rrl

import (
	"context"
	"net/netip"
	"strconv"
	"time"

	"github.com/coredns/coredns/plugin"
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
	return plugin.NextOrFailure(r.Name(), r.Next, ctx, &limitedWriter{ResponseWriter: w, rrl: r}, m)
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
}

// WriteMsg sends, drops or slips res.
func (w *limitedWriter) WriteMsg(res *dns.Msg) error {
	kind, name := classify(res)
	rate := w.rrl.rate(kind)
	if rate <= 0 {
		return w.ResponseWriter.WriteMsg(res)
	}
	key := w.rrl.prefix(w.RemoteAddr()) + "|" + kind + "|" + name
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
	kindAnswer   = "answer"   // keyed by qname and qtype
	kindNoData   = "nodata"   // by the zone (the SOA's owner)
	kindNXDomain = "nxdomain" // by the zone
	kindReferral = "referral" // by the delegation (the NS owner)
	kindError    = "error"    // by the client prefix only
)

// classify returns res's kind and the name its account is keyed by.
func classify(res *dns.Msg) (kind, name string) {
	var qname string
	var qtype uint16
	if len(res.Question) > 0 {
		qname, qtype = dns.CanonicalName(res.Question[0].Name), res.Question[0].Qtype
	}
	authority := func(t uint16) string {
		for _, rr := range res.Ns {
			if rr.Header().Rrtype == t {
				return dns.CanonicalName(rr.Header().Name)
			}
		}
		return ""
	}
	switch res.Rcode {
	case dns.RcodeSuccess:
		if len(res.Answer) > 0 {
			return kindAnswer, qname + "/" + strconv.Itoa(int(qtype))
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

// prefix returns the client's network: /24 for IPv4, /56 for IPv6 by default,
// as BIND's ipv4-prefix-length and ipv6-prefix-length.
func (r *RRL) prefix(addr interface{ String() string }) string {
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return addr.String()
	}
	ip := ap.Addr().Unmap()
	bits := r.ipv6Prefix
	if ip.Is4() {
		bits = r.ipv4Prefix
	}
	p, err := ip.Prefix(bits)
	if err != nil {
		return ip.String()
	}
	return p.String()
}
