package gslb

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/fleetdns/fleetdns/internal/corefile"
	"github.com/fleetdns/fleetdns/plugin/gslb/fleet"

	"github.com/miekg/dns"
)

// publish_delegation: this cluster adds, keeps and removes its own NS record
// and glue in the parent zone by RFC 2136 UPDATE of single records, signed
// with a TSIG key of its own, so that adding a cluster edits no other. The
// shared NS RRset is never replaced: each cluster inserts and removes its
// one NS record (RFC 2136 §2.5.1 and §2.5.4), and the parent's policy
// confines its key to the NS RRset and its own glue name.

// Defaults of publish_delegation.
const (
	defaultDelegationTTL      = 3600
	defaultDelegationInterval = 5 * time.Minute
	// maxGlueSeen bounds the addresses of this cluster's name server
	// taken from the parent in one round.
	maxGlueSeen = 64
)

// delegationPublisher is the configuration of publish_delegation.
type delegationPublisher struct {
	servers      []string // the parent's servers, host:port, tried in order
	keys         *fleet.Keys
	ns           string       // this cluster's name server, lower-case, fully qualified
	addrs        []netip.Addr // its glue, sorted
	ttl          uint32
	interval     time.Duration
	decommission bool
}

// publishDelegation parses `publish_delegation SERVER[:PORT]... { ... }`.
func (p *parser) publishDelegation(c *caddy.Controller) error {
	g := p.g
	if g.deleg != nil {
		return c.Err("publish_delegation given twice")
	}
	args := corefile.Args(c)
	if len(args) == 0 {
		return c.ArgErr()
	}
	servers, err := peerAddrs(c, "publish_delegation", args)
	if err != nil {
		return err
	}
	d := &delegationPublisher{servers: servers, ttl: defaultDelegationTTL, interval: defaultDelegationInterval}
	if !corefile.OpensBlock(c) {
		return c.Err("publish_delegation needs a block with its key")
	}
	for c.NextBlock() {
		switch c.Val() {
		case "key":
			args := corefile.Args(c)
			if len(args) != 1 {
				return c.ArgErr()
			}
			if d.keys != nil {
				return c.Err("publish_delegation key given twice")
			}
			k, err := fleet.LoadKeys(args[0])
			if err != nil {
				return c.Errf("publish_delegation key: %v", err)
			}
			d.keys = k
		case "ns":
			args := corefile.Args(c)
			if len(args) != 1 {
				return c.ArgErr()
			}
			n := strings.ToLower(dns.Fqdn(args[0]))
			if _, ok := dns.IsDomainName(n); !ok || n == "." {
				return c.Errf("publish_delegation ns %q is not a domain name", args[0])
			}
			d.ns = n
		case "address":
			args := corefile.Args(c)
			if len(args) == 0 {
				return c.ArgErr()
			}
			for _, a := range args {
				ip, err := netip.ParseAddr(a)
				if err != nil || ip.Zone() != "" || ip.IsUnspecified() || ip.IsMulticast() {
					return c.Errf("publish_delegation address %q is not a unicast IP address", a)
				}
				if ip = ip.Unmap(); !slices.Contains(d.addrs, ip) {
					d.addrs = append(d.addrs, ip)
				}
			}
			if len(d.addrs) > maxPeerAddrs {
				return c.Errf("publish_delegation address: more than %d addresses", maxPeerAddrs)
			}
		case "ttl":
			args := corefile.Args(c)
			if len(args) != 1 {
				return c.ArgErr()
			}
			n, err := strconv.ParseUint(args[0], 10, 31) // RFC 2181 §8
			if err != nil {
				return c.Errf("bad publish_delegation ttl %q", args[0])
			}
			d.ttl = uint32(n)
		case "interval":
			i, err := corefile.Duration(c, time.Second)
			if err != nil {
				return err
			}
			d.interval = i
		case "decommission":
			if len(corefile.Args(c)) != 0 {
				return c.ArgErr()
			}
			d.decommission = true
		default:
			return c.Errf("unknown property %q in publish_delegation", c.Val())
		}
	}
	if d.keys == nil {
		return c.Err("publish_delegation needs a key (a TSIG key file in tsig-keygen's format)")
	}
	slices.SortFunc(d.addrs, netip.Addr.Compare)
	g.deleg = d
	return nil
}

