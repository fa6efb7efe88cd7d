package gslb

import (
	"context"
	"errors"
	"net"
	"os"
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
	timeout time.Duration
	tcp     *dns.Client
	// tsig holds the secrets of the fleet's keys: a query signed with
	// one (fleet.Keys.Sign) is sent with its MAC. Nil: nothing is signed.
	tsig map[string]string
}

// withTSIG returns x sending signed queries with the secrets.
func (x exchanger) withTSIG(secrets map[string]string) exchanger {
	if secrets == nil {
		return x
	}
	x.tsig = secrets
	x.tcp = &dns.Client{Net: "tcp", Timeout: x.timeout, TsigSecret: secrets}
	return x
}

// newExchanger returns an exchanger whose every attempt (the UDP one, and
// the TCP one after a truncated answer) lasts at most timeout, or until the
// caller's context ends, whichever comes first.
func newExchanger(timeout time.Duration) exchanger {
	return exchanger{
		timeout: timeout,
		tcp:     &dns.Client{Net: "tcp", Timeout: timeout},
	}
}

// exchange sends m to server over UDP, and again over TCP when the answer
// is truncated (RFC 7766 §5).
func (x exchanger) exchange(ctx context.Context, m *dns.Msg, server string) (*dns.Msg, error) {
	r, err := x.udp(ctx, m, server)
	if err == nil && r.Truncated {
		r, _, err = x.tcp.ExchangeContext(ctx, m, server)
		if err == nil {
			err = answersQuestion(m, r)
		}
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}

// udp sends m over a socket of its own and reads until the answer arrives
// or the attempt's time is up. Like CoreDNS's proxy, it reads on past
// datagrams that are not the answer: one that does not decode (a stray
// 2-byte datagram is "dns: short read" to dns.Client, which then gives up)
// or carries another ID is skipped; one with the ID that is not a response
// to the question is remembered and reported when no answer follows, so a
// spoofed or stray datagram from the peer's address cannot fail a query that
// the real answer would complete.
func (x exchanger) udp(ctx context.Context, m *dns.Msg, server string) (*dns.Msg, error) {
	deadline := time.Now().Add(x.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var out []byte
	var err error
	if t := m.IsTsig(); t != nil && x.tsig != nil {
		// TsigGenerate takes the TSIG out of the message it packs.
		out, _, err = dns.TsigGenerate(m.Copy(), x.tsig[t.Hdr.Name], "", false)
	} else {
		out, err = m.Pack()
	}
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "udp", server)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	// The context may end before the deadline (the caller gives up).
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	conn.SetDeadline(deadline)
	if _, err := conn.Write(out); err != nil {
		return nil, err
	}

	// As large as the answer may be (RFC 1035's 512 octets, or the EDNS
	// size offered), as dns.Client reads it.
	size := dns.MinMsgSize
	if o := m.IsEdns0(); o != nil && int(o.UDPSize()) > size {
		size = int(o.UDPSize())
	}
	buf := make([]byte, size)
	var rejected error // why the last datagram with the query's ID was no answer
	for {
		n, err := conn.Read(buf)
		if err != nil {
			if rejected != nil && errors.Is(err, os.ErrDeadlineExceeded) {
				return nil, rejected
			}
			return nil, err
		}
		r := new(dns.Msg)
		if r.Unpack(buf[:n]) != nil || r.Id != m.Id {
			continue
		}
		if !r.Response {
			rejected = failed(reasonMalformed, "not a response")
			continue
		}
		if err := answersQuestion(m, r); err != nil {
			rejected = err
			continue
		}
		return r, nil
	}
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
