package gslb

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// defaultNSPattern is how a name server's name carries its cluster's geo tag.
const defaultNSPattern = "gslb-ns-{geotag}.{zone}"

// nsPattern maps a name server's name to a geo tag: the configured pattern
// and k8gb's gslb-ns-<geotag>-<zone with dashes>.<parent>.
type nsPattern struct {
	prefixes []string // literal beginnings, a cheap test before the regexps
	res      []*regexp.Regexp
}

func newNSPattern(pattern, zone string) (*nsPattern, error) {
	if strings.Count(pattern, "{geotag}") != 1 {
		return nil, fmt.Errorf("pattern %q must hold {geotag} once", pattern)
	}
	z := strings.TrimSuffix(zone, ".")
	parent := ""
	if i := strings.IndexByte(z, '.'); i >= 0 {
		parent = z[i+1:]
	}
	n := &nsPattern{}
	add := func(p string) {
		lit, _, _ := strings.Cut(p, "{")
		n.prefixes = append(n.prefixes, lit)
		re := regexp.QuoteMeta(strings.ToLower(strings.TrimSuffix(p, ".")))
		re = strings.Replace(re, `\{geotag\}`, `([a-z0-9_]+(?:-[a-z0-9_]+)*?)`, 1)
		re = strings.ReplaceAll(re, `\{zone\}`, regexp.QuoteMeta(z))
		re = strings.ReplaceAll(re, `\{parent\}`, regexp.QuoteMeta(parent))
		n.res = append(n.res, regexp.MustCompile("^"+re+`\.$`))
	}
	add(pattern)
	if parent != "" {
		// k8gb: gslb-ns-<geotag>-<zone with dashes>.<edge zone>, with the
		// whole zone or the zone below its parent in dashes.
		add("gslb-ns-{geotag}-" + strings.ReplaceAll(z, ".", "-") + ".{parent}")
		sub := strings.TrimSuffix(z, "."+parent)
		add("gslb-ns-{geotag}-" + strings.ReplaceAll(sub, ".", "-") + ".{parent}")
	}
	return n, nil
}

// tag returns the geo tag in a name server's name (lower-case, fully
// qualified).
func (n *nsPattern) tag(name string) (string, bool) {
	if !n.match(name) {
		return "", false
	}
	for _, re := range n.res {
		if m := re.FindStringSubmatch(name); m != nil {
			return m[1], true
		}
	}
	return "", false
}

// match reports whether name is a name server's name.
func (n *nsPattern) match(name string) bool {
	for i, p := range n.prefixes {
		if strings.HasPrefix(name, p) && n.res[i].MatchString(name) {
			return true
		}
	}
	return false
}

// discovery finds peers in the parent's NS delegation of the zone.
type discovery struct {
	servers []string // the parent's servers, host:port
	refresh time.Duration
	port    string // the peers' DNS port
	// allow are the glue addresses taken although they are loopback,
	// link-local, unspecified or multicast.
	allow []netip.Prefix
	// deny are glue addresses refused whatever allow says: the ranges of
	// this cluster's own services (its service CIDR), which no address
	// check can know.
	deny []netip.Prefix

	attempted atomic.Bool
}

// maxPeerAddrs bounds the addresses of one discovered peer: the parent may
// give one tag any number of names and glue records.
const maxPeerAddrs = 8

// delegation is what one look at the parent found.
type delegation struct {
	peers map[string][]string // geo tag -> host:port, sorted
	own   bool                // this cluster's name server is in it
	// ignored are the geo tags beyond max_peers; refused the glue addresses
	// that no allow CIDR or static peer names.
	ignored []string
	refused []string
}

// glueAllowed refuses addresses that reach this host or its link (the cloud
// metadata service at 169.254.169.254) rather than another cluster, unless
// an allow CIDR or a static peer names them, and addresses a deny CIDR
// names.
func (g *GSLB) glueAllowed(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range g.disc.deny {
		if p.Contains(a) {
			return false
		}
	}
	if !a.IsLoopback() && !a.IsLinkLocalUnicast() && !a.IsLinkLocalMulticast() && !a.IsUnspecified() && !a.IsMulticast() {
		return true
	}
	for _, p := range g.disc.allow {
		if p.Contains(a) {
			return true
		}
	}
	for _, addrs := range g.static {
		for _, hp := range addrs {
			if ap, err := netip.ParseAddrPort(hp); err == nil && ap.Addr().Unmap() == a {
				return true
			}
		}
	}
	return false
}

// discover asks the parent's servers, in order, for the zone's NS set and
// glue.
func (g *GSLB) discover(ctx context.Context) (delegation, error) {
	x := newExchanger(g.timeout)
	var errs []error
	for _, s := range g.disc.servers {
		d, err := g.askParent(ctx, x, s)
		if err == nil {
			return d, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", s, err))
	}
	return delegation{}, errors.Join(errs...)
}

// parentQuery asks a parent's server about name without recursion: the
// delegation is what the parent itself holds, not what a resolver behind it
// might find.
func parentQuery(ctx context.Context, x exchanger, server, name string, qtype uint16) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.RecursionDesired = false
	return x.exchange(ctx, m, server)
}