// finishDelegation fills in publish_delegation's defaults once the block is
// read: the name server from the peers_from_ns pattern and this cluster's
// geo tag, the glue from the server block's bind addresses.
func (p *parser) finishDelegation(c *caddy.Controller) error {
	g, d := p.g, p.g.deleg
	if d == nil {
		return nil
	}
	if d.ns == "" {
		d.ns = nsName(p.pattern, g.zone, g.geotag)
	}
	if tag, ok := g.ns.tag(d.ns); !ok || tag != g.geotag {
		log.Warningf("publish_delegation ns %s does not carry geo tag %s by the pattern %s: peers_from_ns of the other clusters will not find this cluster under it", d.ns, g.geotag, p.pattern)
	}
	if len(d.addrs) == 0 && !d.decommission {
		for _, h := range dnsserver.GetConfig(c).ListenHosts {
			if ip, err := netip.ParseAddr(h); err == nil && publicGlue(ip) && !slices.Contains(d.addrs, ip.Unmap()) {
				d.addrs = append(d.addrs, ip.Unmap())
			}
		}
		if len(d.addrs) == 0 {
			return c.Err("publish_delegation has no address to publish: give `address` (the name server's public address, e.g. its Service's load-balancer address) or `bind` the server to it")
		}
		slices.SortFunc(d.addrs, netip.Addr.Compare)
		d.addrs = d.addrs[:min(len(d.addrs), maxPeerAddrs)]
	}
	return nil
}

// publicGlue reports whether a bind address can be another server's glue:
// not loopback, link-local, unspecified or multicast.
func publicGlue(a netip.Addr) bool {
	return !a.IsLoopback() && !a.IsLinkLocalUnicast() && !a.IsUnspecified() && !a.IsMulticast() && a.Zone() == ""
}

// nsName is the name server name that pattern gives zone's cluster tag.
func nsName(pattern, zone, tag string) string {
	z := strings.TrimSuffix(zone, ".")
	parent := ""
	if i := strings.IndexByte(z, '.'); i >= 0 {
		parent = z[i+1:]
	}
	n := strings.NewReplacer("{geotag}", tag, "{zone}", z, "{parent}", parent).Replace(pattern)
	return strings.ToLower(dns.Fqdn(n))
}

// parentView is what the parent holds of this cluster's delegation.
type parentView struct {
	server string       // the server that answered
	zone   string       // the parent zone, the UPDATE's zone
	ns     bool         // the zone's NS set names this cluster's name server
	glue   []netip.Addr // the addresses of this cluster's name server, sorted
}

