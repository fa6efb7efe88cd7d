package gslb

import (
	"errors"
	"net/netip"
	"strings"

	"github.com/miekg/dns"
)

// maxTargets bounds the targets kept from one peer answer per address family.
const maxTargets = 64

// Reasons a peer answer is a failure; they are the values of the reason
// label of coredns_gslb_peer_failures_total.
const (
	reasonTimeout       = "timeout"
	reasonNetwork       = "network"
	reasonRcode         = "rcode"
	reasonMalformed     = "malformed"
	reasonWrongID       = "wrong_id"
	reasonWrongQuestion = "wrong_question"
	reasonWrongType     = "wrong_type"
)

// answerError is a peer answer that counts as a failure of the peer.
type answerError struct {
	reason string
	detail string
}

func (e *answerError) Error() string { return e.reason + ": " + e.detail }

func failed(reason, detail string) error { return &answerError{reason: reason, detail: detail} }

// reasonOf returns the failure reason of err for the metrics.
func reasonOf(err error) string {
	var ae *answerError
	if errors.As(err, &ae) {
		return ae.reason
	}
	if errors.Is(err, dns.ErrId) {
		return reasonWrongID
	}
	var ne interface{ Timeout() bool }
	if errors.As(err, &ne) && ne.Timeout() {
		return reasonTimeout
	}
	return reasonNetwork
}

// peerAnswer is what one peer said about one family of one host. A peer
// answers localtargets-<host> with NOERROR and data, NODATA, or NXDOMAIN:
// all three mean "up, and these (or no) targets".
type peerAnswer struct {
	addrs []netip.Addr
	// ttl is the smallest TTL of the data, or for an empty answer the
	// negative TTL from the SOA in authority (RFC 2308 §5); ttlSet is false
	// when the answer carried neither.
	ttl    uint32
	ttlSet bool
	// dropped counts targets beyond maxTargets.
	dropped int
}

// parsePeerAnswer checks that r answers q (a localtargets A or AAAA
// question) and returns its targets. Peer answers are untrusted: anything
// that is not a well-formed answer to exactly this question is an error,
// never a panic. The AA bit is not required (k8gb's plugin never sets it).
func parsePeerAnswer(q, r *dns.Msg) (peerAnswer, error) {
	var pa peerAnswer
	if r == nil {
		return pa, failed(reasonMalformed, "no message")
	}
	if r.Id != q.Id {
		return pa, failed(reasonWrongID, "id mismatch")
	}
	if !r.Response || r.Opcode != dns.OpcodeQuery {
		return pa, failed(reasonMalformed, "not a query response")
	}
	if err := answersQuestion(q, r); err != nil {
		return pa, err
	}
	qq := q.Question[0]
	switch r.Rcode {
	case dns.RcodeSuccess, dns.RcodeNameError:
	default:
		return pa, failed(reasonRcode, dns.RcodeToString[r.Rcode])
	}
	if r.Rcode == dns.RcodeNameError && len(r.Answer) > 0 {
		return pa, failed(reasonMalformed, "NXDOMAIN with answers")
	}

	for _, rr := range r.Answer {
		h := rr.Header()
		if h.Rrtype != qq.Qtype || h.Class != dns.ClassINET || !strings.EqualFold(h.Name, qq.Name) {
			return pa, failed(reasonWrongType, dns.TypeToString[h.Rrtype]+" "+h.Name)
		}
		var addr netip.Addr
		var ok bool
		switch x := rr.(type) {
		case *dns.A:
			addr, ok = netip.AddrFromSlice(x.A.To4())
		case *dns.AAAA:
			addr, ok = netip.AddrFromSlice(x.AAAA.To16())
			if ok && addr.Is4In6() {
				ok = false
			}
		}
		if !ok {
			return pa, failed(reasonMalformed, "bad address in "+dns.TypeToString[h.Rrtype])
		}
		if !pa.ttlSet || h.Ttl < pa.ttl {
			pa.ttl, pa.ttlSet = h.Ttl, true
		}
		if containsAddr(pa.addrs, addr) {
			continue
		}
		if len(pa.addrs) >= maxTargets {
			pa.dropped++
			continue
		}
		pa.addrs = append(pa.addrs, addr)
	}
	if len(r.Answer) == 0 {
		for _, rr := range r.Ns {
			if soa, ok := rr.(*dns.SOA); ok {
				pa.ttl, pa.ttlSet = min(soa.Hdr.Ttl, soa.Minttl), true
				break
			}
		}
	}
	return pa, nil
}

func containsAddr(list []netip.Addr, a netip.Addr) bool {
	for _, x := range list {
		if x == a {
			return true
		}
	}
	return false
}
