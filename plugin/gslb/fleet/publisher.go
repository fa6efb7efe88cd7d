package fleet

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coredns/coredns/request"

	"github.com/miekg/dns"
)

// Publisher is this cluster's view, served to peers and stock secondaries
// at _fleet.<zone>. Its methods are safe for concurrent use.
type Publisher struct {
	names names
	keys  *Keys
	lim   Limits

	mu      sync.Mutex // serializes Set
	cur     atomic.Pointer[published]
	lastBad string // the last line about hosts left out, under mu

	notifier
}

// published is one view as served: immutable.
type published struct {
	view    *View
	soa     *dns.SOA
	flat    []dns.RR   // SOA, NS, every host's records, SOA: an AXFR
	hostRRs [][]dns.RR // the records of view.Hosts[i], a slice of flat
	chunks  []int      // flat[chunks[i]:chunks[i+1]] is one AXFR message
	apex    []dns.RR   // SOA, NS
	journal []diff     // oldest first; the last one's to is view.Serial

	// The index of names, for queries of single names (kdig, people):
	// built on the first one, as peers only ask the SOA and transfer.
	index  sync.Once
	byName map[string][]dns.RR
	ents   map[string]bool // empty non-terminals
}

// diff is one change of the view, for IXFR.
type diff struct {
	from, to uint32
	del, add []dns.RR
}

// Journal bounds: at most this many changes, and no more records than the
// MaxRecords cap.
const maxJournal = 64

// chunkOctets is the most record octets (uncompressed) in one transfer
// message: with the header, the question and the TSIG still under the 64 KiB
// of a DNS message over TCP, and compressed to about half.
const chunkOctets = 60 << 10

// NewPublisher returns a Publisher of the view of zone. It serves nothing
// (SERVFAIL) until the first Set.
func NewPublisher(zone string, keys *Keys, lim Limits) *Publisher {
	return &Publisher{names: newNames(zone), keys: keys, lim: lim.withDefaults()}
}

// Zone returns the name of the view's zone, _fleet.<zone>.
func (p *Publisher) Zone() string { return p.names.apex }

// View returns the published view, nil before the first Set.
func (p *Publisher) View() *View {
	if st := p.cur.Load(); st != nil {
		return st.view
	}
	return nil
}

// Set publishes hosts as the new view, at a serial from the clock. Hosts
// need not be sorted; names are made fully qualified and lower case, hosts
// outside the zone, duplicates and what exceeds the caps are left out (and
// logged). The serial moves only when the view changes, and never backwards
// (see the package doc); changed says whether it did. The caller then sends
// Notify. A cluster of several replicas uses SetData instead.
func (p *Publisher) Set(hosts []Host) (serial uint32, changed bool) {
	return p.set(hosts, clockSerial(time.Now()), false)
}

// SetData publishes hosts as Set does, at a serial derived from data: the
// record store's SOA serial of the zone, which replicas serving the same
// data share. The view's serial is data << 8 when that is larger than the
// last, else the last plus one (a change of the view that the data serial
// does not account for, as a health verdict); and it follows data even when
// the hosts did not change, so that replicas that saw the same data and the
// same verdict changes publish the same serial for the same view (see the
// package doc).
func (p *Publisher) SetData(hosts []Host, data uint32) (serial uint32, changed bool) {
	return p.set(hosts, viewSerial(data), true)
}

func (p *Publisher) set(hosts []Host, base uint32, follow bool) (serial uint32, changed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	hs := p.normalize(hosts)
	old := p.cur.Load()
	var prev uint32
	if old != nil {
		prev = old.view.Serial
		if hostsEqual(old.view.Hosts, hs) && (!follow || !serialLess(prev, base)) {
			return prev, false
		}
	}
	serial = nextSerial(prev, old == nil, base)
	st := p.build(hs, serial, old)
	if old != nil {
		st.journal = p.journal(old, st)
	}
	p.cur.Store(st)
	return serial, true
}

