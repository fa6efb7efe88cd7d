// Package k8scrd serves external-dns DNSEndpoint objects, from the Kubernetes
// API or from a directory of manifests, as authoritative DNS data.
package k8scrd

import (
	"context"
	"slices"
	"sync/atomic"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/metadata"
	"github.com/coredns/coredns/plugin/pkg/fall"
	"github.com/coredns/coredns/request"
	"github.com/fleetdns/fleetdns/internal/dnsutil"
	"github.com/fleetdns/fleetdns/internal/store"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/builder"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/tree"
	"github.com/miekg/dns"
)

// K8sCRD is the k8scrd plugin: the handler and the store that other plugins read.
type K8sCRD struct {
	Next  plugin.Handler
	Zones []string
	Fall  fall.F

	notifier *builder.Notifier // NOTIFY to secondaries, when transfer is in the block
	subs     store.Notifier    // the store's subscribers, told of every snapshot

	cfg     *config
	snap    atomic.Pointer[tree.Snapshot]
	builder *builder.Builder
	source  source
	stop    chan struct{}
	started atomic.Bool // OnStartup returned
	release func()      // returns the first sync's freed memory to the OS (releaseAfterSync)
}

// ServeDNS implements the plugin.Handler interface.
func (k *K8sCRD) ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	state := request.Request{W: w, Req: r}
	qname := state.Name()
	zone := dnsutil.ZoneOf(k.Zones, qname)
	if zone == "" {
		return plugin.NextOrFailure(k.Name(), k.Next, ctx, w, r)
	}
	qtype := state.QType()
	if qtype == dns.TypeAXFR || qtype == dns.TypeIXFR {
		// Transfers are the transfer plugin's; without it, none are allowed.
		return dns.RcodeRefused, nil
	}
	s := k.snap.Load()
	if !s.Synced {
		// Never an authoritative NXDOMAIN that resolvers would cache.
		return dns.RcodeServerFailure, nil
	}
	z := s.Zones[zone]
	rep := s.Lookup(z, qname, qtype)
	if rep.Res == tree.NameError && k.Fall.Through(qname) {
		return plugin.NextOrFailure(k.Name(), k.Next, ctx, w, r)
	}
	if owner := rep.Wildcard; owner != "" { // rrl charges wildcard answers to the wildcard (plugin/rrl)
		metadata.SetValueFunc(ctx, "k8scrd/wildcard", func() string { return owner })
	}

	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	m.Answer, m.Ns = rep.Answer, rep.NS
	switch rep.Res {
	case tree.NameError:
		m.Rcode = dns.RcodeNameError
	case tree.Delegation:
		// A referral is not authoritative; an alias in the answer before it is (RFC 1034 §4.3.2).
		m.Authoritative = len(rep.Answer) > 0
	}
	referral := rep.Res == tree.Delegation && len(rep.Answer) == 0
	fit(state, m, rep.Glue, rep.Sibling, rep.Extra, referral)
	w.WriteMsg(m)
	return dns.RcodeSuccess, nil
}

