// Package storetest is the one fake of the store contract that every test
// uses: a Store whose hosts and zones the test sets, which notifies its
// subscribers on every change as k8scrd's store does.
package storetest

import (
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/fleetdns/fleetdns/internal/store"
	"github.com/miekg/dns"
)

// Store is a store.Store over hosts set by the test. The zero value is not
// usable: call New.
type Store struct {
	mu     sync.RWMutex
	synced bool
	hosts  map[string]*store.Host
	soas   map[string]*dns.SOA // zone -> negative SOA
	subs   store.Notifier
	walks  atomic.Int64
}

var _ store.Store = (*Store)(nil)

// New returns a synced store holding hosts.
func New(hosts ...*store.Host) *Store {
	s := &Store{synced: true, hosts: map[string]*store.Host{}, soas: map[string]*dns.SOA{}}
	for _, h := range hosts {
		s.hosts[h.Name] = h
	}
	return s
}

// Provider wraps s as a store.Provider, as k8scrd is one.
func (s *Store) Provider() store.Provider { return provider{s} }

type provider struct{ s *Store }

func (p provider) Store() store.Store { return p.s }

// Put adds or replaces hosts and notifies the subscribers.
func (s *Store) Put(hosts ...*store.Host) {
	s.mu.Lock()
	for _, h := range hosts {
		s.hosts[h.Name] = h
	}
	s.mu.Unlock()
	s.notify()
}

// Set replaces every host, as a k8scrd update swaps its snapshot.
func (s *Store) Set(hosts ...*store.Host) {
	m := make(map[string]*store.Host, len(hosts))
	for _, h := range hosts {
		m[h.Name] = h
	}
	s.mu.Lock()
	s.hosts = m
	s.mu.Unlock()
	s.notify()
}

// Remove deletes the hosts at names.
func (s *Store) Remove(names ...string) {
	s.mu.Lock()
	for _, n := range names {
		delete(s.hosts, n)
	}
	s.mu.Unlock()
	s.notify()
}

// SetSynced sets what Synced reports; turning it true notifies.
func (s *Store) SetSynced(synced bool) {
	s.mu.Lock()
	s.synced = synced
	s.mu.Unlock()
	if synced {
		s.notify()
	}
}

// SetSOA makes soa (a text SOA record) the negative SOA of its zone, as
// k8scrd gives it: TTL min(SOA TTL, MINIMUM).
func (s *Store) SetSOA(soa string) {
	rr, err := dns.NewRR(soa)
	if err != nil {
		panic("storetest: " + err.Error())
	}
	x := rr.(*dns.SOA)
	x.Hdr.Ttl = min(x.Hdr.Ttl, x.Minttl)
	s.mu.Lock()
	s.soas[strings.ToLower(x.Hdr.Name)] = x
	s.mu.Unlock()
}

// Synced implements store.Store.
func (s *Store) Synced() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.synced
}

// Host implements store.Store.
func (s *Store) Host(name string) (*store.Host, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	h, ok := s.hosts[name]
	return h, ok
}

// Walks is how many times Hosts was called: a consumer that follows the
// store's notifications walks it once per change, not on a timer.
func (s *Store) Walks() int64 { return s.walks.Load() }

// Hosts implements store.Store.
func (s *Store) Hosts(zone string, fn func(*store.Host) bool) {
	s.walks.Add(1)
	s.mu.RLock()
	var hs []*store.Host
	for _, h := range s.hosts {
		if dns.IsSubDomain(zone, h.Name) {
			hs = append(hs, h)
		}
	}
	s.mu.RUnlock()
	for _, h := range hs {
		if !fn(h) {
			return
		}
	}
}

// NegativeSOA implements store.Store: the SOA of the longest zone set with
// SetSOA that holds name.
func (s *Store) NegativeSOA(name string) *dns.SOA {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var best *dns.SOA
	for z, soa := range s.soas {
		if dns.IsSubDomain(z, name) && (best == nil || len(z) > len(best.Hdr.Name)) {
			best = soa
		}
	}
	return best
}

// Subscribe implements store.Store.
func (s *Store) Subscribe() (<-chan struct{}, func()) { return s.subs.Subscribe() }

func (s *Store) notify() { s.subs.Publish() }

// Host builds a store.Host declaring an address endpoint at name (lower-case,
// fully qualified) with addrs as targets: those with a ':' are AAAA targets.
func Host(name string, addrs ...string) *store.Host {
	h := &store.Host{Name: name, AddressDeclared: true, TTL: 30, Properties: map[string]string{}, Labels: map[string]string{}}
	for _, a := range addrs {
		ip := netip.MustParseAddr(a)
		if ip.Is4() {
			h.A = append(h.A, ip)
		} else {
			h.AAAA = append(h.AAAA, ip)
		}
	}
	return h
}

// OwnedHost is Host owned by the namespace owner (store.Host.Owner), as
// k8scrd sets it from the object that publishes the name.
func OwnedHost(owner, name string, addrs ...string) *store.Host {
	h := Host(name, addrs...)
	h.Owner = owner
	return h
}

// Withdraw returns a copy of h whose targets addrs are withdrawn by source
// health, as k8scrd gives a host whose only contributors of those targets
// are unready: h.A and h.AAAA keep them, h.Ready leaves them out. Naming
// every target withdraws them all (the host keeps its declaration); an
// address h does not hold is a test's mistake and panics.
func Withdraw(h *store.Host, addrs ...string) *store.Host {
	out := *h
	gone := map[netip.Addr]bool{}
	for _, a := range addrs {
		ip := netip.MustParseAddr(a)
		if !slices.Contains(h.A, ip) && !slices.Contains(h.AAAA, ip) {
			panic("storetest: " + h.Name + " has no target " + a)
		}
		gone[ip] = true
	}
	ready := &store.Withdrawn{ReadyA: []netip.Addr{}, ReadyAAAA: []netip.Addr{}}
	if h.Withdrawn != nil {
		gone = withdrawnOf(h, gone)
	}
	for _, ip := range h.A {
		if !gone[ip] {
			ready.ReadyA = append(ready.ReadyA, ip)
		}
	}
	for _, ip := range h.AAAA {
		if !gone[ip] {
			ready.ReadyAAAA = append(ready.ReadyAAAA, ip)
		}
	}
	if len(gone) > 0 {
		out.Withdrawn = ready
	}
	return &out
}

// withdrawnOf adds the targets h already withdraws to gone.
func withdrawnOf(h *store.Host, gone map[netip.Addr]bool) map[netip.Addr]bool {
	a, aaaa := h.Ready()
	for _, ip := range h.A {
		if !slices.Contains(a, ip) {
			gone[ip] = true
		}
	}
	for _, ip := range h.AAAA {
		if !slices.Contains(aaaa, ip) {
			gone[ip] = true
		}
	}
	return gone
}
