package k8scrd

import (
	"strings"

	"github.com/miekg/dns"
)

// result is the kind of answer a lookup produced.
type result int

const (
	success result = iota
	nameError
	noData
	delegation
)

// maxChain bounds how many CNAMEs inside a zone are followed for one answer.
const maxChain = 8

// reply is what a lookup produced, by section. The additional section is in
// two parts: glue is what the answer requires (in-domain glue of a referral,
// RFC 9471: TC when it does not fit), extra is optional (addresses of the
// name servers, mail exchangers and services an answer names, sibling glue:
// added when it fits, dropped without TC).
type reply struct {
	answer, ns  []dns.RR
	glue, extra []dns.RR
	res         result
	wildcard    string // the owner of the wildcard the answer was synthesized from (rrl's imputed name)
}

// lookup answers qname/qtype from the zone z in snapshot s: map lookups per
// label of qname, no scan. A positive answer carries no authority NS set
// (minimal responses, as Knot and BIND give them).
func (s *snapshot) lookup(z *zoneData, qname string, qtype uint16) reply {
	if qname == z.origin {
		switch qtype {
		case dns.TypeSOA:
			return reply{answer: z.soa}
		case dns.TypeNS:
			return reply{answer: z.ns, extra: s.addresses(z, z.ns, nil)}
		case dns.TypeANY:
			return s.anyApex(z)
		}
		if n := s.get(qname); n != nil && n.declared() {
			return s.answer(z, n, qname, qtype, false)
		}
		return reply{ns: z.negSOA, res: noData}
	}

	if z.cuts > 0 {
		if cut, at := s.cut(z, qname); cut != nil {
			if at == qname && qtype == dns.TypeDS {
				// The DS RRset lives on the parent side of the cut; we hold none.
				return reply{ns: z.negSOA, res: noData}
			}
			return s.referral(z, cut)
		}
	}

	n := s.get(qname)
	if n != nil {
		if !n.declared() { // RFC 8020: an empty non-terminal exists, NODATA
			return reply{ns: z.negSOA, res: noData}
		}
		return s.answer(z, n, qname, qtype, false)
	}

	// RFC 4592 §3.3.1: the wildcard at the closest encloser is the source of synthesis.
	if w := s.wildcard(z, qname); w != nil {
		if !w.declared() {
			return reply{ns: z.negSOA, res: noData}
		}
		rep := s.answer(z, w, qname, qtype, true)
		rep.wildcard = w.host.Name
		return rep
	}
	return reply{ns: z.negSOA, res: nameError}
}

// referral is the delegation at cut: its NS RRset, the in-domain glue it
// requires and the other addresses of its name servers that the zone holds.
func (s *snapshot) referral(z *zoneData, cut *node) reply {
	nsrrs := cut.get(dns.TypeNS)
	var glue []dns.RR
	for _, rr := range nsrrs {
		if ns, ok := rr.(*dns.NS); ok && dns.IsSubDomain(ns.Hdr.Name, ns.Ns) {
			glue = s.addrs(glue, ns.Ns)
		}
	}
	return reply{ns: nsrrs, glue: glue, extra: s.addresses(z, nsrrs, cut), res: delegation}
}

// anyApex answers ANY at the apex: its RRset of the lowest type, among
// the SOA, the NS RRset and what the objects declare there (see answer).
func (s *snapshot) anyApex(z *zoneData) reply {
	if n := s.get(z.origin); n != nil && len(n.rrsets) > 0 && n.rrsets[0].rtype < dns.TypeNS {
		return reply{answer: n.rrsets[0].rrs}
	}
	return reply{answer: z.ns}
}

// cut returns the delegation at or above qname (below the apex) and its name, if any.
func (s *snapshot) cut(z *zoneData, qname string) (*node, string) {
	// Label offsets of qname's names below the apex, without allocating.
	var offs [128]int
	k := 0
	for off := 0; off < len(qname)-len(z.origin) && k < len(offs); k++ {
		offs[k] = off
		i := strings.IndexByte(qname[off:], '.')
		if i < 0 {
			break
		}
		off += i + 1
	}
	// Walk from just below the apex down to qname: the highest cut wins.
	for j := k - 1; j >= 0; j-- {
		if n := s.get(qname[offs[j]:]); n != nil && n.cut {
			return n, qname[offs[j]:]
		}
	}
	return nil, ""
}

// wildcard returns the node at *.<closest encloser> of qname, or nil.
func (s *snapshot) wildcard(z *zoneData, qname string) *node {
	ce := parent(qname)
	for ce != z.origin && len(ce) > len(z.origin) {
		if s.get(ce) != nil {
			break
		}
		ce = parent(ce)
	}
	return s.get("*." + ce)
}

