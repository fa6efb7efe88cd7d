package gslb

import (
	"context"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// exchanger asks one server one question, for both of gslb's clients: the
// peers' localtargets- queries and the parent's NS and glue queries.
//
// It is not plugin/pkg/proxy: proxy keeps UDP sockets open and hands them
// to the next query, so queries to a peer would share a source port, and a
// spoofed answer would only have to guess the 16-bit ID (RFC 5452 §9.2 asks
// for both). Every exchange here dials its own socket, so each query has a
// fresh random source port; its ID is the random one SetQuestion gave it.
type exchanger struct {
	udp, tcp *dns.Client
}

// newExchanger returns an exchanger whose every attempt (the UDP one, and
// the TCP one after a truncated answer) lasts at most timeout, or until the
// caller's context ends, whichever comes first.
func newExchanger(timeout time.Duration) exchanger {
	return exchanger{
		udp: &dns.Client{Net: "udp", Timeout: timeout},
		tcp: &dns.Client{Net: "tcp", Timeout: timeout},
	}
}

// exchange sends m to server over UDP, and again over TCP when the answer
// is truncated (RFC 7766 §5). A UDP datagram with another ID is not the
// answer and is skipped (dns.Client reads on until the timeout); an answer
// to another question is an error.
func (x exchanger) exchange(ctx context.Context, m *dns.Msg, server string) (*dns.Msg, error) {
	r, _, err := x.udp.ExchangeContext(ctx, m, server)
	if err == nil && r.Truncated {
		r, _, err = x.tcp.ExchangeContext(ctx, m, server)
	}
	if err != nil {
		return nil, err
	}
	if err := answersQuestion(m, r); err != nil {
		return nil, err
	}
	return r, nil
}

// answersQuestion checks that r carries q's one question: name (in any
// case, RFC 4343), type and class.
func answersQuestion(q, r *dns.Msg) error {
	if len(r.Question) != 1 || len(q.Question) != 1 {
		return failed(reasonWrongQuestion, "question count")
	}
	qq, rq := q.Question[0], r.Question[0]
	if rq.Qtype != qq.Qtype || rq.Qclass != qq.Qclass || !strings.EqualFold(rq.Name, qq.Name) {
		return failed(reasonWrongQuestion, rq.String())
	}
	return nil
}