// lookAtParent asks the parent's servers, in order, for the parent zone,
// the NS set of the GSLB zone and this cluster's glue.
func (g *GSLB) lookAtParent(ctx context.Context, x exchanger) (parentView, error) {
	var errs []error
	for _, s := range g.deleg.servers {
		v, err := g.lookAt(ctx, x, s)
		if err == nil {
			return v, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", s, err))
	}
	return parentView{}, errors.Join(errs...)
}

func (g *GSLB) lookAt(ctx context.Context, x exchanger, server string) (parentView, error) {
	d := g.deleg
	v := parentView{server: server}
	// The parent zone: the owner of the SOA that answers for the name
	// above the GSLB zone (in the answer, or in the authority section of
	// a negative answer: RFC 2308 §3).
	above := "."
	if i, end := dns.NextLabel(g.zone, 0); !end {
		above = g.zone[i:]
	}
	r, err := parentQuery(ctx, x, server, above, dns.TypeSOA)
	if err != nil {
		return v, err
	}
	for _, rr := range append(slices.Clone(r.Answer), r.Ns...) {
		if soa, ok := rr.(*dns.SOA); ok && dns.IsSubDomain(soa.Hdr.Name, g.zone) {
			v.zone = strings.ToLower(soa.Hdr.Name)
			break
		}
	}
	if v.zone == "" {
		return v, fmt.Errorf("no SOA of a zone above %s (rcode %s)", g.zone, dns.RcodeToString[r.Rcode])
	}

	r, err = parentQuery(ctx, x, server, g.zone, dns.TypeNS)
	if err != nil {
		return v, err
	}
	// NXDOMAIN: no cluster has published the delegation yet.
	if r.Rcode != dns.RcodeSuccess && r.Rcode != dns.RcodeNameError {
		return v, fmt.Errorf("rcode %s to %s NS", dns.RcodeToString[r.Rcode], g.zone)
	}
	for _, rr := range append(slices.Clone(r.Answer), r.Ns...) {
		if ns, ok := rr.(*dns.NS); ok && strings.EqualFold(ns.Hdr.Name, g.zone) && strings.EqualFold(ns.Ns, d.ns) {
			v.ns = true
		}
	}
	v.glue = addrsOf(d.ns, r.Extra)
	if len(v.glue) == 0 && dns.IsSubDomain(v.zone, d.ns) {
		// Not in the referral's additional section (this cluster is not in
		// the NS set, or the parent leaves glue out): ask for it.
		for _, t := range []uint16{dns.TypeA, dns.TypeAAAA} {
			r, err := parentQuery(ctx, x, server, d.ns, t)
			if err != nil {
				return v, err
			}
			v.glue = append(v.glue, addrsOf(d.ns, append(r.Answer, r.Extra...))...)
		}
	}
	slices.SortFunc(v.glue, netip.Addr.Compare)
	v.glue = slices.Compact(v.glue)
	// What the parent gives is bounded: one UPDATE removes at most this
	// many stray addresses, the next round the rest.
	v.glue = v.glue[:min(len(v.glue), maxGlueSeen)]
	return v, nil
}

// addrsOf returns the A and AAAA addresses of name in rrs.
func addrsOf(name string, rrs []dns.RR) []netip.Addr {
	var addrs []netip.Addr
	for _, rr := range rrs {
		if !strings.EqualFold(rr.Header().Name, name) {
			continue
		}
		if a, ok := rrAddr(rr); ok && !slices.Contains(addrs, a.Unmap()) {
			addrs = append(addrs, a.Unmap())
		}
	}
	return addrs
}

// rrAddr is the address an A or AAAA record holds.
func rrAddr(rr dns.RR) (netip.Addr, bool) {
	switch x := rr.(type) {
	case *dns.A:
		return netip.AddrFromSlice(x.A.To4())
	case *dns.AAAA:
		return netip.AddrFromSlice(x.AAAA.To16())
	}
	return netip.Addr{}, false
}

// changes returns the single records to insert into and remove from the
// parent zone so that it holds what publish_delegation says: nothing when
// it already does, so that a steady state sends no UPDATE.
func (d *delegationPublisher) changes(zone string, v parentView) (insert, remove []dns.RR) {
	ns := &dns.NS{Hdr: dns.RR_Header{Name: zone, Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: d.ttl}, Ns: d.ns}
	// Glue only for a name inside the parent zone: an UPDATE of a name
	// outside it is NOTZONE (RFC 2136 §3.4.1.3).
	inParent := dns.IsSubDomain(v.zone, d.ns)
	if d.decommission {
		if v.ns {
			remove = append(remove, ns)
		}
		if inParent {
			gone := slices.Clone(v.glue)
			if v.ns {
				gone = append(gone, d.addrs...)
			}
			slices.SortFunc(gone, netip.Addr.Compare)
			for _, a := range slices.Compact(gone) {
				remove = append(remove, d.glueRR(a))
			}
		}
		return nil, remove
	}
	if inParent {
		for _, a := range d.addrs {
			if !slices.Contains(v.glue, a) {
				insert = append(insert, d.glueRR(a))
			}
		}
		for _, a := range v.glue {
			if !slices.Contains(d.addrs, a) {
				remove = append(remove, d.glueRR(a))
			}
		}
	}
	if !v.ns {
		insert = append(insert, ns)
	}
	return insert, remove
}

func (d *delegationPublisher) glueRR(a netip.Addr) dns.RR {
	if a.Is4() {
		return &dns.A{Hdr: dns.RR_Header{Name: d.ns, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: d.ttl}, A: a.AsSlice()}
	}
	return &dns.AAAA{Hdr: dns.RR_Header{Name: d.ns, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: d.ttl}, AAAA: a.AsSlice()}
}

// update sends one signed UPDATE of zone to the parent's servers in order
// until one applies it, and returns each attempt's result and, when none
// applied it, why.
func (g *GSLB) update(ctx context.Context, zone string, insert, remove []dns.RR) (results []string, err error) {
	d := g.deleg
	m := new(dns.Msg)
	m.SetUpdate(zone)
	// Removals first: within one UPDATE they are applied in order
	// (RFC 2136 §3.4.2), and a glue address that moves is removed before
	// its successor is added.
	if len(remove) > 0 {
		m.Remove(remove)
	}
	if len(insert) > 0 {
		m.Insert(insert)
	}
	var errs []error
	for _, s := range d.servers {
		req := m.Copy()
		req.Id = dns.Id()
		d.keys.Sign(req)
		r, err := exchangeUpdate(ctx, req, s, g.timeout, d.keys.Secrets())
		res := updateResult(req, r, err)
		delegationUpdates.WithLabelValues(g.zone, res).Inc()
		results = append(results, res)
		if res == "ok" {
			return results, nil
		}
		why := ""
		if r != nil {
			why = "rcode " + dns.RcodeToString[r.Rcode]
			if t := r.IsTsig(); t != nil && t.Error != 0 {
				why += ", TSIG error " + dns.RcodeToString[int(t.Error)]
			}
		}
		if err != nil {
			why = strings.TrimPrefix(why+", "+err.Error(), ", ")
		}
		errs = append(errs, fmt.Errorf("%s: %s (%s)", s, res, why))
	}
	return results, errors.Join(errs...)
}

// exchangeUpdate sends m over UDP, and over TCP when the answer is
// truncated. The client checks the answer's TSIG with secrets; the answer is
// returned even when that check fails, to be classified.
func exchangeUpdate(ctx context.Context, m *dns.Msg, server string, timeout time.Duration, secrets map[string]string) (*dns.Msg, error) {
	c := &dns.Client{Net: "udp", Timeout: timeout, TsigSecret: secrets}
	r, _, err := c.ExchangeContext(ctx, m, server)
	if err == nil && r.Truncated {
		c.Net = "tcp"
		r, _, err = c.ExchangeContext(ctx, m, server)
	}
	return r, err
}

// updateResult names the outcome of one UPDATE (the label values of
// coredns_gslb_delegation_updates_total, a bounded set).
func updateResult(req, r *dns.Msg, err error) string {
	if err != nil && !errors.Is(err, dns.ErrSig) && !errors.Is(err, dns.ErrTime) && !errors.Is(err, dns.ErrKeyAlg) && !errors.Is(err, dns.ErrAuth) {
		// Only a failed signature check leaves an answer to classify; a
		// reply that does not unpack is no answer.
		r = nil
	}
	if r != nil {
		if t := r.IsTsig(); t != nil {
			switch t.Error {
			case dns.RcodeBadKey:
				return "badkey"
			case dns.RcodeBadSig:
				return "badsig"
			case dns.RcodeBadTime:
				return "badtime"
			}
		}
		if !r.Response || r.Opcode != dns.OpcodeUpdate || len(r.Question) > 1 ||
			(len(r.Question) == 1 && !strings.EqualFold(r.Question[0].Name, req.Question[0].Name)) {
			return "malformed"
		}
		switch r.Rcode {
		case dns.RcodeSuccess:
			switch {
			case err != nil:
				// The reply's signature does not check out: it is not the
				// parent's word.
				return "badsig"
			case r.IsTsig() == nil:
				// RFC 8945 §5.3.1: an answer to a signed request is signed.
				return "unsigned"
			}
			return "ok"
		case dns.RcodeRefused:
			return "refused"
		case dns.RcodeNotAuth:
			return "notauth"
		case dns.RcodeNotZone:
			return "notzone"
		case dns.RcodeNotImplemented:
			return "notimp"
		case dns.RcodeFormatError:
			return "formerr"
		case dns.RcodeServerFailure:
			return "servfail"
		}
		return "rcode"
	}
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.As(err, new(*dns.Error)), errors.Is(err, dns.ErrShortRead):
		return "malformed"
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return "network"
	}
	return "malformed"
}