// normalize returns the hosts of the view: normalized, sorted, unique, capped.
// What it leaves out is logged in one line, when that line changes: Set
// runs on every change, the same bad input must not flood the log.
func (p *Publisher) normalize(hosts []Host) []Host {
	hs := make([]Host, 0, len(hosts))
	var bad []string
	var prev []Host
	if old := p.cur.Load(); old != nil {
		prev = old.view.Hosts
	}
	for _, h := range hosts {
		// Most hosts have not changed: the published one serves, with
		// nothing copied or checked again.
		if o := find(prev, dns.CanonicalName(h.Name)); o != nil && sameInput(o, &h) {
			hs = append(hs, *o)
			continue
		}
		n, err := p.names.normalizeHost(h)
		if err != nil {
			bad = append(bad, err.Error())
			continue
		}
		hs = append(hs, n)
	}
	sort.SliceStable(hs, func(i, j int) bool { return hs[i].Name < hs[j].Name })
	out := hs[:0]
	records := 2 // SOA, NS
	octets := 2*dns.Len(p.names.soa(0)) + dns.Len(p.names.ns())
	for i := range hs {
		if len(out) > 0 && out[len(out)-1].Name == hs[i].Name {
			bad = append(bad, fmt.Sprintf("host %s given twice: the first kept", hs[i].Name))
			continue
		}
		_, long := p.names.owner(hs[i].Name)
		r := hostRecords(&hs[i], long)
		o := hostOctets(p.names, &hs[i])
		// Keep room for the messages' headers, questions and TSIG.
		if len(out)+1 > p.lim.MaxHosts || records+r > p.lim.MaxRecords || octets+o > p.lim.MaxOctets-p.lim.MaxOctets/32 {
			bad = append(bad, fmt.Sprintf("over the caps (%d hosts, %d records, %d octets): %d hosts from %s on",
				p.lim.MaxHosts, p.lim.MaxRecords, p.lim.MaxOctets, len(hs)-i, hs[i].Name))
			break
		}
		out = append(out, hs[i])
		records += r
		octets += o
	}
	line := ""
	switch len(bad) {
	case 0:
	case 1:
		line = fmt.Sprintf("View %s: left out: %s", p.names.apex, bad[0])
	default:
		line = fmt.Sprintf("View %s: %d left out, the first: %s", p.names.apex, len(bad), bad[0])
	}
	if line != p.lastBad {
		if line != "" {
			log.Warning(line)
		}
		p.lastBad = line
	}
	return out
}

// find returns the host of hosts (sorted) named name, or nil.
func find(hosts []Host, name string) *Host {
	i, ok := slices.BinarySearchFunc(hosts, name, func(h Host, name string) int { return strings.Compare(h.Name, name) })
	if !ok {
		return nil
	}
	return &hosts[i]
}

