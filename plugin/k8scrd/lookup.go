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

// lookup answers qname/qtype from the zone z in snapshot s: map lookups per
// label of qname, no scan. It returns the answer, authority and additional sections.
func (s *snapshot) lookup(z *zoneData, qname string, qtype uint16) (answer, ns, extra []dns.RR, res result) {
	if qname == z.origin {
		switch qtype {
		case dns.TypeSOA:
			return z.soa, z.ns, nil, success
		case dns.TypeNS:
			return z.ns, nil, s.glue(z.ns), success
		}
		if n := s.get(qname); n != nil && n.declared() {
			return s.answer(z, n, qname, qtype, false)
		}
		return nil, z.negSOA, nil, noData
	}

	if z.cuts > 0 {
		if cut, at := s.cut(z, qname); cut != nil {
			if at == qname && qtype == dns.TypeDS {
				// The DS RRset lives on the parent side of the cut; we hold none.
				return nil, z.negSOA, nil, noData
			}
			return nil, cut.get(dns.TypeNS), s.glue(cut.get(dns.TypeNS)), delegation
		}
	}

	n := s.get(qname)
	if n != nil {
		if !n.declared() { // RFC 8020: an empty non-terminal exists, NODATA
			return nil, z.negSOA, nil, noData
		}
		return s.answer(z, n, qname, qtype, false)
	}

	// RFC 4592 §3.3.1: the wildcard at the closest encloser is the source of synthesis.
	if w := s.wildcard(z, qname); w != nil {
		if !w.declared() {
			return nil, z.negSOA, nil, noData
		}
		return s.answer(z, w, qname, qtype, true)
	}
	return nil, z.negSOA, nil, nameError
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
func (s *snapshot) answer(z *zoneData, n *node, qname string, qtype uint16, wild bool) (answer, ns, extra []dns.RR, res result) {
	if cname := n.get(dns.TypeCNAME); len(cname) > 0 && qtype != dns.TypeCNAME {
		return s.chase(z, synth(cname, qname, wild), qtype)
	}
	rrs := n.get(qtype)
	if len(rrs) == 0 {
		return nil, z.negSOA, nil, noData
	}
	return synth(rrs, qname, wild), z.ns, s.additional(rrs), success
}

// chase follows a CNAME chain inside the zone (RFC 1034 §4.3.2). The rcode is
// that of the last name in the chain (RFC 6604 §3). A target outside the zone
// ends the chain: the resolver follows it.
func (s *snapshot) chase(z *zoneData, answer []dns.RR, qtype uint16) ([]dns.RR, []dns.RR, []dns.RR, result) {
	seen := map[string]bool{}
	for range maxChain {
		target := answer[len(answer)-1].(*dns.CNAME).Target
		if seen[target] || !dns.IsSubDomain(z.origin, target) {
			return answer, z.ns, nil, success
		}
		seen[target] = true
		var ans2, ns2, extra2 []dns.RR
		var res result
		if target == z.origin {
			ans2, ns2, extra2, res = s.lookup(z, target, qtype)
		} else {
			if z.cuts > 0 {
				if cut, _ := s.cut(z, target); cut != nil {
					return answer, cut.get(dns.TypeNS), s.glue(cut.get(dns.TypeNS)), delegation
				}
			}
			n := s.get(target)
			wild := false
			if n == nil {
				n, wild = s.wildcard(z, target), true
			}
			switch {
			case n == nil:
				return answer, z.negSOA, nil, nameError
			case !n.declared():
				return answer, z.negSOA, nil, noData
			}
			if cname := n.get(dns.TypeCNAME); len(cname) > 0 && qtype != dns.TypeCNAME {
				answer = append(answer, synth(cname, target, wild)...)
				continue
			}
			rrs := n.get(qtype)
			if len(rrs) == 0 {
				return answer, z.negSOA, nil, noData
			}
			ans2, ns2, extra2, res = synth(rrs, target, wild), z.ns, s.additional(rrs), success
		}
		return append(answer, ans2...), ns2, extra2, res
	}
	return answer, z.ns, nil, success
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

// glue returns the A and AAAA records of the name servers in nsrrs that lie
// at or below their NS owner (in bailiwick), as a referral needs them.
func (s *snapshot) glue(nsrrs []dns.RR) (glue []dns.RR) {
	for _, rr := range nsrrs {
		ns, ok := rr.(*dns.NS)
		if !ok || !dns.IsSubDomain(ns.Hdr.Name, ns.Ns) {
			continue
		}
		if n := s.get(ns.Ns); n != nil {
			glue = append(glue, n.get(dns.TypeA)...)
			glue = append(glue, n.get(dns.TypeAAAA)...)
		}
	}
	return glue
}

// additional returns the addresses of in-store MX and SRV targets.
func (s *snapshot) additional(rrs []dns.RR) (extra []dns.RR) {
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
		if seen[name] {
			continue
		}
		if seen == nil {
			seen = map[string]bool{}
		}
		seen[name] = true
		if n := s.get(name); n != nil {
			extra = append(extra, n.get(dns.TypeA)...)
			extra = append(extra, n.get(dns.TypeAAAA)...)
		}
	}
	return extra
}
