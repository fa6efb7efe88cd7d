package gslb

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/request"
	"github.com/fleetdns/fleetdns/internal/corefile"

	"github.com/miekg/dns"
)

// The witness: before a silent peer counts as having no targets, the other
// peers are asked how they see it (TXT _gslb-peers.<zone>); while a majority
// of those that answer still see it up, its last answers are kept (up to
// the ceiling) and it is partitioned, not down. Rounds run in the
// background; the query path reads their last verdict with one atomic load.

// peersLabel starts the name of the witness record, _gslb-peers.<zone>.
const peersLabel = "_gslb-peers."

// witnessCeilingFactor: without `ceiling`, a vouched-for peer is kept for
// this many times split_brain_threshold since its last good answer.
const witnessCeilingFactor = 5

// witnessConfig is the `witness` block.
type witnessConfig struct {
	off        bool
	from       []netip.Prefix // who may ask; nil: the peers' addresses
	ceiling    time.Duration  // 0 until derive: witnessCeilingFactor x split_brain_threshold
	ceilingSet bool
	ceilingLn  int           // the Corefile line of ceiling, for the check in finish
	every      time.Duration // how often silent peers are witnessed (derive)
	valid      time.Duration // how long a verdict is believed (derive)
}

// witness parses `witness [off] [{ from CIDR...; ceiling DURATION }]`.
func (p *parser) witness(c *caddy.Controller) error {
	w := p.g.wit
	switch args := corefile.Args(c); {
	case len(args) == 1 && args[0] == "off":
		w.off = true
	case len(args) != 0:
		return c.ArgErr()
	}
	if !corefile.OpensBlock(c) {
		return nil
	}
	for c.NextBlock() {
		switch c.Val() {
		case "from":
			pfx, err := corefile.Prefixes(c)
			if err != nil {
				return err
			}
			w.from = append(w.from, pfx...)
		case "ceiling":
			w.ceilingLn = c.Line()
			d, err := corefile.Duration(c, time.Second)
			if err != nil {
				return err
			}
			w.ceiling, w.ceilingSet = d, true
		default:
			return c.Errf("unknown property %q in witness", c.Val())
		}
	}
	return nil
}

// finishWitness checks the ceiling against split_brain_threshold, which
// may come after the witness block.
func (p *parser) finishWitness(c *caddy.Controller) error {
	g, w := p.g, p.g.wit
	if w.ceilingSet && w.ceiling <= g.splitBrain {
		return fmt.Errorf("%s:%d - Error during parsing: witness ceiling %s must be longer than split_brain_threshold %s",
			c.File(), w.ceilingLn, w.ceiling, g.splitBrain)
	}
	return nil
}

// deriveWitness sets the timings that follow from the others: a silent
// peer is witnessed once a second (at most every refresh, never more often
// than the peer loops look), and a verdict outlives two rounds.
func (g *GSLB) deriveWitness() {
	w := g.wit
	if !w.ceilingSet {
		w.ceiling = witnessCeilingFactor * g.splitBrain
	}
	w.every = max(g.tick, min(g.refresh, time.Second))
	w.valid = 2 * (w.every + g.timeout)
}

// verdict is what the other peers said about one silent peer in one round.
type verdict struct {
	at        time.Time
	vouched   []string // tags that see it up
	against   []string // tags that answered and do not
	uncounted []string // tags that were asked and gave no view of it (k8gb peers, timeouts)
}

// majority: more of those that answered see the peer up than not.
func (v *verdict) majority() bool { return len(v.vouched) > len(v.against) }

// vouched reports whether a recent witness round found a majority that
// sees p up.
func (p *peer) vouched(now time.Time) bool {
	w := p.g.wit
	if w == nil || w.off {
		return false
	}
	v := p.verdict.Load()
	return v != nil && now.Sub(v.at) <= w.valid && v.majority()
}

// silentState is the state of a peer whose last query failed: stale within
// split_brain_threshold of its last good answer; past it partitioned while
// the other peers vouch for it and the ceiling has not passed; else down. A
// peer that never answered is down: there is no answer to keep.
func (p *peer) silentState(now time.Time) state {
	last := p.lastOK.Load()
	if last == 0 {
		return stateDown
	}
	age := now.Sub(time.Unix(0, last))
	if age <= p.g.splitBrain {
		return stateStale
	}
	if p.vouched(now) && age <= p.g.wit.ceiling {
		return statePartitioned
	}
	return stateDown
}

// witnessed reports whether p is silent and has a last answer the witness
// could keep: the witness rounds ask the others about it.
func (p *peer) witnessed(now time.Time) bool {
	switch state(p.st.Load()) {
	case stateStale, statePartitioned, stateDown:
		last := p.lastOK.Load()
		return last != 0 && now.Sub(time.Unix(0, last)) <= p.g.wit.ceiling
	}
	return false
}

