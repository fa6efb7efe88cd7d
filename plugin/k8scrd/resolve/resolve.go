package resolve

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// A load balancer's status may give a host name instead of addresses (cloud
// load balancers do). A GSLB answer and a localtargets- answer carry
// addresses only, and a GSLB block has no forward to follow a CNAME with, so
// k8scrd resolves those names itself, in the background: the query path
// reads the last good addresses and never waits for a lookup
// (docs/architecture.md, and the k8scrd README).

const (
	// resolverTimeout bounds one query to one server; the next server is
	// tried after it.
	resolverTimeout = 2 * time.Second
	// resolverInFlight bounds the names looked up at once, so that a
	// thousand names tracked in one sync do not burst at the resolvers.
	resolverInFlight = 8
	// resolverChain bounds the CNAME chain followed in an answer.
	resolverChain = 8
	// resolverUDPSize is the EDNS0 buffer size advertised (DNS flag day 2020).
	resolverUDPSize = 1232
	// resolverMaxAddrs caps the addresses kept per name and family, as
	// gslb's max_targets (64) caps what one answer carries: a tenant's own
	// DNS answering a status host name with thousands of records costs no
	// more than this.
	resolverMaxAddrs = 64
	// resolverMaxPerObject caps the status host names one object has
	// resolved (the first in name order).
	resolverMaxPerObject = 16
)

// resolvConf is where the resolvers come from when none is configured.
var resolvConf = "/etc/resolv.conf"

// resolver resolves the status host names of the objects, A and AAAA,
// re-resolving each at its TTL clamped to [floor, ceiling]. It is safe for
// concurrent use; lookups happen in run's goroutines only.
type resolver struct {
	servers        []string
	floor, ceiling time.Duration
	// maxNames caps the names resolved at all, maxPerObject those of one
	// object, maxAddrs the addresses kept per name and family.
	maxNames     int
	maxPerObject int
	maxAddrs     int
	timeout      time.Duration
	// changed is called from run's goroutine, never concurrently, with the
	// keys whose host names' addresses changed.
	changed func(keys []string)

	mu sync.Mutex
	// keys are what each object key tracks; tracked counts the keys that
	// track each name (every name, within the cap or beyond).
	keys    map[string]*trackedKey
	tracked map[string]int
	// names are the names resolved (at most maxNames): their state.
	names map[string]*resolvedName
	// rebalance: more names are tracked than maxNames, and which of them
	// are resolved must be chosen again (resolve_share.go); run does it.
	rebalance bool
	// overCap is true while some tracked name is beyond the cap: the
	// warning is logged once per crossing, not once per name.
	overCap bool
	// failing counts the names whose last lookup failed: the warning is
	// logged when the first fails, not for each.
	failing int
	// beyondObjects counts the names not tracked because their object
	// names more than maxPerObject; truncated the names whose last answer
	// of a family (A, AAAA) held more than maxAddrs addresses.
	beyondObjects int
	truncated     [2]int
	// published is what this resolver added to the gauges, so that several
	// resolvers (several server blocks) add up and a stopped one leaves none.
	published resolverGauges
	stopped   bool

	// wake tells run that a name is due now.
	wake chan struct{}
}

// resolvedName is the state of one resolved name.
type resolvedName struct {
	// v4 and v6 are the last good addresses of each family, sorted; a
	// failed lookup of one family keeps its own.
	v4, v6 []netip.Addr
	// addrs is v4 and v6 together, sorted: what addrs returns.
	addrs    []netip.Addr
	next     time.Time
	inFlight bool
	// failing: the last lookup failed (no server answered).
	failing bool
	// truncated: the last answer of the family (A, AAAA) held more than
	// maxAddrs addresses.
	truncated [2]bool
}

// trackedKey is what one object tracks.
type trackedKey struct {
	// names are the status host names resolved for the object: canonical,
	// sorted, at most maxPerObject; beyond counts those left out.
	names  []string
	beyond int
	// namespace is the object's: the cap is shared between namespaces.
	namespace string
	// annotated: the names come from an annotation the object's authors
	// wrote (k8gb.io/exposed-hostnames), not from a controller's status;
	// status host names are resolved first.
	annotated bool
}

