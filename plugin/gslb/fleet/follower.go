package fleet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// ErrNoView means the peer serves no view (a k8gb CoreDNS, a stock file zone):
// the SOA of _fleet.<zone> is NXDOMAIN, REFUSED or NOTAUTH, or the SOA of
// another zone. The caller falls back to per-host queries. Errors wrap it
// (use errors.Is) with the reason.
var ErrNoView = errors.New("peer serves no fleet view")

// The reasons of a CheckError, bounded, for a metric label.
const (
	ReasonNoView      = "noview"      // ErrNoView
	ReasonUnreachable = "unreachable" // network error, timeout, SERVFAIL, transfer cut short
	ReasonTSIG        = "tsig"        // unsigned or wrongly signed response
	ReasonCap         = "cap"         // over a cap of Limits
	ReasonOutside     = "outside"     // a name outside _fleet.<zone>
	ReasonBackwards   = "backwards"   // the serial moved backwards
	ReasonMalformed   = "malformed"   // records that are not a view
)

// CheckError is the error of a Check: a bounded Reason and the detail.
type CheckError struct {
	Reason string
	Err    error
}

func (e *CheckError) Error() string { return e.Err.Error() }
func (e *CheckError) Unwrap() error { return e.Err }

// Reason returns the reason of an error of Check ("" for nil).
func Reason(err error) string {
	var ce *CheckError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &ce):
		return ce.Reason
	}
	return ReasonUnreachable
}

func checkErr(reason, format string, a ...any) error {
	return &CheckError{Reason: reason, Err: fmt.Errorf(format, a...)}
}

// Follower timeouts: one exchange (an SOA query, one message of a
// transfer) and a whole transfer.
const (
	exchangeTimeout = 2 * time.Second
	transferTimeout = 60 * time.Second
)

// Follower follows one peer's view. Its methods are safe for concurrent use;
// concurrent Checks are serialized.
type Follower struct {
	names names
	peer  string
	keys  *Keys
	lim   Limits

	mu  sync.Mutex // serializes Check
	cur atomic.Pointer[followed]

	// A peer is a cluster, often several replicas behind one address:
	// one that is behind the others answers a lower serial for a moment,
	// and a restarted one counts its verdict changes from the data serial
	// again. Under mu.
	maxBehind   time.Duration // how long only lower serials are refused before the peer's view is taken anyway
	behindSince time.Time     // since when every answer was a lower serial; zero when the last was not
	suspect     bool          // a lower serial was seen since the view held was transferred or verified
	verified    uint32        // the serial held, verified by a whole transfer after a lower one (when verifiedOK)
	verifiedOK  bool
}

// DefaultMaxBehind is how long a Follower refuses a peer's serial that is
// behind the view it holds, before it takes the peer's view all the same.
const DefaultMaxBehind = time.Minute

// followed is a view a Follower holds.
type followed struct {
	view   *View
	owners map[string]int // owner name to index in view.Hosts
}

// NewFollower returns a Follower of the view of zone served at peerAddr
// (host:port), with TSIG when keys is not nil.
func NewFollower(zone, peerAddr string, keys *Keys, lim Limits) *Follower {
	return &Follower{names: newNames(zone), peer: peerAddr, keys: keys, lim: lim.withDefaults(), maxBehind: DefaultMaxBehind}
}

// SetMaxBehind sets how long only serials behind the view held are refused
// (a replica behind the others, ReasonBackwards) before the peer's view is
// transferred whole and taken, lower serial and all: the peer's data went
// back for good (restored, re-created). Zero or less is DefaultMaxBehind.
func (f *Follower) SetMaxBehind(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d <= 0 {
		d = DefaultMaxBehind
	}
	f.maxBehind = d
}

// Peer returns the peer's address.
func (f *Follower) Peer() string { return f.peer }

// View returns the last good view, nil before the first.
func (f *Follower) View() *View {
	if c := f.cur.Load(); c != nil {
		return c.view
	}
	return nil
}

