// Package localtargets answers localtargets-<host> with this cluster's healthy
// targets for <host>: what GSLB peers (fleetdns' gslb, or k8gb's CoreDNS) ask
// each other.
package localtargets

import (
	"context"
	"net/netip"
	"strings"

	"github.com/fleetdns/fleetdns/internal/store"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/metrics"
	"github.com/coredns/coredns/plugin/pkg/nonwriter"
	"github.com/coredns/coredns/request"
	"github.com/miekg/dns"
)

// LocalTargets is the handler. It implements store.Targets for gslb.
type LocalTargets struct {
	Next  plugin.Handler
	Zones []string

	prefix string
	ttl    uint32 // for hosts whose endpoints set no recordTTL

	// Set in OnStartup from the k8scrd handler of the same server block.
	reader store.Reader
	soa    plugin.Handler // asked for the zone's SOA on NODATA

	health *checker // nil without a healthcheck stanza
}

const (
	defaultPrefix = "localtargets-"
	defaultTTL    = 30 // k8scrd's default for endpoints without recordTTL
)

// New returns a LocalTargets with the defaults.
func New() *LocalTargets {
	return &LocalTargets{prefix: defaultPrefix, ttl: defaultTTL}
}

// Name implements plugin.Handler.
func (lt *LocalTargets) Name() string { return "localtargets" }

// ServeDNS implements plugin.Handler.
func (lt *LocalTargets) ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	state := request.Request{W: w, Req: r}
	qname := state.Name()

	if lt.reader == nil || plugin.Zones(lt.Zones).Matches(qname) == "" || !strings.HasPrefix(qname, lt.prefix) {
		return plugin.NextOrFailure(lt.Name(), lt.Next, ctx, w, r)
	}
	hostname := qname[len(lt.prefix):]
	if hostname == "" || hostname[0] == '.' || !lt.reader.Synced() {
		return plugin.NextOrFailure(lt.Name(), lt.Next, ctx, w, r)
	}
	// A name the store holds literally (the k8gb operator wrote it) is served
	// as written, by k8scrd.
	if _, literal := lt.reader.Host(qname); literal {
		return plugin.NextOrFailure(lt.Name(), lt.Next, ctx, w, r)
	}
	h, ok := lt.reader.Host(hostname)
	// Objects written by the k8gb operator hold the assembled global answer;
	// advertising it as ours would hand peers everyone's targets.
	if !ok || h.Verbatim {
		return plugin.NextOrFailure(lt.Name(), lt.Next, ctx, w, r)
	}

	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true

	a, aaaa := lt.Healthy(h)
	ttl := lt.ttl
	if h.TTLSet {
		ttl = h.TTL
	}
	switch state.QType() {
	case dns.TypeA:
		m.Answer = addressRRs(state.QName(), dns.TypeA, ttl, a)
	case dns.TypeAAAA:
		m.Answer = addressRRs(state.QName(), dns.TypeAAAA, ttl, aaaa)
	}

	server := metrics.WithServer(ctx)
	if len(m.Answer) == 0 {
		// RFC 2308 §2.2: NODATA, SOA in the authority section.
		m.Ns = lt.negativeSOA(ctx, w, hostname)
		answerCount.WithLabelValues(server, "nodata").Inc()
	} else {
		answerCount.WithLabelValues(server, "targets").Inc()
	}
	w.WriteMsg(m)
	return dns.RcodeSuccess, nil
}

// Prefix is what peers put before a host's first label to ask for this
// cluster's targets; gslb in the same block asks its peers with the same.
func (lt *LocalTargets) Prefix() string { return lt.prefix }

// Healthy implements store.Targets: h's targets minus those failing their
// health checks. It allocates only when a target is left out.
func (lt *LocalTargets) Healthy(h *store.Host) (a, aaaa []netip.Addr) {
	if lt.health == nil {
		return h.A, h.AAAA
	}
	up := lt.health.snapshot()
	return up.filter(h.A), up.filter(h.AAAA)
}

func addressRRs(name string, qtype uint16, ttl uint32, addrs []netip.Addr) []dns.RR {
	if len(addrs) == 0 {
		return nil
	}
	rrs := make([]dns.RR, len(addrs))
	hdr := dns.RR_Header{Name: name, Rrtype: qtype, Class: dns.ClassINET, Ttl: ttl}
	for i, ip := range addrs {
		if qtype == dns.TypeA {
			rrs[i] = &dns.A{Hdr: hdr, A: ip.AsSlice()}
		} else {
			rrs[i] = &dns.AAAA{Hdr: hdr, AAAA: ip.AsSlice()}
		}
	}
	return rrs
}

// negativeSOA asks k8scrd, in process, for the SOA of the zone that holds
// hostname: its SOA answer at the apex, or the SOA of its negative answer
// below it. The TTL is min(SOA TTL, MINIMUM) as RFC 2308 §3 asks.
func (lt *LocalTargets) negativeSOA(ctx context.Context, w dns.ResponseWriter, hostname string) []dns.RR {
	if lt.soa == nil {
		return nil
	}
	q := new(dns.Msg)
	q.SetQuestion(hostname, dns.TypeSOA)
	nw := nonwriter.New(w)
	if _, err := lt.soa.ServeDNS(ctx, nw, q); err != nil || nw.Msg == nil {
		return nil
	}
	for _, section := range [][]dns.RR{nw.Msg.Answer, nw.Msg.Ns} {
		for _, rr := range section {
			soa, ok := rr.(*dns.SOA)
			if !ok {
				continue
			}
			soa = dns.Copy(soa).(*dns.SOA)
			soa.Hdr.Ttl = min(soa.Hdr.Ttl, soa.Minttl)
			return []dns.RR{soa}
		}
	}
	return nil
}
