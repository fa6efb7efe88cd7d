package gslb

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/fleetdns/fleetdns/internal/store"
)

// start begins the background work: the walk of the declared hosts, the
// peers' refresh loops and the discovery from the parent.
func (g *GSLB) start() {
	g.ctx, g.cancel = context.WithCancel(context.Background())
	g.setPeers(nil)
	changed, cancel := g.store.Subscribe()
	go func() {
		defer cancel()
		g.runWalk(g.ctx, changed)
	}()
	if g.disc != nil {
		go g.runDiscovery(g.ctx)
	}
	if !g.wit.off {
		go g.runWitness(g.ctx)
	}
	if g.deleg != nil {
		go g.runDelegation(g.ctx)
	}
	if g.pub != nil {
		// The view follows the store and, with localtargets in the block,
		// its health verdicts.
		changed, cancel := g.store.Subscribe()
		var verdicts <-chan struct{}
		cancelV := func() {}
		if g.local != nil {
			verdicts, cancelV = g.local.Subscribe()
		}
		go func() {
			defer cancel()
			defer cancelV()
			g.runPublish(g.ctx, changed, verdicts)
		}()
	}
}

func (g *GSLB) stop() {
	if g.cancel != nil {
		g.cancel()
	}
	for _, p := range g.peers.Load().list {
		p.stop()
	}
}

// setPeers makes the peer set the static peers plus the discovered ones
// (a static peer wins over a discovered one with the same tag; this
// cluster's own tag is never a peer). Peers that stay keep their cached
// answers and state; new ones start unknown and are asked at once.
func (g *GSLB) setPeers(discovered map[string][]string) {
	g.peersMu.Lock()
	defer g.peersMu.Unlock()

	want := map[string][]string{}
	for tag, a := range discovered {
		if tag != g.geotag && len(a) > 0 {
			want[tag] = a
		}
	}
	maps.Copy(want, g.static)

	old := g.peers.Load()
	ps := &peerSet{byTag: make(map[string]*peer, len(want))}
	for _, tag := range slices.Sorted(maps.Keys(want)) {
		addrs := want[tag]
		p := old.byTag[tag]
		switch {
		case p == nil:
			p = newPeer(g, tag, addrs)
			if g.ctx != nil {
				var ctx context.Context
				ctx, p.cancel = context.WithCancel(g.ctx)
				go p.run(ctx)
			}
		case !slices.Equal(*p.addrs.Load(), addrs):
			a := slices.Clone(addrs)
			p.addrs.Store(&a)
			p.wake()
		}
		ps.byTag[tag] = p
		ps.list = append(ps.list, p)
	}
	// The peers that left are stopped and their series deleted before the
	// new set is published: whoever sees the new set sees no gone series.
	gone := false
	for tag, p := range old.byTag {
		if _, ok := ps.byTag[tag]; !ok {
			log.Infof("Peer %s of %s is gone", tag, g.zone)
			p.stop()
			p.forgetMetrics()
			gone = gone || p.view.Load() != nil
		}
	}
	g.peers.Store(ps)
	g.indexPeerAddrs(ps)
	if gone {
		g.reindex() // the hosts only the gone peers declared go with them
	}
}

// runWalk keeps the list of the zone's GSLB hosts that the peer loops
// prefetch, so that steady-state queries wait on no peer. It reads the store
// when the store says it changed, never on a timer.
func (g *GSLB) runWalk(ctx context.Context, changed <-chan struct{}) {
	for {
		g.walk()
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

// walk reads the declared hosts of the zone from the store snapshot, logs
// invalid per-host policies once, and on a change drops the answers of
// hosts that are gone and wakes the peers to ask about new ones.
func (g *GSLB) walk() {
	if g.store == nil || !g.store.Synced() {
		return
	}
	var names []string
	var beside []string // lines about all-down CNAMEs beside other data, by host
	g.store.Hosts(g.zone, func(h *store.Host) bool {
		if !g.isGSLBHost(h) {
			return true
		}
		names = append(names, h.Name)
		pol, errs := hostPolicy(&g.defaults, h.Properties, h.Labels)
		if line, ok := g.cnameBesideData(pol, h); ok {
			beside = append(beside, h.Name, line)
		}
		if len(errs) == 0 {
			g.badPol.Delete(h.Name)
			return true
		}
		msg := fmt.Sprint(errs)
		if v, ok := g.badPol.Load(h.Name); !ok || v.(string) != msg {
			g.badPol.Store(h.Name, msg)
			log.Warningf("Host %s has invalid GSLB properties, the defaults apply: %s", h.Name, msg)
			for _, err := range errs {
				prop := "other"
				if pe, ok := err.(*propError); ok {
					prop = strings.TrimPrefix(pe.prop, "gslb/")
				}
				policyErrors.WithLabelValues(g.zone, prop).Inc()
			}
		}
		return true
	})
	g.logBeside(beside)
	slices.Sort(names)
	names = slices.Compact(names)
	// Policies of replaced host snapshots pile up in the cache: start
	// afresh now and then.
	if g.policyCount.Load() > int64(2*len(names)+1024) {
		g.policies.Store(&sync.Map{})
		g.policyCount.Store(0)
	}

	// A local declaration changes the hosts only peers declare and the
	// policy conflicts.
	g.reindex()
	old := g.declared.Load()
	if old != nil && slices.Equal(*old, names) {
		g.walked.Store(true)
		return
	}
	g.declared.Store(&names)
	g.walked.Store(true)
	set := make(map[string]struct{}, len(names))
	for _, n := range names {
		set[n] = struct{}{}
	}
	for _, n := range g.fleetNames() {
		set[n] = struct{}{}
	}
	g.unions.Range(func(k, _ any) bool {
		if _, ok := set[strings.TrimPrefix(k.(string), "\x00")]; !ok {
			g.unions.Delete(k)
		}
		return true
	})
	for _, p := range g.peers.Load().list {
		p.forget(set)
		p.wake()
	}
}

// logBeside logs and counts the hosts whose all-down CNAME their other
// data refuses (pairs of host and line), once per host when it starts.
func (g *GSLB) logBeside(beside []string) {
	g.besideMu.Lock()
	defer g.besideMu.Unlock()
	now := make(map[string]struct{}, len(beside)/2)
	logs := 0
	for i := 0; i < len(beside); i += 2 {
		name := beside[i]
		now[name] = struct{}{}
		if _, seen := g.cnameBeside[name]; seen {
			continue
		}
		policyErrors.WithLabelValues(g.zone, "all-down").Inc()
		if logs < maxBesideLogs {
			log.Warning(beside[i+1])
		}
		logs++
	}
	if logs > maxBesideLogs {
		log.Warningf("%d more hosts of %s have an all-down CNAME beside other data, not answered (coredns_gslb_policy_errors_total)", logs-maxBesideLogs, g.zone)
	}
	g.cnameBeside = now
}

// isGSLBHost: an address host of the store (store.Classify: not zone data,
// not written by the k8gb operator, not a literal localtargets- name) below
// the apex of the zone, and not one of the zone's name servers.
func (g *GSLB) isGSLBHost(h *store.Host) bool {
	name := h.Name
	if store.Classify(h, g.prefix) != store.Address || !strings.HasSuffix(name, "."+g.zone) {
		return false
	}
	return g.ns == nil || !g.ns.match(name)
}
