package fleet

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/coredns/coredns/request"

	"github.com/miekg/dns"
)

// NOTIFY retries: an unanswered NOTIFY is sent again after notifyBackoff,
// doubling, notifyTries times in all (RFC 1996 §3.6 leaves the interval to
// the implementation; a fleet wants seconds, not minutes).
const (
	notifyTries   = 5
	notifyBackoff = 250 * time.Millisecond
	notifyTimeout = time.Second
)

// maxNotifyState caps the per-peer memory of the last NOTIFY result (kept
// for logging once per change); peers come and go with discovery.
const maxNotifyState = 1024

// notifier is the Publisher's NOTIFY state: at most one NOTIFY in flight per
// peer, and one more pending when asked again meanwhile.
type notifier struct {
	nmu      sync.Mutex
	inflight map[string]bool // peer: a goroutine is sending
	pending  map[string]bool // peer: send again when done
	last     map[string]string
}

// Notify sends a NOTIFY for the current serial to each peer (host:port),
// signed when keys are set, in the background: it never blocks. Each peer
// has at most one NOTIFY in flight; a Notify while one is in flight to that
// peer is folded into one more NOTIFY after it (coalescing). A NOTIFY that
// gets no answer (lost, or the peer unreachable) is retried with backoff
// (250 ms doubling, 5 tries); a REFUSED or other answer is final. ctx ends
// the retries.
func (p *Publisher) Notify(ctx context.Context, peers []string) {
	if p.cur.Load() == nil {
		return
	}
	p.nmu.Lock()
	defer p.nmu.Unlock()
	if p.inflight == nil {
		p.inflight, p.pending = map[string]bool{}, map[string]bool{}
	}
	for _, peer := range peers {
		if p.inflight[peer] {
			p.pending[peer] = true
			continue
		}
		p.inflight[peer] = true
		go p.notifyLoop(ctx, peer)
	}
}

func (p *Publisher) notifyLoop(ctx context.Context, peer string) {
	for {
		result, err := p.notifyOnce(ctx, peer)
		notifiesTotal.WithLabelValues(result).Inc()
		p.nmu.Lock()
		if p.last == nil || len(p.last) >= maxNotifyState {
			p.last = map[string]string{}
		}
		if p.last[peer] != result {
			p.last[peer] = result
			if err != nil {
				log.Warningf("NOTIFY of %s to %s: %s: %v", p.names.apex, peer, result, err)
			} else {
				log.Infof("NOTIFY of %s to %s: %s", p.names.apex, peer, result)
			}
		}
		again := p.pending[peer] && ctx.Err() == nil
		delete(p.pending, peer)
		if !again {
			delete(p.inflight, peer)
			p.nmu.Unlock()
			return
		}
		p.nmu.Unlock()
	}
}

// notifyOnce sends one NOTIFY with its retries and returns the result for
// the metric and log.
func (p *Publisher) notifyOnce(ctx context.Context, peer string) (string, error) {
	c := &dns.Client{Net: "udp", Timeout: notifyTimeout, TsigSecret: p.keys.Secrets()}
	backoff := notifyBackoff
	var err error
	for try := 0; try < notifyTries; try++ {
		if try > 0 {
			select {
			case <-ctx.Done():
				return "timeout", ctx.Err()
			case <-time.After(backoff):
			}
			backoff *= 2
		}
		st := p.cur.Load()
		m := new(dns.Msg)
		m.SetNotify(p.names.apex)
		m.Answer = []dns.RR{st.soa} // RFC 1996 §3.7: the new SOA
		p.keys.Sign(m)
		var r *dns.Msg
		r, _, err = c.ExchangeContext(ctx, m, peer)
		if err != nil {
			if isTSIGErr(err) { // an answer, wrongly signed
				return "error", err
			}
			continue // no answer: lost, or the peer is (re)starting
		}
		if p.keys != nil && r.IsTsig() == nil && r.Rcode == dns.RcodeSuccess {
			return "error", errors.New("answer not signed")
		}
		if r.Rcode != dns.RcodeSuccess {
			return "refused", errors.New(dns.RcodeToString[r.Rcode])
		}
		return "ok", nil
	}
	var nerr net.Error
	if errors.As(err, &nerr) && nerr.Timeout() {
		return "timeout", err
	}
	return "error", err
}

// IsNotify reports whether r is a NOTIFY for the view of zone (opcode NOTIFY,
// question _fleet.<zone> SOA IN), and the serial it carries (RFC 1996 §3.7,
// 0 when absent).
func IsNotify(r *dns.Msg, zone string) (serial uint32, ok bool) {
	if r.Opcode != dns.OpcodeNotify || r.Response || len(r.Question) != 1 {
		return 0, false
	}
	q := r.Question[0]
	if q.Qtype != dns.TypeSOA || q.Qclass != dns.ClassINET || dns.CanonicalName(q.Name) != Name(zone) {
		return 0, false
	}
	for _, rr := range r.Answer {
		if soa, ok := rr.(*dns.SOA); ok && dns.CanonicalName(soa.Hdr.Name) == Name(zone) {
			return soa.Serial, true
		}
	}
	return 0, true
}

// AnswerNotify writes the answer to NOTIFY r with rcode (dns.RcodeSuccess or
// dns.RcodeRefused), signed with r's key when r was validly signed with one of
// keys (nil: never signed).
func AnswerNotify(w dns.ResponseWriter, r *dns.Msg, keys *Keys, rcode int) error {
	m := new(dns.Msg)
	m.SetRcode(r, rcode)
	m.Authoritative = rcode == dns.RcodeSuccess
	state := request.Request{W: w, Req: r}
	state.SizeAndDo(m) // the OPT before the TSIG
	keys.signReply(w, r, m)
	return w.WriteMsg(m)
}