// unwitnessed reports whether p, answering until now or stale, would go
// down at its next failure with no recent verdict of the witness: its last
// answer is past split_brain_threshold and within the ceiling.
func (p *peer) unwitnessed() bool {
	g := p.g
	if g.wit.off {
		return false
	}
	switch state(p.st.Load()) {
	case stateUp, stateStale, statePartitioned:
	default:
		return false
	}
	now := g.now()
	last := p.lastOK.Load()
	if last == 0 {
		return false
	}
	age := now.Sub(time.Unix(0, last))
	if age <= g.splitBrain || age > g.wit.ceiling {
		return false
	}
	v := p.verdict.Load()
	return v == nil || now.Sub(v.at) > g.wit.valid
}

// loopCtx is the context of the background loops (Background before start).
func (g *GSLB) loopCtx() context.Context {
	if g.ctx == nil {
		return context.Background()
	}
	return g.ctx
}

// settle moves a silent peer to the state its age and the last verdict
// give (stale, partitioned, down), logged once per change. A peer that
// answers meanwhile is left to observe.
func (p *peer) settle() {
	now := p.g.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	old := state(p.st.Load())
	switch old {
	case stateStale, statePartitioned, stateDown:
	default:
		return
	}
	if next := p.silentState(now); next != old {
		p.moveTo(old, next, nil)
	}
}

// runWitness witnesses the silent peers every w.every until ctx is done.
func (g *GSLB) runWitness(ctx context.Context) {
	every(ctx, max(g.wit.every, 50*time.Millisecond), nil, g.witnessRound)
}

// witnessRound asks every peer that is up for its view of the others, once,
// when some peer is silent, and gives each silent peer its verdict. A round
// costs one TXT query per peer that is up, and none while every peer
// answers.
func (g *GSLB) witnessRound(ctx context.Context) {
	now := g.now()
	ps := g.peers.Load().list
	var silent []*peer
	for _, p := range ps {
		if p.witnessed(now) {
			silent = append(silent, p)
		}
	}
	g.witness(ctx, silent)
}