// fit makes m, with its answer and authority sections set, fit the
// client's buffer before it is written: the required glue is added, then
// as much of the optional additional data (a referral's sibling glue
// first, then extra) as fits, whole RRsets, the rest dropped without TC.
// TC is set only when the required data does not fit (RFC 2181 §9, RFC
// 9471); the message then carries the question alone, as Knot's do, and
// the same query over TCP answers in full. CoreDNS's ScrubWriter would set
// TC whenever it drops any record.
//
// With DO set a dnssec plugin in front signs the message after this fit,
// and the ScrubWriter's TC for whatever then does not fit must be about
// required data (RFC 4035 §3.1.1: signatures the answer needs that do not
// fit set TC). So no optional data is added to an answer (it would be
// signed), and a referral gets its sibling glue alone (glue is never
// signed: the signer adds only the NSEC that proves no DS, and its
// signatures, to the authority section), within the size less the room
// that the signer takes (signRoom).
func fit(state request.Request, m *dns.Msg, glue, sibling, extra []dns.RR, referral bool) {
	opt, do := 0, false
	if o := state.Req.IsEdns0(); o != nil {
		opt, do = 11, o.Do() // the OPT record the ScrubWriter adds to the reply (no options)
	}
	room := 0
	switch {
	case !do:
		if len(sibling) > 0 { // most answers have none: no copy of extra then
			extra = append(slices.Clip(sibling), extra...)
		}
	case referral:
		extra, room = sibling, signRoom(state.Name())
	default:
		extra = nil
	}
	m.Extra = glue
	l := m.Len() + opt
	if l <= dns.MinMsgSize && len(extra) == 0 {
		return // fits any client: the transport and buffer need not be asked
	}
	size := state.Size()
	if l > size {
		m.Compress = true
		if m.Len()+opt > size {
			m.Truncated = true
			m.Answer, m.Ns, m.Extra = nil, nil, nil
			return
		}
	}
	if len(extra) == 0 {
		return
	}
	size -= room
	m.Extra = append(slices.Clip(glue), extra...)
	if m.Len()+opt <= size {
		return
	}
	m.Compress = true
	if m.Len()+opt <= size {
		return
	}
	// Whole RRsets (one name and type), in order, while they fit.
	m.Extra = slices.Clip(glue)
	for i := 0; i < len(extra); {
		j := i + 1
		for j < len(extra) && extra[j].Header().Rrtype == extra[i].Header().Rrtype && extra[j].Header().Name == extra[i].Header().Name {
			j++
		}
		n := len(m.Extra)
		m.Extra = append(m.Extra, extra[i:j]...)
		if m.Len()+opt > size {
			m.Extra = m.Extra[:n]
		}
		i = j
	}
}

// signRoom is what a dnssec plugin in front adds to a referral for qname,
// in octets: an NSEC record owned by qname whose next name is qname again
// (an uncompressed name), and its RRSIGs, two of them (a key set of a KSK
// and a ZSK that both sign) with 256-octet signatures (RSA 2048; ECDSA and
// Ed25519 take less) and the zone's uncompressed name (at most qname's).
func signRoom(qname string) int {
	nsec := 2 + 10 + 2 + len(qname) + 1 + 8     // owner (pointer), header, \000.qname, bitmap (NS RRSIG NSEC)
	rrsig := 2 + 10 + 18 + len(qname) + 1 + 256 // owner (pointer), header, fixed fields, signer, signature
	return nsec + 2*rrsig
}

// Name implements the plugin.Handler interface.
func (k *K8sCRD) Name() string { return "k8scrd" }

// Store implements store.Provider: a live view that always reads the latest snapshot.
func (k *K8sCRD) Store() store.Store { return reader{k} }

type reader struct{ k *K8sCRD }

func (r reader) Synced() bool { return r.k.snap.Load().Synced }

func (r reader) Host(name string) (*store.Host, bool) {
	n := r.k.snap.Load().Get(name)
	if n == nil || n.Host == nil {
		return nil, false
	}
	return n.Host, true
}

func (r reader) Hosts(zone string, fn func(*store.Host) bool) {
	s := r.k.snap.Load()
	for _, sh := range s.Shards {
		for name, n := range sh {
			if n.Host != nil && dns.IsSubDomain(zone, name) {
				if !fn(n.Host) {
					return
				}
			}
		}
	}
}

// NegativeSOA implements store.Store: the negative SOA of the zone holding
// name, the record k8scrd's own NXDOMAIN and NODATA answers carry.
func (r reader) NegativeSOA(name string) *dns.SOA {
	zone := dnsutil.ZoneOf(r.k.Zones, name)
	if zone == "" {
		return nil
	}
	z := r.k.snap.Load().Zones[zone]
	if z == nil || len(z.NegSOA) == 0 {
		return nil
	}
	return z.NegSOA[0].(*dns.SOA)
}

func (r reader) Subscribe() (<-chan struct{}, func()) { return r.k.subs.Subscribe() }