// answer answers from the declared node n, found for qname (by wildcard when wild).
func (s *snapshot) answer(z *zoneData, n *node, qname string, qtype uint16, wild bool) reply {
	if qtype == dns.TypeANY && len(n.rrsets) > 0 {
		// One RRset of the name (RFC 8482 §4.1), never an empty NODATA:
		// the one of the lowest type, as Knot and NSD choose it (rrsets
		// are sorted by type). Over TCP too, as they answer.
		return reply{answer: synth(n.rrsets[0].rrs, qname, wild)}
	}
	if cname := n.get(dns.TypeCNAME); len(cname) > 0 && qtype != dns.TypeCNAME {
		return s.chase(z, synth(cname, qname, wild), qtype)
	}
	rrs := n.get(qtype)
	if len(rrs) == 0 {
		return reply{ns: z.negSOA, res: noData}
	}
	return reply{answer: synth(rrs, qname, wild), extra: s.additional(z, rrs)}
}

// chase follows a CNAME chain inside the zone (RFC 1034 §4.3.2). The rcode is
// that of the last name in the chain (RFC 6604 §3). A target outside the zone
// ends the chain: the resolver follows it.
func (s *snapshot) chase(z *zoneData, answer []dns.RR, qtype uint16) reply {
	seen := map[string]bool{}
	for range maxChain {
		target := answer[len(answer)-1].(*dns.CNAME).Target
		if seen[target] || !dns.IsSubDomain(z.origin, target) {
			return reply{answer: answer}
		}
		seen[target] = true
		var r reply
		if target == z.origin {
			r = s.lookup(z, target, qtype)
		} else {
			if z.cuts > 0 {
				if cut, _ := s.cut(z, target); cut != nil {
					r = s.referral(z, cut)
					r.answer = answer
					return r
				}
			}
			n := s.get(target)
			wild := false
			if n == nil {
				n, wild = s.wildcard(z, target), true
			}
			switch {
			case n == nil:
				return reply{answer: answer, ns: z.negSOA, res: nameError}
			case !n.declared():
				return reply{answer: answer, ns: z.negSOA, res: noData}
			}
			if cname := n.get(dns.TypeCNAME); len(cname) > 0 && qtype != dns.TypeCNAME {
				answer = append(answer, synth(cname, target, wild)...)
				continue
			}
			rrs := n.get(qtype)
			if len(rrs) == 0 {
				return reply{answer: answer, ns: z.negSOA, res: noData}
			}
			r = reply{answer: synth(rrs, target, wild), extra: s.additional(z, rrs)}
		}
		r.answer = append(answer, r.answer...)
		return r
	}
	return reply{answer: answer}
}

// synth returns rrs, or copies owned by qname when they come from a wildcard.
func synth(rrs []dns.RR, qname string, wild bool) []dns.RR {
	if !wild {
		return rrs
	}
	out := make([]dns.RR, len(rrs))
	for i, rr := range rrs {
		out[i] = dns.Copy(rr)
		out[i].Header().Name = qname
	}
	return out
}

// addrs appends the A and AAAA records the store holds at name.
func (s *snapshot) addrs(to []dns.RR, name string) []dns.RR {
	if n := s.get(name); n != nil {
		to = append(to, n.get(dns.TypeA)...)
		to = append(to, n.get(dns.TypeAAAA)...)
	}
	return to
}

// addresses returns the optional additional data of an NS RRset: the
// addresses of its name servers that zone z holds, other than the in-domain
// glue of the delegation at cut (nil for the apex NS), which is required and
// given apart. Sibling glue, under another delegation of the zone, is
// among them (RFC 9471 §2.2, RFC 1034 §4.3.2 step 3b).
func (s *snapshot) addresses(z *zoneData, nsrrs []dns.RR, cut *node) (extra []dns.RR) {
	for _, rr := range nsrrs {
		ns, ok := rr.(*dns.NS)
		if !ok || !dns.IsSubDomain(z.origin, ns.Ns) || cut != nil && dns.IsSubDomain(ns.Hdr.Name, ns.Ns) {
			continue
		}
		extra = s.addrs(extra, ns.Ns)
	}
	return extra
}

// additional returns the addresses of in-zone MX and SRV targets.
func (s *snapshot) additional(z *zoneData, rrs []dns.RR) (extra []dns.RR) {
	var seen map[string]bool
	for _, rr := range rrs {
		var name string
		switch x := rr.(type) {
		case *dns.MX:
			name = x.Mx
		case *dns.SRV:
			name = x.Target
		default:
			return nil
		}
		if seen[name] || !dns.IsSubDomain(z.origin, name) {
			continue
		}
		if seen == nil {
			seen = map[string]bool{}
		}
		seen[name] = true
		extra = s.addrs(extra, name)
	}
	return extra
}