// witness asks every peer that is up, other than the silent ones, for its
// view, and gives each silent peer its verdict.
func (g *GSLB) witness(ctx context.Context, silent []*peer) {
	if len(silent) == 0 {
		return
	}
	var asked []*peer
	for _, p := range g.peers.Load().list {
		if state(p.st.Load()) == stateUp && !slices.Contains(silent, p) {
			asked = append(asked, p)
		}
	}
	views := make([]map[string]peerReport, len(asked))
	var wg sync.WaitGroup
	sem := make(chan struct{}, cycleParallel)
	for i, w := range asked {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			views[i] = w.askPeers(ctx)
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	at := g.now()
	for _, s := range silent {
		v := &verdict{at: at}
		for i, w := range asked {
			e, ok := views[i][s.tag]
			switch {
			case !ok:
				v.uncounted = append(v.uncounted, w.tag)
			case e.up(g.splitBrain):
				v.vouched = append(v.vouched, w.tag)
			default:
				v.against = append(v.against, w.tag)
			}
		}
		s.verdict.Store(v)
		s.settle()
	}
}

// peerReport is one line of a _gslb-peers answer: how the answering cluster
// sees one of its peers.
type peerReport struct {
	state  string
	age    time.Duration
	ageSet bool
}

// up: the answering cluster sees the peer up, and heard from it within
// split_brain_threshold.
func (e peerReport) up(threshold time.Duration) bool {
	return e.state == stateUp.String() && e.ageSet && e.age <= threshold
}

// askPeers asks w for _gslb-peers.<zone> TXT. Nil when w gives no view:
// a timeout, an error rcode (a k8gb peer's NXDOMAIN or REFUSED), or an
// answer without any line of the format.
func (w *peer) askPeers(ctx context.Context) map[string]peerReport {
	g := w.g
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	m := new(dns.Msg)
	m.SetQuestion(peersLabel+g.zone, dns.TypeTXT)
	m.SetEdns0(dns.DefaultMsgSize, false)
	if g.fl != nil {
		g.fl.keys.Sign(m)
	}
	r, err := w.x.exchange(ctx, m, w.addr())
	if err != nil || r.Rcode != dns.RcodeSuccess {
		return nil
	}
	return parsePeersAnswer(r, g.maxPeers)
}

// parsePeersAnswer reads at most limit lines of a _gslb-peers answer, the
// first one per peer.
func parsePeersAnswer(r *dns.Msg, limit int) map[string]peerReport {
	var out map[string]peerReport
	for _, rr := range r.Answer {
		txt, ok := rr.(*dns.TXT)
		if !ok {
			continue
		}
		tag, e, ok := parsePeerLine(strings.Join(txt.Txt, ""))
		if !ok {
			continue
		}
		if out == nil {
			out = map[string]peerReport{}
		}
		if _, dup := out[tag]; !dup {
			out[tag] = e
		}
		if len(out) >= limit {
			break
		}
	}
	return out
}

// parsePeerLine reads `peer=TAG state=STATE [age=DURATION]`; other keys
// are ignored, for the fields a later version may add.
func parsePeerLine(s string) (tag string, e peerReport, ok bool) {
	for f := range strings.FieldsSeq(s) {
		k, v, found := strings.Cut(f, "=")
		if !found {
			continue
		}
		switch k {
		case "peer":
			tag = v
		case "state":
			e.state = v
		case "age":
			d, err := time.ParseDuration(v)
			if err == nil && d >= 0 {
				e.age, e.ageSet = d, true
			}
		}
	}
	return tag, e, tag != "" && e.state != ""
}

// peerLine is this cluster's view of p as one TXT string.
func peerLine(p *peer, now time.Time) string {
	l := "peer=" + p.tag + " state=" + p.state(now).String()
	if last := p.lastOK.Load(); last != 0 {
		age := max(now.Sub(time.Unix(0, last)), 0)
		l += " age=" + strconv.FormatInt(int64(age/time.Second), 10) + "s"
	}
	return l
}

// isPeersName reports whether qname (lower-case) is _gslb-peers.<zone>.
func (g *GSLB) isPeersName(qname string) bool {
	return len(qname) == len(peersLabel)+len(g.zone) && strings.HasPrefix(qname, peersLabel) && strings.HasSuffix(qname, g.zone)
}

// peersAllowed: a client in `from` (without it, one of the peers'
// addresses), a query signed with a fleet key, or an explain client.
func (g *GSLB) peersAllowed(w dns.ResponseWriter, r *dns.Msg) bool {
	src := remoteAddr(w)
	if g.explainAllowed(src) {
		return true
	}
	if g.fl != nil && g.fl.keys != nil && r.IsTsig() != nil && g.fl.keys.Verified(w, r) {
		return true
	}
	if g.wit.from == nil {
		return g.peerAt(src) != nil
	}
	for _, p := range g.wit.from {
		if p.Contains(src) {
			return true
		}
	}
	return false
}

// servePeers answers _gslb-peers.<zone>: one TXT per peer (at most
// max_peers) with this cluster's view of it, TTL 0, to allowed clients;
// NODATA to other types; REFUSED to everyone else, and with `witness off`.
func (g *GSLB) servePeers(state request.Request) (int, error) {
	w, r := state.W, state.Req
	if g.wit.off || !g.peersAllowed(w, r) {
		m := new(dns.Msg)
		m.SetRcode(r, dns.RcodeRefused)
		state.SizeAndDo(m)
		w.WriteMsg(m)
		// Written here: a REFUSED return would make the server write again.
		return dns.RcodeSuccess, nil
	}
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	if state.QType() == dns.TypeTXT {
		now := g.now()
		ps := g.peers.Load().list
		ps = ps[:min(len(ps), g.maxPeers)]
		m.Answer = make([]dns.RR, 0, len(ps))
		for _, p := range ps {
			m.Answer = append(m.Answer, &dns.TXT{
				Hdr: dns.RR_Header{Name: state.QName(), Rrtype: dns.TypeTXT, Class: dns.ClassINET},
				Txt: []string{peerLine(p, now)},
			})
		}
	}
	if len(m.Answer) == 0 {
		if soa := g.store.NegativeSOA(g.zone); soa != nil {
			m.Ns = []dns.RR{soa}
		}
	}
	state.SizeAndDo(m)
	m = state.Scrub(m)
	w.WriteMsg(m)
	return dns.RcodeSuccess, nil
}

// witnessExplain is the explain text of a silent peer's last verdict:
// which peers vouched for it, which did not, which gave no view.
func (p *peer) witnessExplain(st state) string {
	switch st {
	case stateStale, statePartitioned, stateDown:
	default:
		return ""
	}
	v := p.verdict.Load()
	if v == nil {
		return ""
	}
	list := func(tags []string) string {
		if len(tags) == 0 {
			return "-"
		}
		return strings.Join(slices.Sorted(slices.Values(tags)), ",")
	}
	return fmt.Sprintf(" witness %.1fs ago: vouched for by %s, not by %s, no view from %s",
		p.g.now().Sub(v.at).Seconds(), list(v.vouched), list(v.against), list(v.uncounted))
}