// sameInput reports whether h, as given to Set, is the published o.
func sameInput(o, h *Host) bool {
	if o.TTL != h.TTL || !slices.Equal(o.A, h.A) || !slices.Equal(o.AAAA, h.AAAA) || len(o.Policy) != len(h.Policy) {
		return false
	}
	for k, v := range h.Policy {
		if w, ok := o.Policy[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// hostOctets is the uncompressed length of a host's records, as dns.Len
// would count them, without encoding them.
func hostOctets(n names, h *Host) int {
	owner, long := n.owner(h.Name)
	rr := len(owner) + 1 + 10 // owner, type, class, TTL, RDLENGTH
	o := rr*(1+len(h.A)+len(h.AAAA)) + 4*len(h.A) + 16*len(h.AAAA)
	if len(h.Policy) == 0 {
		o++
	}
	for k, v := range h.Policy {
		o += 2 + len(k) + len(v)
	}
	if long {
		o += rr + len(h.Name) + 1
	}
	return o
}

// build encodes the view of hosts at serial, reusing the records of the
// hosts that have not changed since old (nil: none).
func (p *Publisher) build(hosts []Host, serial uint32, old *published) *published {
	n := p.names
	st := &published{
		view:    &View{Zone: n.zone, Serial: serial, Hosts: hosts},
		soa:     n.soa(serial),
		hostRRs: make([][]dns.RR, len(hosts)),
	}
	ns := n.ns()
	st.flat = append(make([]dns.RR, 0, 3+3*len(hosts)), st.soa, ns)
	st.apex = []dns.RR{st.soa, ns}
	var oh []Host
	if old != nil {
		oh = old.view.Hosts
	}
	j := 0
	for i := range hosts {
		start := len(st.flat)
		for j < len(oh) && oh[j].Name < hosts[i].Name {
			j++
		}
		if j < len(oh) && hostEqual(&oh[j], &hosts[i]) {
			st.flat = append(st.flat, old.hostRRs[j]...)
		} else {
			st.flat = n.encodeHost(st.flat, &hosts[i])
		}
		st.hostRRs[i] = st.flat[start:len(st.flat):len(st.flat)]
	}
	st.flat = append(st.flat, st.soa)
	st.chunks = chunk(st.flat)
	return st
}

// lookup returns the records at name and whether it is an empty
// non-terminal.
func (st *published) lookup(apex, name string) ([]dns.RR, bool) {
	if name == apex {
		return st.apex, false
	}
	st.index.Do(func() {
		st.byName = make(map[string][]dns.RR, len(st.hostRRs))
		st.ents = map[string]bool{}
		for _, rrs := range st.hostRRs {
			owner := rrs[0].Header().Name
			st.byName[owner] = rrs
			for o := parent(owner); o != apex && !st.ents[o]; o = parent(o) {
				st.ents[o] = true
			}
		}
		for o := range st.byName {
			delete(st.ents, o)
		}
	})
	return st.byName[name], st.ents[name]
}

func parent(name string) string {
	i, _ := dns.NextLabel(name, 0)
	return name[i:]
}

// chunk returns the boundaries of the messages that carry rrs.
func chunk(rrs []dns.RR) []int {
	b := []int{0}
	size := 0
	for i, rr := range rrs {
		l := dns.Len(rr)
		if size+l > chunkOctets && i > b[len(b)-1] {
			b = append(b, i)
			size = 0
		}
		size += l
	}
	return append(b, len(rrs))
}

// journal returns old's journal with the change from old to st, bounded.
func (p *Publisher) journal(old, st *published) []diff {
	d := diff{from: old.view.Serial, to: st.view.Serial}
	oh, nh := old.view.Hosts, st.view.Hosts
	i, j := 0, 0
	for i < len(oh) || j < len(nh) {
		switch {
		case j == len(nh) || (i < len(oh) && oh[i].Name < nh[j].Name):
			d.del = append(d.del, old.hostRRs[i]...)
			i++
		case i == len(oh) || nh[j].Name < oh[i].Name:
			d.add = append(d.add, st.hostRRs[j]...)
			j++
		default:
			if !hostEqual(&oh[i], &nh[j]) {
				del, add := rrDiff(old.hostRRs[i], st.hostRRs[j])
				d.del = append(d.del, del...)
				d.add = append(d.add, add...)
			}
			i++
			j++
		}
	}
	j0 := append(old.journal[:len(old.journal):len(old.journal)], d)
	total := 0
	for _, e := range j0 {
		total += len(e.del) + len(e.add)
	}
	for len(j0) > 0 && (len(j0) > maxJournal || total > p.lim.MaxRecords) {
		total -= len(j0[0].del) + len(j0[0].add)
		j0 = j0[1:]
	}
	return j0
}

// rrDiff returns the records of a not in b and of b not in a (TTL counts).
func rrDiff(a, b []dns.RR) (del, add []dns.RR) {
	in := func(rr dns.RR, set map[string]bool) bool { return set[rr.String()] }
	sa, sb := make(map[string]bool, len(a)), make(map[string]bool, len(b))
	for _, rr := range a {
		sa[rr.String()] = true
	}
	for _, rr := range b {
		sb[rr.String()] = true
	}
	for _, rr := range a {
		if !in(rr, sb) {
			del = append(del, rr)
		}
	}
	for _, rr := range b {
		if !in(rr, sa) {
			add = append(add, rr)
		}
	}
	return del, add
}

func (st *published) soaAt(serial uint32) *dns.SOA {
	s := dns.Copy(st.soa).(*dns.SOA)
	s.Serial = serial
	return s
}

// ixfr returns the answer to an IXFR from serial: nil when the journal does
// not reach back to it (the caller sends the whole view).
func (st *published) ixfr(serial uint32) []dns.RR {
	cur := st.view.Serial
	if serial == cur || serialLess(cur, serial) {
		return []dns.RR{st.soa}
	}
	for i, d := range st.journal {
		if d.from != serial {
			continue
		}
		n := 2
		for _, d := range st.journal[i:] {
			n += 2 + len(d.del) + len(d.add)
		}
		if n > len(st.flat) { // RFC 1995 §4: the whole zone is shorter
			return nil
		}
		rrs := make([]dns.RR, 0, n)
		rrs = append(rrs, st.soa)
		for _, d := range st.journal[i:] {
			rrs = append(rrs, st.soaAt(d.from))
			rrs = append(rrs, d.del...)
			rrs = append(rrs, st.soaAt(d.to))
			rrs = append(rrs, d.add...)
		}
		return append(rrs, st.soa)
	}
	return nil
}

// ServeDNS answers a query for a name in _fleet.<zone>: SOA, NS, the hosts'
// records, AXFR and IXFR (from the journal when it holds the client's serial,
// else the whole view) over TCP; IXFR over UDP gets the SOA only (RFC 1995
// §2), AXFR over UDP is refused. With keys set, an unsigned or wrongly signed
// request is refused. As a CoreDNS handler, it returns (rcode, nil) without
// writing for REFUSED, SERVFAIL and NOTIMP, the caller writing them.
func (p *Publisher) ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	if r.Opcode != dns.OpcodeQuery || len(r.Question) != 1 {
		return dns.RcodeNotImplemented, nil
	}
	state := request.Request{W: w, Req: r}
	qname := state.Name()
	if !inZone(qname, p.names.apex) || state.QClass() != dns.ClassINET {
		refusedTotal.WithLabelValues("zone").Inc()
		return dns.RcodeRefused, nil
	}
	if !p.keys.Verified(w, r) {
		refusedTotal.WithLabelValues("tsig").Inc()
		return dns.RcodeRefused, nil
	}
	st := p.cur.Load()
	if st == nil {
		return dns.RcodeServerFailure, nil
	}
	tcp := state.Proto() == "tcp"
	switch state.QType() {
	case dns.TypeAXFR:
		if !tcp || qname != p.names.apex {
			refusedTotal.WithLabelValues("axfr").Inc()
			return dns.RcodeRefused, nil
		}
		requestsTotal.WithLabelValues("axfr").Inc()
		return p.transfer(w, r, st.flat, st.chunks)
	case dns.TypeIXFR:
		if qname != p.names.apex {
			refusedTotal.WithLabelValues("axfr").Inc()
			return dns.RcodeRefused, nil
		}
		var rrs []dns.RR
		if len(r.Ns) > 0 {
			if soa, ok := r.Ns[0].(*dns.SOA); ok {
				rrs = st.ixfr(soa.Serial)
			}
		}
		if !tcp || len(rrs) == 1 { // RFC 1995 §2: over UDP, the SOA only
			requestsTotal.WithLabelValues("ixfr_soa").Inc()
			return p.answer(w, r, state, []dns.RR{st.soa}, nil, dns.RcodeSuccess)
		}
		if rrs == nil {
			requestsTotal.WithLabelValues("ixfr_full").Inc()
			return p.transfer(w, r, st.flat, st.chunks)
		}
		requestsTotal.WithLabelValues("ixfr").Inc()
		return p.transfer(w, r, rrs, chunk(rrs))
	}
	requestsTotal.WithLabelValues("query").Inc()
	rrs, ent := st.lookup(p.names.apex, qname)
	if rrs == nil {
		rcode := dns.RcodeNameError
		if ent {
			rcode = dns.RcodeSuccess
		}
		return p.answer(w, r, state, nil, []dns.RR{st.soa}, rcode)
	}
	var ans []dns.RR
	for _, rr := range rrs {
		if t := state.QType(); t == dns.TypeANY || t == rr.Header().Rrtype {
			ans = append(ans, rr)
		}
	}
	if len(ans) == 0 {
		return p.answer(w, r, state, nil, []dns.RR{st.soa}, dns.RcodeSuccess)
	}
	return p.answer(w, r, state, ans, nil, dns.RcodeSuccess)
}

// tsigRoom is what a TSIG record adds to a message, at most.
const tsigRoom = 128

func (p *Publisher) answer(w dns.ResponseWriter, r *dns.Msg, state request.Request, ans, ns []dns.RR, rcode int) (int, error) {
	m := new(dns.Msg)
	m.SetRcode(r, rcode)
	m.Authoritative = true
	m.Answer, m.Ns = ans, ns
	state.SizeAndDo(m)
	m.Truncate(state.Size() - tsigRoom)
	p.keys.signReply(w, r, m)
	w.WriteMsg(m)
	return rcode, nil
}

// transfer writes rrs in the messages that chunks delimit, with
// dns.Transfer (which signs each with the request's key).
func (p *Publisher) transfer(w dns.ResponseWriter, r *dns.Msg, rrs []dns.RR, chunks []int) (int, error) {
	ch := make(chan *dns.Envelope)
	done := make(chan struct{})
	go func() {
		defer close(ch)
		for i := 0; i+1 < len(chunks); i++ {
			select {
			case ch <- &dns.Envelope{RR: rrs[chunks[i]:chunks[i+1]]}:
			case <-done:
				return
			}
		}
	}()
	tr := new(dns.Transfer)
	err := tr.Out(transferWriter{w, r}, r, ch)
	close(done)
	if err != nil {
		log.Debugf("Transfer of %s to %s: %v", p.names.apex, w.RemoteAddr(), err) // the client's doing, per request
	}
	return dns.RcodeSuccess, nil
}

// transferWriter writes the messages of dns.Transfer.Out compressed (it does
// not compress; a view's owner names share their suffix: about half the
// octets), with the OPT of an EDNS request before the TSIG: the TSIG must
// stay last (RFC 8945 §5.1), and CoreDNS's ScrubWriter would append the OPT
// after it, so that the message goes out unsigned.
type transferWriter struct {
	dns.ResponseWriter
	req *dns.Msg
}

func (w transferWriter) WriteMsg(m *dns.Msg) error {
	m.Compress = true
	if t := m.IsTsig(); t != nil {
		m.Extra = m.Extra[:len(m.Extra)-1]
		state := request.Request{W: w.ResponseWriter, Req: w.req}
		state.SizeAndDo(m)
		m.Extra = append(m.Extra, t)
	}
	return w.ResponseWriter.WriteMsg(m)
}