// runDelegation checks the parent's copy of this cluster's delegation now
// and every interval, and sends an UPDATE only when something is missing or
// different. Each change of outcome is logged once; whatever the parent
// says, the cluster keeps serving.
func (g *GSLB) runDelegation(ctx context.Context) {
	d := g.deleg
	x := newExchanger(g.timeout)
	last := ""
	report := func(outcome string, logf func(string, ...any), format string, a ...any) {
		if outcome != last {
			logf(format, a...)
			last = outcome
		}
	}
	every(ctx, d.interval, nil, func(ctx context.Context) {
		v, err := g.lookAtParent(ctx, x)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			delegationChecks.WithLabelValues(g.zone, "unreachable").Inc()
			report("unreachable", log.Errorf, "Checking the delegation of %s at the parent failed; will try again in %s: %v", g.zone, d.interval, err)
			return
		}
		insert, remove := d.changes(g.zone, v)
		if len(insert)+len(remove) == 0 {
			delegationChecks.WithLabelValues(g.zone, "in_place").Inc()
			g.setParentLink(v.ns)
			if d.decommission {
				report("in_place", log.Infof, "The parent (%s, zone %s) holds no delegation of %s to %s: decommissioned", v.server, v.zone, g.zone, d.ns)
			} else {
				report("in_place", log.Infof, "The parent (%s, zone %s) delegates %s to %s with glue %v", v.server, v.zone, g.zone, d.ns, v.glue)
			}
			return
		}
		delegationChecks.WithLabelValues(g.zone, "updated").Inc()
		results, err := g.update(ctx, v.zone, insert, remove)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			g.setParentLink(v.ns)
			report("failed "+strings.Join(results, ","), log.Errorf, "The parent did not apply the UPDATE of %s's delegation to %s (adding %d, removing %d records); this cluster keeps serving: %v",
				g.zone, d.ns, len(insert), len(remove), err)
			return
		}
		// What the parent holds now: the link follows the parent, not
		// the UPDATE's answer. A parent may answer NOERROR and leave out
		// what its policy does not allow (PowerDNS's Lua policy does).
		v2, err := g.lookAtParent(ctx, x)
		if err == nil {
			g.setParentLink(v2.ns)
			if ins, rem := d.changes(g.zone, v2); len(ins)+len(rem) > 0 {
				delegationChecks.WithLabelValues(g.zone, "not_applied").Inc()
				report("not_applied", log.Errorf, "The parent (%s) answered the UPDATE of %s's delegation to %s with success but does not hold it (its policy may drop what it does not allow); this cluster keeps serving: still to send %s",
					v2.server, g.zone, d.ns, describeChanges(ins, rem))
				return
			}
		}
		log.Infof("Updated the delegation of %s at the parent (%s, zone %s): %s", g.zone, v.server, v.zone, describeChanges(insert, remove))
		// The next check in place is no news.
		last = "in_place"
	})
}

// setParentLink sets coredns_gslb_parent_link: whether the parent's
// delegation of the zone includes this cluster's name server.
func (g *GSLB) setParentLink(own bool) {
	v := 0.0
	if own {
		v = 1
	}
	parentLink.WithLabelValues(g.zone, g.geotag).Set(v)
}

func describeChanges(insert, remove []dns.RR) string {
	var parts []string
	for _, rr := range remove {
		parts = append(parts, "removed "+rrText(rr))
	}
	for _, rr := range insert {
		parts = append(parts, "added "+rrText(rr))
	}
	return strings.Join(parts, ", ")
}

// rrText is an RR's owner, type and data, without TTL and class.
func rrText(rr dns.RR) string {
	h := rr.Header()
	data := strings.TrimPrefix(rr.String(), h.String())
	return h.Name + " " + dns.TypeToString[h.Rrtype] + " " + data
}
