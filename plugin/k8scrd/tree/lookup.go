package tree

import (
	"strings"

	"github.com/miekg/dns"
)

// Result is the kind of answer a lookup produced.
type Result int

const (
	Success Result = iota
	NameError
	NoData
	Delegation
)

// maxChain bounds how many CNAMEs inside a zone are followed for one answer.
const maxChain = 8

// Reply is what a lookup produced, by section. The additional section is in
// two parts: glue is what the answer requires (in-domain glue of a referral,
// RFC 9471: TC when it does not fit), extra is optional (addresses of the
// name servers, mail exchangers and services an answer names, sibling glue:
// added when it fits, dropped without TC). Sibling is the part of a
// referral's optional data that is glue under another delegation of the
// zone: never signed (RFC 4035 §2.2), so given with DO set too, as Knot and
// NSD give it; Extra then holds the rest.
type Reply struct {
	Answer, NS  []dns.RR
	Glue, Extra []dns.RR
	Sibling     []dns.RR
	Res         Result
	Wildcard    string // the owner of the wildcard the answer was synthesized from (rrl's imputed name)
}

// Lookup answers qname/qtype from the zone z in snapshot s: map lookups per
// label of qname, no scan. A positive answer carries no authority NS set
// (minimal responses, as Knot and BIND give them).
func (s *Snapshot) Lookup(z *Zone, qname string, qtype uint16) Reply {
	if qname == z.Origin {
		switch qtype {
		case dns.TypeSOA:
			return Reply{Answer: z.SOA}
		case dns.TypeNS:
			return Reply{Answer: z.NS, Extra: s.addresses(z, z.NS, nil)}
		case dns.TypeANY:
			return s.anyApex(z)
		}
		if n := s.Get(qname); n != nil && n.Declared() {
			return s.answer(z, n, qname, qtype, false)
		}
		return Reply{NS: z.NegSOA, Res: NoData}
	}

	if z.Cuts > 0 {
		if cut, at := s.cut(z, qname); cut != nil {
			if at == qname && qtype == dns.TypeDS {
				// The DS RRset lives on the parent side of the cut; we hold none.
				return Reply{NS: z.NegSOA, Res: NoData}
			}
			return s.referral(z, cut)
		}
	}

	n := s.Get(qname)
	if n != nil {
		if !n.Declared() { // RFC 8020: an empty non-terminal exists, NODATA
			return Reply{NS: z.NegSOA, Res: NoData}
		}
		return s.answer(z, n, qname, qtype, false)
	}

	// RFC 4592 §3.3.1: the wildcard at the closest encloser is the source of synthesis.
	if w := s.wildcard(z, qname); w != nil {
		if !w.Declared() {
			return Reply{NS: z.NegSOA, Res: NoData}
		}
		rep := s.answer(z, w, qname, qtype, true)
		rep.Wildcard = w.Host.Name
		return rep
	}
	return Reply{NS: z.NegSOA, Res: NameError}
}

// referral is the delegation at cut: its NS RRset, the in-domain glue it
// requires and the other addresses of its name servers that the zone holds.
func (s *Snapshot) referral(z *Zone, cut *Node) Reply {
	nsrrs := cut.Get(dns.TypeNS)
	var glue []dns.RR
	for _, rr := range nsrrs {
		if ns, ok := rr.(*dns.NS); ok && dns.IsSubDomain(ns.Hdr.Name, ns.Ns) {
			glue = s.addrs(glue, ns.Ns)
		}
	}
	sib, extra := s.siblings(z, s.addresses(z, nsrrs, cut))
	return Reply{NS: nsrrs, Glue: glue, Sibling: sib, Extra: extra, Res: Delegation}
}

// siblings splits a referral's optional addresses into sibling glue (owned
// by a name under a delegation of z) and the rest (authoritative data).
func (s *Snapshot) siblings(z *Zone, addrs []dns.RR) (sib, rest []dns.RR) {
	if z.Cuts == 0 {
		return nil, addrs
	}
	for _, rr := range addrs {
		if cut, _ := s.cut(z, rr.Header().Name); cut != nil {
			sib = append(sib, rr)
		} else {
			rest = append(rest, rr)
		}
	}
	return sib, rest
}

// anyApex answers ANY at the apex: its RRset of the lowest type, among
// the SOA, the NS RRset and what the objects declare there (see answer).
func (s *Snapshot) anyApex(z *Zone) Reply {
	if n := s.Get(z.Origin); n != nil && len(n.RRsets) > 0 && n.RRsets[0].Type < dns.TypeNS {
		return Reply{Answer: n.RRsets[0].RRs}
	}
	return Reply{Answer: z.NS}
}

