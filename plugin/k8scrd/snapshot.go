package k8scrd

import (
	"hash/maphash"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/fleetdns/fleetdns/internal/store"
	"github.com/miekg/dns"
)

// nShards is the number of shards names are spread over. An update copies only
// the shards it touches, so its cost is about (names changed) x (names / nShards).
const nShards = 1024

var shardSeed = maphash.MakeSeed()

func shardOf(name string) int { return int(maphash.String(shardSeed, name) & (nShards - 1)) }

// node is what the store holds at one name. Immutable once published.
type node struct {
	name string
	// rrsets is the served data, one entry per type (a few at most: a slice
	// beats a map in size and speed); nil for an empty non-terminal.
	rrsets []rrset
	// host is the merged endpoint view for store.Reader; nil for an empty non-terminal.
	host *store.Host
	// below counts the declared names strictly below this one (in its zone):
	// a name with no data and below > 0 is an empty non-terminal (RFC 8020).
	below int32
	// cut is true for a delegation: NS records below the apex.
	cut bool
}

// rrset is the records of one type at a name, TTLs equal.
type rrset struct {
	rtype uint16
	rrs   []dns.RR
}

func (n *node) declared() bool { return n.host != nil }

// get returns the RRset of type t at n, nil when there is none.
func (n *node) get(t uint16) []dns.RR {
	for i := range n.rrsets {
		if n.rrsets[i].rtype == t {
			return n.rrsets[i].rrs
		}
	}
	return nil
}

// zoneData is what one zone needs besides its names. Immutable once published.
type zoneData struct {
	origin  string
	serial  uint32
	soa     []dns.RR // the SOA RRset, for answers
	negSOA  []dns.RR // the SOA with TTL min(SOA TTL, MINIMUM), for negative answers (RFC 2308 §3)
	ns      []dns.RR // apex NS: from objects, or synthesized from the SOA MNAME
	cuts    int      // delegations below the apex
	records int      // RRs held in the zone, for the records metric
}

// snapshot is one immutable version of all zones. Readers load it with an
// atomic pointer and never lock; the builder publishes a new one per batch.
type snapshot struct {
	synced bool
	shards [nShards]map[string]*node
	zones  map[string]*zoneData
}

func (s *snapshot) get(name string) *node { return s.shards[shardOf(name)][name] }

// parent returns name without its first label; "" for the root.
func parent(name string) string {
	i := strings.IndexByte(name, '.')
	if i < 0 || i == len(name)-1 {
		return ""
	}
	return name[i+1:]
}

// newNode returns the node at name holding sets (sorted by type, none
// empty), its store.Host h completed with the addresses.
//
// A query touches the node, its RRset, the record and the record's address;
// allocated apart they lie in four places of a heap that at 100,000 names is
// hundreds of megabytes, so each query pays four cache and TLB misses for
// them, and every GC cycle marks and scans each of them. Nearly every name at
// that scale holds a single record, so that node is one allocation holding
// the node, its RRset and the record (an A or AAAA copied in with its
// address bytes), in the order a query reads them, and its Host after them;
// other nodes are the node and its Host in one.
func newNode(name string, h store.Host, sets []rrset) *node {
	if len(sets) == 1 && len(sets[0].rrs) == 1 {
		switch rr := sets[0].rrs[0].(type) {
		case *dns.A:
			if ip4 := rr.A.To4(); ip4 != nil {
				b := &aNode{a: *rr, h: h}
				copy(b.ip[:], ip4)
				b.a.A = b.ip[:]
				b.addr[0] = netip.AddrFrom4(b.ip)
				b.h.A = b.addr[:]
				b.rr[0] = &b.a
				b.set[0] = rrset{rtype: dns.TypeA, rrs: b.rr[:]}
				b.n = node{name: name, host: &b.h, rrsets: b.set[:]}
				return &b.n
			}
		case *dns.AAAA:
			if len(rr.AAAA) == net.IPv6len {
				b := &aaaaNode{aaaa: *rr, h: h}
				copy(b.ip[:], rr.AAAA)
				b.aaaa.AAAA = b.ip[:]
				b.addr[0] = netip.AddrFrom16(b.ip)
				b.h.AAAA = b.addr[:]
				b.rr[0] = &b.aaaa
				b.set[0] = rrset{rtype: dns.TypeAAAA, rrs: b.rr[:]}
				b.n = node{name: name, host: &b.h, rrsets: b.set[:]}
				return &b.n
			}
		}
		b := &oneNode{h: h}
		b.rr[0] = sets[0].rrs[0]
		b.set[0] = rrset{rtype: sets[0].rtype, rrs: b.rr[:]}
		b.n = node{name: name, host: &b.h, rrsets: b.set[:]}
		b.h.A = addrs(b.n.get(dns.TypeA))
		b.h.AAAA = addrs(b.n.get(dns.TypeAAAA))
		return &b.n
	}
	b := &hostNode{h: h}
	b.n = node{name: name, host: &b.h, rrsets: slices.Clip(sets)}
	b.h.A = addrs(b.n.get(dns.TypeA))
	b.h.AAAA = addrs(b.n.get(dns.TypeAAAA))
	return &b.n
}

// hostNode is a node and its Host in one allocation.
type hostNode struct {
	n node
	h store.Host
}

// oneNode is a node of one record with its RRset, record slice and Host.
type oneNode struct {
	n   node
	set [1]rrset
	rr  [1]dns.RR
	h   store.Host
}

// aNode is a node of one A record, the record and its address included.
type aNode struct {
	n    node
	set  [1]rrset
	rr   [1]dns.RR
	a    dns.A
	ip   [4]byte
	h    store.Host
	addr [1]netip.Addr
}

// aaaaNode is a node of one AAAA record, the record and its address included.
type aaaaNode struct {
	n    node
	set  [1]rrset
	rr   [1]dns.RR
	aaaa dns.AAAA
	ip   [16]byte
	h    store.Host
	addr [1]netip.Addr
}
