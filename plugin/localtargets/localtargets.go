// Package localtargets answers localtargets-<host> with this cluster's healthy
// targets for <host>: what GSLB peers (fleetdns' gslb, or k8gb's CoreDNS) ask
// each other.
package localtargets

import (
	"context"
	"net/netip"

	"github.com/fleetdns/fleetdns/internal/store"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/metrics"
	"github.com/coredns/coredns/request"
	"github.com/miekg/dns"
)

// LocalTargets is the handler. It implements store.Targets for gslb.
type LocalTargets struct {
	Next  plugin.Handler
	Zones []string

	prefix string
	ttl    uint32 // for hosts whose endpoints set no recordTTL; 0: the store's
	// Set in OnStartup from the store of the same server block.
	reader store.Store

	health *checker // nil without a healthcheck stanza
	// verdicts signals a change of a health verdict (Subscribe).
	verdicts store.Notifier
}

const defaultPrefix = store.DefaultPrefix

// New returns a LocalTargets with the defaults.
func New() *LocalTargets {
	return &LocalTargets{prefix: defaultPrefix}
}

// Name implements plugin.Handler.
func (lt *LocalTargets) Name() string { return "localtargets" }

// ServeDNS implements plugin.Handler.
func (lt *LocalTargets) ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	state := request.Request{W: w, Req: r}
	qname := state.Name()

	hostname, ok := store.TargetHost(qname, lt.prefix)
	if !ok || lt.reader == nil || plugin.Zones(lt.Zones).Matches(qname) == "" || !lt.reader.Synced() {
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
	if !ok || store.Classify(h, lt.prefix) == store.Verbatim {
		return plugin.NextOrFailure(lt.Name(), lt.Next, ctx, w, r)
	}

	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true

	a, aaaa := lt.Healthy(h)
	ttl := h.TTL // the endpoints' recordTTL, else the store's default
	if !h.TTLSet && lt.ttl > 0 {
		ttl = lt.ttl
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
		if soa := lt.reader.NegativeSOA(hostname); soa != nil {
			m.Ns = []dns.RR{soa}
		}
		answerCount.WithLabelValues(server, "nodata").Inc()
	} else {
		answerCount.WithLabelValues(server, "targets").Inc()
	}
	w.WriteMsg(m)
	return dns.RcodeSuccess, nil
}

// Prefix implements store.Targets: what peers put before a host's first
// label to ask for this cluster's targets; gslb in the same block asks its
// peers with the same.
func (lt *LocalTargets) Prefix() string { return lt.prefix }

// Healthy implements store.Targets: h's ready targets (those source health
// does not withdraw, store.Host.Ready) minus those failing their health
// checks: a target is served only when both pass. It allocates only when a
// check leaves a target out.
func (lt *LocalTargets) Healthy(h *store.Host) (a, aaaa []netip.Addr) {
	a, aaaa = h.Ready()
	if lt.health == nil {
		return a, aaaa
	}
	return lt.health.healthy(h, a), lt.health.healthy(h, aaaa)
}

// Subscribe implements store.Targets: a signal after every health verdict
// that changes what Healthy returns.
func (lt *LocalTargets) Subscribe() (<-chan struct{}, func()) { return lt.verdicts.Subscribe() }

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