// Check asks the peer for its SOA (UDP, TCP on truncation) and, on a new
// serial, transfers the view over TCP: IXFR when it holds a view, AXFR else
// (and AXFR when the IXFR fails to apply). It returns the last good view
// (nil before the first) and whether this call changed it. A response that
// is unsigned or wrongly signed (keys set), over a cap, with names outside
// _fleet.<zone>, a serial that moves backwards, or malformed records is an
// error (a *CheckError with the reason), and the last good view is kept.
func (f *Follower) Check(ctx context.Context) (v *View, changed bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur := f.cur.Load()
	last := f.View()
	serial, err := f.soa(ctx)
	if err != nil {
		return last, false, err
	}
	// full: a whole transfer (AXFR) taken as the view, whatever its serial,
	// instead of an IXFR from the serial held.
	full := false
	if cur != nil {
		held := cur.view.Serial
		switch {
		case serialLess(serial, held):
			// A replica behind the one that served the view held (or a
			// restarted one): the view held is newer. Refused, and the
			// next answer at or above it is transferred whole, since this
			// peer's replicas may hold different views at one serial.
			f.suspect = true
			if f.behindSince.IsZero() {
				f.behindSince = time.Now()
			}
			if time.Since(f.behindSince) < f.maxBehind {
				return last, false, checkErr(ReasonBackwards, "%s at %s: serial %d is behind %d", f.names.apex, f.peer, serial, held)
			}
			log.Infof("%s at %s: serial %d is behind %d for over %s: the peer's view is taken", f.names.apex, f.peer, serial, held, f.maxBehind)
			full = true
		case serial == held:
			f.behindSince = time.Time{}
			if !f.suspect || (f.verifiedOK && f.verified == held) {
				f.suspect = false
				return last, false, nil
			}
			full = true // verified once
		default:
			f.behindSince = time.Time{}
			full = f.suspect
		}
	}
	ctx, cancel := context.WithTimeout(ctx, transferTimeout)
	defer cancel()
	var next *followed
	switch {
	case full:
		next, err = f.transfer(ctx, dns.TypeAXFR, nil)
	case cur != nil:
		next, err = f.transfer(ctx, dns.TypeIXFR, cur)
		if errors.Is(err, errIXFRApply) {
			log.Infof("%v: AXFR instead", err)
			next, err = f.transfer(ctx, dns.TypeAXFR, cur)
		}
	default:
		next, err = f.transfer(ctx, dns.TypeAXFR, nil)
	}
	if err != nil {
		return last, false, err
	}
	if full {
		f.suspect, f.behindSince = false, time.Time{}
		f.verified, f.verifiedOK = next.view.Serial, true
		if next.view.Serial == cur.view.Serial && hostsEqual(next.view.Hosts, cur.view.Hosts) {
			return last, false, nil
		}
	}
	if next == nil { // up to date after all
		return last, false, nil
	}
	f.verifiedOK = f.verifiedOK && f.verified == next.view.Serial
	f.cur.Store(next)
	return next.view, true, nil
}

// soa returns the serial of the peer's view.
func (f *Follower) soa(ctx context.Context) (uint32, error) {
	m := new(dns.Msg)
	m.SetQuestion(f.names.apex, dns.TypeSOA)
	f.keys.Sign(m)
	c := &dns.Client{Net: "udp", Timeout: exchangeTimeout, TsigSecret: f.keys.Secrets()}
	r, _, err := c.ExchangeContext(ctx, m, f.peer)
	if err == nil && r.Truncated {
		c.Net = "tcp"
		f.keys.Sign(m) // writing m took its TSIG off
		r, _, err = c.ExchangeContext(ctx, m, f.peer)
	}
	if r != nil {
		switch r.Rcode {
		case dns.RcodeNameError, dns.RcodeRefused, dns.RcodeNotAuth:
			return 0, &CheckError{Reason: ReasonNoView, Err: fmt.Errorf("%w: %s at %s: %s", ErrNoView, f.names.apex, f.peer, dns.RcodeToString[r.Rcode])}
		}
	}
	if err != nil {
		if isTSIGErr(err) {
			return 0, checkErr(ReasonTSIG, "SOA of %s from %s: %v", f.names.apex, f.peer, err)
		}
		return 0, checkErr(ReasonUnreachable, "SOA of %s from %s: %v", f.names.apex, f.peer, err)
	}
	if r.Rcode != dns.RcodeSuccess {
		return 0, checkErr(ReasonUnreachable, "SOA of %s from %s: %s", f.names.apex, f.peer, dns.RcodeToString[r.Rcode])
	}
	if f.keys != nil && r.IsTsig() == nil {
		return 0, checkErr(ReasonTSIG, "SOA of %s from %s: answer not signed", f.names.apex, f.peer)
	}
	for _, rr := range r.Answer {
		if soa, ok := rr.(*dns.SOA); ok && dns.CanonicalName(soa.Hdr.Name) == f.names.apex {
			return soa.Serial, nil
		}
	}
	return 0, &CheckError{Reason: ReasonNoView, Err: fmt.Errorf("%w: %s at %s: no SOA of its own", ErrNoView, f.names.apex, f.peer)}
}