func (g *GSLB) askParent(ctx context.Context, x exchanger, server string) (delegation, error) {
	r, err := parentQuery(ctx, x, server, g.zone, dns.TypeNS)
	if err != nil {
		return delegation{}, err
	}
	if r.Rcode != dns.RcodeSuccess {
		return delegation{}, fmt.Errorf("rcode %s", dns.RcodeToString[r.Rcode])
	}
	// A referral carries the NS set in authority; a parent that is also
	// authoritative for the zone answers it.
	var names []string
	for _, rr := range append(slices.Clone(r.Answer), r.Ns...) {
		if ns, ok := rr.(*dns.NS); ok && strings.EqualFold(ns.Hdr.Name, g.zone) {
			n := strings.ToLower(ns.Ns)
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	if len(names) == 0 {
		return delegation{}, errors.New("no NS records for the zone")
	}
	// Sorted, so that the peers kept under max_peers are the same ones
	// whatever order the parent gives.
	slices.Sort(names)
	glue := map[string][]netip.Addr{}
	for _, rr := range r.Extra {
		if a, ok := rrAddr(rr); ok {
			n := strings.ToLower(rr.Header().Name)
			glue[n] = append(glue[n], a)
		}
	}

	d := delegation{peers: map[string][]string{}}
	for _, n := range names {
		tag, ok := g.ns.tag(n)
		if !ok {
			log.Debugf("Name server %s of %s carries no geo tag, skipped", n, g.zone)
			continue
		}
		if tag == g.geotag {
			d.own = true
			continue
		}
		if _, known := d.peers[tag]; !known && len(d.peers) >= g.maxPeers {
			if !slices.Contains(d.ignored, tag) {
				d.ignored = append(d.ignored, tag)
			}
			continue
		}
		if len(d.peers[tag]) >= maxPeerAddrs {
			continue
		}
		addrs := glue[n]
		if len(addrs) == 0 {
			// No glue (out of bailiwick): ask the parent's server for it.
			for _, t := range []uint16{dns.TypeA, dns.TypeAAAA} {
				if a, err := parentQuery(ctx, x, server, n, t); err == nil {
					for _, rr := range a.Answer {
						if ip, ok := rrAddr(rr); ok {
							addrs = append(addrs, ip)
						}
					}
				}
			}
		}
		for _, a := range addrs {
			if !g.glueAllowed(a) {
				if s := a.String(); !slices.Contains(d.refused, s) {
					d.refused = append(d.refused, s)
				}
				continue
			}
			hp := net.JoinHostPort(a.Unmap().String(), g.disc.port)
			if len(d.peers[tag]) < maxPeerAddrs && !slices.Contains(d.peers[tag], hp) {
				d.peers[tag] = append(d.peers[tag], hp)
			}
		}
		if len(d.peers[tag]) == 0 {
			delete(d.peers, tag)
		}
	}
	for tag := range d.peers {
		slices.Sort(d.peers[tag])
	}
	return d, nil
}

// runDiscovery looks at the delegation now and every refresh, acts on a
// changed peer set at once, and keeps the last good set when the parent
// cannot be reached.
func (g *GSLB) runDiscovery(ctx context.Context) {
	var (
		last       map[string][]string
		failing    bool
		linkLogged = -1 // 1: own NS present, 0: missing, as last logged
		ignored    []string
		refused    []string
	)
	every(ctx, g.disc.refresh, nil, func(ctx context.Context) {
		d, err := g.discover(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			discoveryErrors.WithLabelValues(g.zone).Inc()
			if !failing {
				log.Errorf("Discovering the peers of %s from its parent failed, keeping the last %d peers: %v", g.zone, len(last), err)
				failing = true
			}
		} else {
			discoveryRefreshes.WithLabelValues(g.zone).Inc()
			if failing {
				log.Infof("Discovering the peers of %s from its parent works again", g.zone)
				failing = false
			}
			link := 0
			if d.own {
				link = 1
			}
			parentLink.WithLabelValues(g.zone, g.geotag).Set(float64(link))
			if link != linkLogged {
				if link == 0 {
					log.Warningf("The parent's delegation of %s does not include this cluster's name server (geo tag %s)", g.zone, g.geotag)
				} else if linkLogged == 0 {
					log.Infof("The parent's delegation of %s includes this cluster's name server again", g.zone)
				}
				linkLogged = link
			}
			discoveryIgnored.WithLabelValues(g.zone).Set(float64(len(d.ignored)))
			discoveryRefused.WithLabelValues(g.zone).Set(float64(len(d.refused)))
			if len(d.ignored) > 0 && !slices.Equal(ignored, d.ignored) {
				log.Warningf("The parent's delegation of %s names more than max_peers %d peers: %d ignored, among them %s", g.zone, g.maxPeers, len(d.ignored), d.ignored[0])
			}
			ignored = d.ignored
			if len(d.refused) > 0 && !slices.Equal(refused, d.refused) {
				log.Warningf("The parent's delegation of %s gives %d glue addresses of this host or its link, refused (peers_from_ns allow takes them, unless deny names them): %v", g.zone, len(d.refused), d.refused)
			}
			refused = d.refused
			if last == nil || !maps.EqualFunc(last, d.peers, slices.Equal) {
				log.Infof("Peers of %s from the parent's delegation: %v", g.zone, d.peers)
				last = d.peers
				discoveredPeers.WithLabelValues(g.zone).Set(float64(len(d.peers)))
				g.setPeers(d.peers)
			}
		}
		g.disc.attempted.Store(true)
	})
}