// cut returns the delegation at or above qname (below the apex) and its name, if any.
func (s *Snapshot) cut(z *Zone, qname string) (*Node, string) {
	// Label offsets of qname's names below the apex, without allocating.
	var offs [128]int
	k := 0
	for off := 0; off < len(qname)-len(z.Origin) && k < len(offs); k++ {
		offs[k] = off
		i := strings.IndexByte(qname[off:], '.')
		if i < 0 {
			break
		}
		off += i + 1
	}
	// Walk from just below the apex down to qname: the highest cut wins.
	for j := k - 1; j >= 0; j-- {
		if n := s.Get(qname[offs[j]:]); n != nil && n.Cut {
			return n, qname[offs[j]:]
		}
	}
	return nil, ""
}

// wildcard returns the node at *.<closest encloser> of qname, or nil.
func (s *Snapshot) wildcard(z *Zone, qname string) *Node {
	ce := Parent(qname)
	for ce != z.Origin && len(ce) > len(z.Origin) {
		if s.Get(ce) != nil {
			break
		}
		ce = Parent(ce)
	}
	return s.Get("*." + ce)
}

// answer answers from the declared node n, found for qname (by wildcard when wild).
func (s *Snapshot) answer(z *Zone, n *Node, qname string, qtype uint16, wild bool) Reply {
	if qtype == dns.TypeANY && len(n.RRsets) > 0 {
		// One RRset of the name (RFC 8482 §4.1), never an empty NODATA:
		// the one of the lowest type, as Knot and NSD choose it (rrsets
		// are sorted by type). Over TCP too, as they answer.
		return Reply{Answer: synth(n.RRsets[0].RRs, qname, wild)}
	}
	if cname := n.Get(dns.TypeCNAME); len(cname) > 0 && qtype != dns.TypeCNAME {
		return s.chase(z, synth(cname, qname, wild), qtype)
	}
	rrs := n.Get(qtype)
	if len(rrs) == 0 {
		return Reply{NS: z.NegSOA, Res: NoData}
	}
	return Reply{Answer: synth(rrs, qname, wild), Extra: s.additional(z, rrs)}
}

// chase follows a CNAME chain inside the zone (RFC 1034 §4.3.2). The rcode is
// that of the last name in the chain (RFC 6604 §3). A target outside the zone
// ends the chain: the resolver follows it.
func (s *Snapshot) chase(z *Zone, answer []dns.RR, qtype uint16) Reply {
	seen := map[string]bool{}
	for range maxChain {
		target := answer[len(answer)-1].(*dns.CNAME).Target
		if seen[target] || !dns.IsSubDomain(z.Origin, target) {
			return Reply{Answer: answer}
		}
		seen[target] = true
		var r Reply
		if target == z.Origin {
			r = s.Lookup(z, target, qtype)
		} else {
			if z.Cuts > 0 {
				if cut, _ := s.cut(z, target); cut != nil {
					r = s.referral(z, cut)
					r.Answer = answer
					return r
				}
			}
			n := s.Get(target)
			wild := false
			if n == nil {
				n, wild = s.wildcard(z, target), true
			}
			switch {
			case n == nil:
				return Reply{Answer: answer, NS: z.NegSOA, Res: NameError}
			case !n.Declared():
				return Reply{Answer: answer, NS: z.NegSOA, Res: NoData}
			}
			if cname := n.Get(dns.TypeCNAME); len(cname) > 0 && qtype != dns.TypeCNAME {
				answer = append(answer, synth(cname, target, wild)...)
				continue
			}
			rrs := n.Get(qtype)
			if len(rrs) == 0 {
				return Reply{Answer: answer, NS: z.NegSOA, Res: NoData}
			}
			r = Reply{Answer: synth(rrs, target, wild), Extra: s.additional(z, rrs)}
		}
		r.Answer = append(answer, r.Answer...)
		return r
	}
	return Reply{Answer: answer}
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
func (s *Snapshot) addrs(to []dns.RR, name string) []dns.RR {
	if n := s.Get(name); n != nil {
		to = append(to, n.Get(dns.TypeA)...)
		to = append(to, n.Get(dns.TypeAAAA)...)
	}
	return to
}

// addresses returns the optional additional data of an NS RRset: the
// addresses of its name servers that zone z holds, other than the in-domain
// glue of the delegation at cut (nil for the apex NS), which is required and
// given apart. Sibling glue, under another delegation of the zone, is
// among them (RFC 9471 §2.2, RFC 1034 §4.3.2 step 3b).
func (s *Snapshot) addresses(z *Zone, nsrrs []dns.RR, cut *Node) (extra []dns.RR) {
	for _, rr := range nsrrs {
		ns, ok := rr.(*dns.NS)
		if !ok || !dns.IsSubDomain(z.Origin, ns.Ns) || cut != nil && dns.IsSubDomain(ns.Hdr.Name, ns.Ns) {
			continue
		}
		extra = s.addrs(extra, ns.Ns)
	}
	return extra
}

// additional returns the addresses of in-zone MX and SRV targets.
func (s *Snapshot) additional(z *Zone, rrs []dns.RR) (extra []dns.RR) {
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
		if seen[name] || !dns.IsSubDomain(z.Origin, name) {
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