func isTSIGErr(err error) bool {
	return errors.Is(err, dns.ErrSig) || errors.Is(err, dns.ErrSecret) || errors.Is(err, dns.ErrNoSig) ||
		errors.Is(err, dns.ErrAuth) || errors.Is(err, dns.ErrTime) || errors.Is(err, dns.ErrKeyAlg)
}

// errIXFRApply is an IXFR that does not apply to the view held: AXFR then.
var errIXFRApply = errors.New("IXFR does not apply")

// errOctets is a transfer over MaxOctets.
var errOctets = errors.New("over the octets cap")

// countingConn counts the octets read and fails past a limit.
type countingConn struct {
	net.Conn
	n, limit int
}

func (c *countingConn) Read(p []byte) (int, error) {
	if c.n > c.limit {
		return 0, errOctets
	}
	n, err := c.Conn.Read(p)
	c.n += n
	if c.n > c.limit {
		return n, errOctets
	}
	return n, err
}

// transfer does an AXFR or an IXFR (from cur) with dns.Transfer and returns
// the view it carries, nil when it is cur's.
func (f *Follower) transfer(ctx context.Context, qtype uint16, cur *followed) (*followed, error) {
	m := new(dns.Msg)
	if qtype == dns.TypeIXFR {
		m.SetIxfr(f.names.apex, cur.view.Serial, f.names.zone, "hostmaster."+f.names.apex)
	} else {
		m.SetAxfr(f.names.apex)
	}
	f.keys.Sign(m)
	what := dns.TypeToString[qtype] + " of " + f.names.apex + " from " + f.peer
	conn, err := (&net.Dialer{Timeout: exchangeTimeout}).DialContext(ctx, "tcp", f.peer)
	if err != nil {
		return nil, checkErr(ReasonUnreachable, "%s: %v", what, err)
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	cc := &countingConn{Conn: conn, limit: f.lim.MaxOctets}
	t := &dns.Transfer{Conn: &dns.Conn{Conn: cc}, TsigSecret: f.keys.Secrets(), ReadTimeout: exchangeTimeout}
	env, err := t.In(m, f.peer)
	if err != nil {
		conn.Close()
		return nil, checkErr(ReasonUnreachable, "%s: %v", what, err)
	}
	x := &xfr{names: f.names, lim: f.lim, cur: cur, qtype: qtype}
	for e := range env {
		if e.Error != nil {
			err = e.Error
			break
		}
		if err = x.add(e.RR); err != nil {
			break
		}
	}
	conn.Close()
	for range env { // In's goroutine ends on the closed connection
	}
	if cc.n > cc.limit { // io.ReadFull drops the error of a last read
		err = errOctets
	}
	if err == nil {
		next, err := x.done()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		return next, nil
	}
	var ce *CheckError
	switch {
	case errors.As(err, &ce), errors.Is(err, errIXFRApply):
		return nil, fmt.Errorf("%s: %w", what, err)
	case errors.Is(err, errOctets):
		return nil, checkErr(ReasonCap, "%s: over %d octets: refused", what, f.lim.MaxOctets)
	case isTSIGErr(err):
		return nil, checkErr(ReasonTSIG, "%s: %v", what, err)
	}
	return nil, checkErr(ReasonUnreachable, "%s: %v", what, err)
}

// xfr reads the records of one transfer: an AXFR, or an IXFR answered
// incrementally (RFC 1995 §4) or with the whole zone.
type xfr struct {
	names names
	lim   Limits
	cur   *followed
	qtype uint16

	state  int
	serial uint32 // the new serial, of the first SOA
	count  int    // records seen

	full map[string][]dns.RR // owner: records (the whole zone)

	touched  map[string][]dns.RR // owner: records (incremental)
	from, to uint32              // of the diff being read
}

const (
	xStart = iota
	xFirst // after the first SOA
	xFull  // whole zone
	xDel   // deletions of a diff
	xAdd   // additions of a diff
	xEnd   // after the closing SOA
)

func (x *xfr) add(rrs []dns.RR) error {
	for _, rr := range rrs {
		if err := x.one(rr); err != nil {
			return err
		}
	}
	return nil
}

func (x *xfr) one(rr dns.RR) error {
	h := rr.Header()
	h.Name = dns.CanonicalName(h.Name)
	if !inZone(h.Name, x.names.apex) {
		return checkErr(ReasonOutside, "%s is outside %s: refused", h.Name, x.names.apex)
	}
	if h.Class != dns.ClassINET {
		return checkErr(ReasonMalformed, "%s: class %s", h.Name, dns.ClassToString[h.Class])
	}
	x.count++
	// An incremental answer is shorter than the view (else the publisher
	// sends the whole); twice the cap leaves room for SOA markers.
	if x.count > 2*x.lim.MaxRecords {
		return checkErr(ReasonCap, "over %d records: refused", x.lim.MaxRecords)
	}
	soa, isSOA := rr.(*dns.SOA)
	if isSOA && h.Name != x.names.apex {
		return checkErr(ReasonMalformed, "SOA at %s", h.Name)
	}
	switch x.state {
	case xStart:
		if !isSOA {
			return checkErr(ReasonMalformed, "transfer does not start with the SOA")
		}
		x.serial = soa.Serial
		if x.cur != nil && serialLess(x.serial, x.cur.view.Serial) {
			return checkErr(ReasonBackwards, "serial %d is behind %d: refused", x.serial, x.cur.view.Serial)
		}
		x.state = xFirst
	case xFirst:
		if isSOA && x.qtype == dns.TypeIXFR {
			if soa.Serial != x.cur.view.Serial {
				return fmt.Errorf("%w: it starts at serial %d, the view held is %d", errIXFRApply, soa.Serial, x.cur.view.Serial)
			}
			x.from, x.touched, x.state = soa.Serial, map[string][]dns.RR{}, xDel
			return nil
		}
		x.full, x.state = map[string][]dns.RR{}, xFull
		return x.one(rr)
	case xFull:
		if isSOA {
			if soa.Serial != x.serial {
				return checkErr(ReasonMalformed, "SOA serial %d inside a transfer of %d", soa.Serial, x.serial)
			}
			x.state = xEnd
			return nil
		}
		if h.Name != x.names.apex && len(x.full[h.Name]) == 0 && len(x.full) >= x.lim.MaxHosts+1 {
			return checkErr(ReasonCap, "over %d hosts: refused", x.lim.MaxHosts)
		}
		x.full[h.Name] = append(x.full[h.Name], rr)
	case xDel:
		if isSOA {
			if !serialLess(x.from, soa.Serial) {
				return checkErr(ReasonBackwards, "IXFR diff from %d to %d", x.from, soa.Serial)
			}
			x.to, x.state = soa.Serial, xAdd
			return nil
		}
		return x.del(rr)
	case xAdd:
		if isSOA {
			if soa.Serial == x.serial && x.to == x.serial {
				x.state = xEnd
				return nil
			}
			if soa.Serial != x.to {
				return fmt.Errorf("%w: a diff from %d follows one to %d", errIXFRApply, soa.Serial, x.to)
			}
			x.from, x.state = soa.Serial, xDel
			return nil
		}
		return x.addRR(rr)
	case xEnd:
		return checkErr(ReasonMalformed, "records after the closing SOA")
	}
	return nil
}

// held returns the records at owner in the view being built by an IXFR.
func (x *xfr) held(owner string) []dns.RR {
	if rrs, ok := x.touched[owner]; ok {
		return rrs
	}
	i, ok := x.cur.owners[owner]
	if !ok {
		return nil
	}
	return x.names.encodeHost(nil, &x.cur.view.Hosts[i])
}

func (x *xfr) del(rr dns.RR) error {
	owner := rr.Header().Name
	if owner == x.names.apex {
		return nil // NS: the view's apex is fixed
	}
	rrs := x.held(owner)
	for i, h := range rrs {
		if h.Header().Ttl == rr.Header().Ttl && dns.IsDuplicate(h, rr) {
			x.touched[owner] = append(rrs[:i:i], rrs[i+1:]...)
			return nil
		}
	}
	return fmt.Errorf("%w: it deletes %s, which the view held does not have", errIXFRApply, owner)
}

func (x *xfr) addRR(rr dns.RR) error {
	owner := rr.Header().Name
	if owner == x.names.apex {
		return nil
	}
	rrs := x.held(owner)
	x.touched[owner] = append(rrs[:len(rrs):len(rrs)], rr)
	if len(x.touched) > x.lim.MaxHosts+len(x.cur.view.Hosts) {
		return checkErr(ReasonCap, "over %d hosts: refused", x.lim.MaxHosts)
	}
	return nil
}

// done returns the view read, nil when it is the view held.
func (x *xfr) done() (*followed, error) {
	switch {
	case x.state == xFirst && x.qtype == dns.TypeIXFR && x.cur != nil && x.serial == x.cur.view.Serial:
		return nil, nil // RFC 1995 §4: the SOA alone, up to date
	case x.state == xFirst && x.qtype == dns.TypeIXFR:
		return nil, fmt.Errorf("%w: the SOA alone, of serial %d", errIXFRApply, x.serial)
	case x.state != xEnd:
		return nil, checkErr(ReasonUnreachable, "transfer ended early")
	case x.cur != nil && x.serial == x.cur.view.Serial:
		return nil, nil
	}
	var hosts []Host
	records := 0
	if x.full != nil {
		apex := x.full[x.names.apex]
		delete(x.full, x.names.apex)
		records = 2 + len(apex)
		for _, rr := range apex {
			if t := rr.Header().Rrtype; t == dns.TypeA || t == dns.TypeAAAA || t == dns.TypeTXT || t == dns.TypePTR {
				return nil, checkErr(ReasonMalformed, "%s at the apex", dns.TypeToString[t])
			}
		}
		for owner, rrs := range x.full {
			records += len(rrs)
			if _, _, ok := x.names.hostOf(owner); !ok {
				continue // a name this version does not know: skipped
			}
			h, err := x.names.decodeHost(owner, rrs)
			if err != nil {
				return nil, checkErr(ReasonMalformed, "%v", err)
			}
			hosts = append(hosts, h)
		}
	} else {
		byName := make(map[string]*Host, len(x.touched))
		gone := map[string]bool{}
		for owner, rrs := range x.touched {
			if i, ok := x.cur.owners[owner]; ok {
				gone[x.cur.view.Hosts[i].Name] = true
			}
			if len(rrs) == 0 {
				continue
			}
			if _, _, ok := x.names.hostOf(owner); !ok {
				continue
			}
			h, err := x.names.decodeHost(owner, rrs)
			if err != nil {
				return nil, checkErr(ReasonMalformed, "%v", err)
			}
			byName[h.Name] = &h
		}
		hosts = make([]Host, 0, len(x.cur.view.Hosts)+len(byName))
		for _, h := range x.cur.view.Hosts {
			if !gone[h.Name] {
				hosts = append(hosts, h)
			}
		}
		for _, h := range byName {
			hosts = append(hosts, *h)
		}
		records = 2
		for i := range hosts {
			_, long := x.names.owner(hosts[i].Name)
			records += hostRecords(&hosts[i], long)
		}
	}
	if len(hosts) > x.lim.MaxHosts {
		return nil, checkErr(ReasonCap, "%d hosts, over %d: refused", len(hosts), x.lim.MaxHosts)
	}
	if records > x.lim.MaxRecords {
		return nil, checkErr(ReasonCap, "%d records, over %d: refused", records, x.lim.MaxRecords)
	}
	sort.Slice(hosts, func(i, j int) bool { return hosts[i].Name < hosts[j].Name })
	for i := 1; i < len(hosts); i++ {
		if hosts[i].Name == hosts[i-1].Name {
			return nil, checkErr(ReasonMalformed, "host %s twice", hosts[i].Name)
		}
	}
	return newFollowed(x.names, &View{Zone: x.names.zone, Serial: x.serial, Hosts: hosts}), nil
}

func newFollowed(n names, v *View) *followed {
	f := &followed{view: v, owners: make(map[string]int, len(v.Hosts))}
	for i := range v.Hosts {
		o, _ := n.owner(v.Hosts[i].Name)
		f.owners[o] = i
	}
	return f
}
