package gslb

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/request"
	"github.com/fleetdns/fleetdns/internal/dnsutil"

	"github.com/miekg/dns"
)

// explainLabel starts the name of a host's explain record.
const explainLabel = "_gslb-explain."

// serveExplain answers TXT _gslb-explain.<host> for clients in the explain
// ACL: which peers answered, their states and ages, the strategy and why
// the answer an A query from this client gets now was chosen. For everyone
// else the name does not exist here: it falls through.
func (g *GSLB) serveExplain(ctx context.Context, state request.Request) (int, error) {
	w, r := state.W, state.Req
	src, err := netip.ParseAddr(state.IP())
	if err != nil || !g.explainAllowed(src.Unmap()) {
		return plugin.NextOrFailure(g.Name(), g.Next, ctx, w, r)
	}
	h, ok := g.host(strings.TrimPrefix(state.Name(), explainLabel))
	if !ok {
		return plugin.NextOrFailure(g.Name(), g.Next, ctx, w, r)
	}
	ecs, err := clientSubnet(r)
	if err != nil {
		ecs = nil
	}

	views := g.collect(h, nil)
	pol := g.policyOf(h)
	cl := g.clientOf(ctx, state, ecs)
	d := g.decide(pol, views, &cl, false)
	d6 := g.decide(pol, views, &cl, true)
	g.settleAllDown(pol, h, &d, &d6)

	source := "default"
	switch {
	case h.Properties[propStrategy] != "":
		source = propStrategy
	case h.Labels[labelK8gb] != "":
		source = "k8gb label " + labelK8gb
	}
	lines := []string{fmt.Sprintf("host %s strategy %s (%s) ttl %d", h.Name, pol.strategy, source, g.ttlOf(pol, h))}
	switch pol.strategy {
	case failover:
		if len(pol.primary) > 0 {
			l := "primary " + strings.Join(pol.primary, ",")
			if pol.tiers != nil && len(pol.weights) > 0 {
				l += " weights " + weightList(pol)
			}
			lines = append(lines, l)
		} else {
			lines = append(lines, "primary "+g.geotag+" then the peers in tag order")
		}
	case weighted:
		var ws []string
		for i := range views {
			ws = append(ws, fmt.Sprintf("%s=%d", views[i].tag, weightOf(pol, views[i].tag)))
		}
		lines = append(lines, "weights "+strings.Join(ws, ","))
	case geoip:
		if tag := d.geoTag; tag != "" {
			lines = append(lines, fmt.Sprintf("client %s/%d geo tag %s scope %d", cl.addr, cl.bits, tag, d.scope))
		} else {
			lines = append(lines, fmt.Sprintf("client %s/%d has no geo tag", cl.addr, cl.bits))
		}
		if order, ok := pol.fallback[d.geoTag]; ok {
			lines = append(lines, fmt.Sprintf("fallback %s=%s", d.geoTag, strings.Join(order, ",")))
		}
	}
	if pol.allDown != nil {
		lines = append(lines, "all-down "+pol.allDown.String())
	}
	for i := range views {
		v := &views[i]
		if v.self {
			l := fmt.Sprintf("tag %s self targets A %s AAAA %s", v.tag, g.addrList(v.a), g.addrList(v.aaaa))
			if h.Withdrawn != nil {
				a, aaaa := h.Ready()
				l += fmt.Sprintf(" withdrawn by source health A %s AAAA %s", g.addrList(without(h.A, a)), g.addrList(without(h.AAAA, aaaa)))
			}
			lines = append(lines, l)
			continue
		}
		l := fmt.Sprintf("tag %s peer %s state %s", v.tag, strings.Join(*v.peer.addrs.Load(), ","), v.state)
		if pv := v.peer.view.Load(); pv != nil {
			l += fmt.Sprintf(" view serial %d", pv.view.Serial)
		} else if v.peer.noView.Load() {
			l += " no view, asked per host"
		}
		if v.age > 0 || v.a != nil || v.aaaa != nil {
			l += fmt.Sprintf(" age %.1fs targets A %s AAAA %s", v.age, g.addrList(v.a), g.addrList(v.aaaa))
		}
		if e := v.peer.lastErr.Load(); e != nil && v.state != stateUp {
			l += " last error " + *e
		}
		l += v.peer.witnessExplain(v.state)
		lines = append(lines, l)
	}
	lines = append(lines, g.fleetExplain(h)...)
	// Each family is chosen on its own: the A line is the answer an A
	// query from this client gets, the AAAA line an AAAA query's.
	for _, f := range []struct {
		family string
		d      *decision
	}{{"A", &d}, {"AAAA", &d6}} {
		chosen := "all"
		switch {
		case f.d.allDown:
			chosen = "all-down"
		case f.d.chosen >= 0:
			chosen = views[f.d.chosen].tag
		case f.d.combined != nil:
			var tags []string
			for _, k := range combined(views, f.d.combined, f.d == &d6) {
				tags = append(tags, views[k].tag)
			}
			chosen = strings.Join(tags, tierSep)
		}
		why := f.d.why
		if st := stepText(pol, f.d); st != "" && !f.d.allDown {
			why = st + ", " + why
		}
		lines = append(lines, fmt.Sprintf("answer %s %s: %s", f.family, chosen, why))
	}

	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	txt := &dns.TXT{Hdr: dns.RR_Header{Name: state.QName(), Rrtype: dns.TypeTXT, Class: dns.ClassINET}}
	for _, l := range lines {
		txt.Txt = append(txt.Txt, dnsutil.TXTStrings(l)...)
	}
	m.Answer = []dns.RR{txt}
	scope := 0
	if d.clientDependent {
		scope = d.scope
	}
	w.WriteMsg(addOPT(m, r, ecs, scope))
	return dns.RcodeSuccess, nil
}

func (g *GSLB) explainAllowed(a netip.Addr) bool {
	for _, p := range g.explain {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// addrList lists at most max_targets addresses, so that the record of a
// host with many targets still fits in a message.
// without returns the addresses of all that are not in kept (a subset of
// all, in its order).
func without(all, kept []netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, a := range all {
		if !slices.Contains(kept, a) {
			out = append(out, a)
		}
	}
	return out
}

func (g *GSLB) addrList(as []netip.Addr) string {
	if len(as) == 0 {
		return "-"
	}
	n := min(len(as), g.maxTargets)
	s := make([]string, n, n+1)
	for i, a := range as[:n] {
		s[i] = a.String()
	}
	if len(as) > n {
		s = append(s, fmt.Sprintf("(%d more)", len(as)-n))
	}
	return strings.Join(s, ",")
}

// weightList is the policy's weights, sorted by tag.
func weightList(pol *policy) string {
	tags := slices.Sorted(maps.Keys(pol.weights))
	ws := make([]string, len(tags))
	for i, t := range tags {
		ws[i] = fmt.Sprintf("%s=%d", t, pol.weights[t])
	}
	return strings.Join(ws, ",")
}