// newResolver returns a resolver that asks servers ("host:port", in order on
// failure), or the nameservers of /etc/resolv.conf when servers is empty.
func newResolver(servers []string, floor, ceiling time.Duration, maxNames int, changed func(keys []string)) *resolver {
	if len(servers) == 0 {
		servers = systemResolvers(resolvConf)
	}
	if ceiling < floor {
		ceiling = floor
	}
	return &resolver{
		servers:      servers,
		floor:        floor,
		ceiling:      ceiling,
		maxNames:     maxNames,
		maxPerObject: resolverMaxPerObject,
		maxAddrs:     resolverMaxAddrs,
		timeout:      resolverTimeout,
		changed:      changed,
		keys:         map[string]*trackedKey{},
		tracked:      map[string]int{},
		names:        map[string]*resolvedName{},
		wake:         make(chan struct{}, 1),
	}
}

// systemResolvers returns the nameservers of the resolv.conf at path, as host:port.
func systemResolvers(path string) []string {
	cfg, err := dns.ClientConfigFromFile(path)
	if err != nil || len(cfg.Servers) == 0 {
		log.Warningf("No resolver configured and none in %s: status host names are not resolved", path)
		return nil
	}
	servers := make([]string, 0, len(cfg.Servers))
	for _, s := range cfg.Servers {
		servers = append(servers, net.JoinHostPort(s, cfg.Port))
	}
	return servers
}

// canonical is a host name as the resolver keys it: lower-case, fully qualified.
func canonical(hostname string) string { return dns.CanonicalName(hostname) }

