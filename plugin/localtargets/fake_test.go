package localtargets

import (
	"context"
	"net/netip"
	"strings"
	"sync"

	"github.com/fleetdns/fleetdns/internal/store"

	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
)

// fakeStore is a store.Reader over a fixed set of hosts.
type fakeStore struct {
	mu     sync.Mutex
	synced bool
	hosts  map[string]*store.Host
}

func (s *fakeStore) Synced() bool { return s.synced }

func (s *fakeStore) Host(name string) (*store.Host, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.hosts[name]
	return h, ok
}

// set replaces the hosts, as a k8scrd update swaps its snapshot.
func (s *fakeStore) set(hosts ...*store.Host) {
	m := map[string]*store.Host{}
	for _, h := range hosts {
		m[h.Name] = h
	}
	s.mu.Lock()
	s.hosts = m
	s.mu.Unlock()
}

func (s *fakeStore) Hosts(zone string, fn func(*store.Host) bool) {
	s.mu.Lock()
	hosts := s.hosts
	s.mu.Unlock()
	for name, h := range hosts {
		if name == zone || strings.HasSuffix(name, "."+zone) {
			if !fn(h) {
				return
			}
		}
	}
}

func newFakeStore(hosts ...*store.Host) *fakeStore {
	s := &fakeStore{synced: true}
	s.set(hosts...)
	return s
}

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

// fakeSOA answers SOA queries the way k8scrd does for example.org.: at the
// apex in the answer, below it in the authority section (NODATA).
type fakeSOA struct{}

const apexSOA = "example.org. 3600 IN SOA ns1.example.org. hostmaster.example.org. 1700000000 7200 1800 86400 60"

func (fakeSOA) Name() string { return "k8scrd" }

func (fakeSOA) ServeDNS(_ context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	if r.Question[0].Name == "example.org." {
		m.Answer = []dns.RR{test.SOA(apexSOA)}
	} else {
		m.Ns = []dns.RR{test.SOA(apexSOA)}
	}
	w.WriteMsg(m)
	return dns.RcodeSuccess, nil
}