// track sets the status host names of object key; none untracks it.
// annotated says they come from an annotation rather than a controller's
// status (trackedKey). At most maxPerObject names of one object are
// tracked. A new name is resolved at once while every tracked name fits
// in maxNames; beyond, run chooses which are (resolve_share.go). A name no
// key tracks any more is forgotten.
func (r *resolver) track(key string, hostnames []string, annotated bool) {
	names := make([]string, 0, len(hostnames))
	for _, h := range hostnames {
		if h != "" {
			names = append(names, canonical(h))
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	beyond := 0
	if len(names) > r.maxPerObject {
		beyond = len(names) - r.maxPerObject
		names = slices.Clip(names[:r.maxPerObject])
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.keys[key]
	if old == nil {
		old = &trackedKey{}
	}
	if slices.Equal(old.names, names) && old.beyond == beyond && old.annotated == annotated {
		return
	}
	if len(names) == 0 && beyond == 0 {
		delete(r.keys, key)
	} else {
		r.keys[key] = &trackedKey{names: names, beyond: beyond, namespace: keyNamespace(key), annotated: annotated}
	}
	r.beyondObjects += beyond - old.beyond
	if beyond > 0 && beyond != old.beyond {
		log.Warningf("%s names %d status host names: the first %d (in name order) are resolved, the other %d are not (see coredns_k8scrd_resolver_skipped_names)",
			keyObject(key), len(names)+beyond, len(names), beyond)
	}
	for _, n := range names {
		r.tracked[n]++
	}
	for _, n := range old.names {
		if r.tracked[n]--; r.tracked[n] == 0 {
			delete(r.tracked, n)
			r.forget(n)
		}
	}
	added := false
	switch {
	case len(r.servers) == 0:
	case len(r.tracked) <= r.maxNames:
		// Every tracked name fits: all are resolved, no choice to make.
		added = r.admit(names)
		if len(r.names) < len(r.tracked) {
			// Names that waited beyond the cap take the freed places.
			added = r.admit(slices.Collect(maps.Keys(r.tracked))) || added
		}
	default:
		// Beyond the cap: run chooses again who gets the places (share).
		r.rebalance = true
		added = true
	}
	r.publish()
	if added {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}

// forget drops name's state, if it is resolved. Callers hold r.mu.
func (r *resolver) forget(name string) {
	state, ok := r.names[name]
	if !ok {
		return
	}
	if state.failing {
		r.failing--
	}
	for i, t := range state.truncated {
		if t {
			r.truncated[i]--
		}
	}
	delete(r.names, name)
}

// admit starts resolving those of names that are not yet resolved, while
// the cap allows; it reports whether it started any. Callers hold r.mu.
func (r *resolver) admit(names []string) bool {
	if len(r.servers) == 0 {
		return false
	}
	added := false
	for _, n := range names {
		if _, ok := r.names[n]; ok {
			continue
		}
		if len(r.names) >= r.maxNames {
			break
		}
		r.names[n] = &resolvedName{}
		added = true
	}
	return added
}

// publish brings the gauges and the cap's warning up to date. Callers hold r.mu.
func (r *resolver) publish() {
	if r.stopped {
		return
	}
	g := resolverGauges{resolved: float64(len(r.names)), object: float64(r.beyondObjects)}
	if len(r.servers) == 0 {
		g.noResolver = float64(len(r.tracked))
	} else {
		g.beyond = float64(len(r.tracked) - len(r.names))
	}
	g.truncatedA, g.truncatedAAAA = float64(r.truncated[0]), float64(r.truncated[1])
	if over := g.beyond > 0; over != r.overCap {
		r.overCap = over
		if over {
			log.Warningf("More than %d status host names: the names beyond are not resolved, each namespace's share first, controllers' status before annotations (see coredns_k8scrd_resolver_skipped_names)", r.maxNames)
		} else {
			log.Infof("Status host names within %d again: all resolved", r.maxNames)
		}
	}
	r.setGauges(g)
}

// resolverGauges are the values one resolver adds to the gauges.
type resolverGauges struct {
	resolved, beyond, noResolver, object float64
	truncatedA, truncatedAAAA            float64
}

// setGauges adds this resolver's change to the gauges. Callers hold r.mu.
func (r *resolver) setGauges(now resolverGauges) {
	was := r.published
	resolverNames.Add(now.resolved - was.resolved)
	resolverSkippedNames.WithLabelValues("cap").Add(now.beyond - was.beyond)
	resolverSkippedNames.WithLabelValues("noresolver").Add(now.noResolver - was.noResolver)
	resolverSkippedNames.WithLabelValues("object").Add(now.object - was.object)
	resolverTruncatedNames.WithLabelValues("A").Add(now.truncatedA - was.truncatedA)
	resolverTruncatedNames.WithLabelValues("AAAA").Add(now.truncatedAAAA - was.truncatedAAAA)
	r.published = now
}

// addrs returns the last good addresses of hostname (A and AAAA), sorted;
// nil when it was never resolved or has none.
func (r *resolver) addrs(hostname string) []netip.Addr {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n, ok := r.names[canonical(hostname)]; ok && len(n.addrs) > 0 {
		return slices.Clone(n.addrs)
	}
	return nil
}

// lookup is the outcome of resolving one name, both families.
type lookup struct {
	name  string
	state *resolvedName
	v4    family
	v6    family
}

// family is the outcome of one query type: addresses and the TTL that
// bounds them, or err when no server gave an answer.
type family struct {
	addrs  []netip.Addr
	ttl    uint32
	rcode  int
	hasTTL bool
	err    error
}

// run resolves the names due, at most resolverInFlight at once, until stop
// is closed; it returns when its lookups have ended.
func (r *resolver) run(stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
		r.mu.Lock()
		r.setGauges(resolverGauges{})
		r.stopped = true
		r.mu.Unlock()
	}()

	results := make(chan lookup, resolverInFlight)
	inFlight := 0
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		if keys := r.share(); len(keys) > 0 && r.changed != nil {
			r.changed(keys)
		}
		due, next := r.due(time.Now(), resolverInFlight-inFlight)
		for _, l := range due {
			inFlight++
			wg.Go(func() {
				l.v4, l.v6 = r.resolve(ctx, l.name)
				results <- l
			})
		}
		// Go 1.23 timers: Reset and Stop leave no stale tick behind.
		if next.IsZero() {
			timer.Stop()
		} else {
			timer.Reset(max(time.Until(next), 0))
		}

		select {
		case <-stop:
			return
		case <-r.wake:
		case <-timer.C:
		case l := <-results:
			inFlight--
			if keys := r.apply(l, time.Now()); len(keys) > 0 && r.changed != nil {
				r.changed(keys)
			}
		}
	}
}

// due marks at most free names due at now in flight and returns them, and
// the time the next name not in flight is due (zero: none, or no free slot).
func (r *resolver) due(now time.Time, free int) ([]lookup, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var due []lookup
	var next time.Time
	for name, n := range r.names {
		if n.inFlight {
			continue
		}
		if !n.next.After(now) && len(due) < free {
			n.inFlight = true
			due = append(due, lookup{name: name, state: n})
			continue
		}
		if next.IsZero() || n.next.Before(next) {
			next = n.next
		}
	}
	if len(due) == free {
		// No free slot: a result wakes run, not the timer.
		next = time.Time{}
	}
	return due, next
}

// apply records the outcome of a lookup and returns the keys whose
// addresses changed, sorted. A name untracked meanwhile is not recorded.
func (r *resolver) apply(l lookup, now time.Time) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	l.state.inFlight = false
	if r.names[l.name] != l.state {
		return nil
	}
	n := l.state
	failed := false
	ttl := uint32(0)
	hasTTL := false
	for i, f := range []struct {
		res  family
		keep *[]netip.Addr
	}{{l.v4, &n.v4}, {l.v6, &n.v6}} {
		if f.res.err != nil {
			failed = true
			continue
		}
		*f.keep = r.capped(l.name, n, i, f.res.addrs)
		if f.res.hasTTL && (!hasTTL || f.res.ttl < ttl) {
			ttl, hasTTL = f.res.ttl, true
		}
	}
	if !failed && n.failing {
		n.failing = false
		if r.failing--; r.failing == 0 {
			log.Infof("Status host names resolve again")
		}
	}
	switch {
	case failed:
		resolverLookups.WithLabelValues("failure").Inc()
		err := l.v4.err
		if err == nil {
			err = l.v6.err
		}
		if !n.failing {
			n.failing = true
			if r.failing++; r.failing == 1 {
				log.Warningf("Resolving status host name %s: %v; keeping its last addresses (further names failing alike are not logged)", l.name, err)
			}
		}
	case l.v4.rcode == dns.RcodeNameError || l.v6.rcode == dns.RcodeNameError:
		resolverLookups.WithLabelValues("nxdomain").Inc()
	case len(l.v4.addrs)+len(l.v6.addrs) == 0:
		resolverLookups.WithLabelValues("nodata").Inc()
	default:
		resolverLookups.WithLabelValues("success").Inc()
	}

	r.publish() // the truncated names may have changed

	// A failure is retried after floor; an answer lives its TTL within
	// [floor, ceiling] (a negative answer without an SOA: floor).
	wait := r.floor
	if !failed && hasTTL {
		wait = min(max(time.Duration(ttl)*time.Second, r.floor), r.ceiling)
	}
	n.next = now.Add(wait)

	addrs := slices.Concat(n.v4, n.v6)
	if len(addrs) == 0 {
		addrs = nil
	}
	if slices.Equal(addrs, n.addrs) {
		return nil
	}
	n.addrs = addrs
	return r.keysOf(l.name)
}

// keysOf returns the keys that track any of names, sorted. Callers hold r.mu.
func (r *resolver) keysOf(names ...string) []string {
	var keys []string
	for key, k := range r.keys {
		for _, name := range names {
			if _, ok := slices.BinarySearch(k.names, name); ok {
				keys = append(keys, key)
				break
			}
		}
	}
	slices.Sort(keys)
	return keys
}

// capped returns the first maxAddrs of name's addresses of family i (0: A,
// 1: AAAA), in address order, so that every replica keeps the same; the
// cut is logged when it starts, once per name, and counted while it lasts.
// Callers hold r.mu.
func (r *resolver) capped(name string, n *resolvedName, i int, addrs []netip.Addr) []netip.Addr {
	over := len(addrs) > r.maxAddrs
	if over != n.truncated[i] {
		n.truncated[i] = over
		if over {
			r.truncated[i]++
			log.Warningf("Status host name %s answered %d %s records: the first %d in address order are kept (see coredns_k8scrd_resolver_truncated_names)",
				name, len(addrs), [2]string{"A", "AAAA"}[i], r.maxAddrs)
		} else {
			r.truncated[i]--
		}
	}
	if over {
		// A copy: the answer's array of thousands is not kept alive.
		return slices.Clone(addrs[:r.maxAddrs])
	}
	return addrs
}

// resolve asks for name's A and AAAA records, both at once.
func (r *resolver) resolve(ctx context.Context, name string) (v4, v6 family) {
	var wg sync.WaitGroup
	wg.Go(func() { v4 = r.query(ctx, name, dns.TypeA) })
	v6 = r.query(ctx, name, dns.TypeAAAA)
	wg.Wait()
	return v4, v6
}

// query asks the servers in order for name's qtype records, recursion
// desired, over UDP and again over TCP when the answer is truncated; a
// server that is silent, fails (SERVFAIL, REFUSED) or answers another
// question passes the query to the next.
func (r *resolver) query(ctx context.Context, name string, qtype uint16) family {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.SetEdns0(resolverUDPSize, false)
	var errs []error
	for _, server := range r.servers {
		if ctx.Err() != nil {
			return family{err: ctx.Err()}
		}
		resp, err := r.exchange(ctx, m, server, "udp")
		if err == nil && resp.Truncated {
			resp, err = r.exchange(ctx, m, server, "tcp")
		}
		if err == nil {
			switch {
			case len(resp.Question) != 1 || !strings.EqualFold(resp.Question[0].Name, name) || resp.Question[0].Qtype != qtype:
				err = errors.New("answer to another question")
			case resp.Rcode != dns.RcodeSuccess && resp.Rcode != dns.RcodeNameError:
				err = errors.New(dns.RcodeToString[resp.Rcode])
			default:
				return answered(resp, name, qtype)
			}
		}
		errs = append(errs, fmt.Errorf("%s: %w", server, err))
	}
	return family{err: errors.Join(errs...)}
}

// exchange sends m to server over network within r.timeout; stopping
// the resolver ends it at once.
func (r *resolver) exchange(ctx context.Context, m *dns.Msg, server, network string) (*dns.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	c := &dns.Client{Net: network, Timeout: r.timeout, UDPSize: resolverUDPSize}
	conn, err := c.DialContext(ctx, server)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	unblock := context.AfterFunc(ctx, func() { conn.Close() })
	defer unblock()
	resp, _, err := c.ExchangeWithConnContext(ctx, m, conn)
	return resp, err
}

// answered reads the addresses of name from resp's answer section,
// following the CNAME chain from name, with the smallest TTL on the way;
// for an answer without addresses, the negative TTL of the SOA in the
// authority section (RFC 2308 §5).
func answered(resp *dns.Msg, name string, qtype uint16) family {
	f := family{rcode: resp.Rcode}
	minTTL := func(ttl uint32) {
		if !f.hasTTL || ttl < f.ttl {
			f.ttl, f.hasTTL = ttl, true
		}
	}
	owner := canonical(name)
	for range resolverChain {
		next := ""
		for _, rr := range resp.Answer {
			if c, ok := rr.(*dns.CNAME); ok && canonical(c.Hdr.Name) == owner {
				next = canonical(c.Target)
				minTTL(c.Hdr.Ttl)
				break
			}
		}
		if next == "" {
			break
		}
		owner = next
	}
	if resp.Rcode == dns.RcodeSuccess {
		for _, rr := range resp.Answer {
			if canonical(rr.Header().Name) != owner || rr.Header().Rrtype != qtype {
				continue
			}
			var ip net.IP
			switch a := rr.(type) {
			case *dns.A:
				ip = a.A
			case *dns.AAAA:
				ip = a.AAAA
			}
			addr, ok := netip.AddrFromSlice(ip)
			if !ok {
				continue
			}
			if qtype == dns.TypeA {
				addr = addr.Unmap()
			}
			f.addrs = append(f.addrs, addr)
			minTTL(rr.Header().Ttl)
		}
	}
	if len(f.addrs) == 0 {
		f.hasTTL = false
		for _, rr := range resp.Ns {
			if soa, ok := rr.(*dns.SOA); ok {
				minTTL(min(soa.Hdr.Ttl, soa.Minttl))
				break
			}
		}
	}
	slices.SortFunc(f.addrs, func(a, b netip.Addr) int { return a.Compare(b) })
	f.addrs = slices.Compact(f.addrs)
	return f
}
