package tree

import (
	"hash/maphash"
	"net/netip"
	"strings"

	"github.com/fleetdns/fleetdns/internal/store"
	"github.com/miekg/dns"
)

// NShards is the number of shards names are spread over. An update copies only
// the shards it touches, so its cost is about (names changed) x (names / nShards).
const NShards = 1024

var shardSeed = maphash.MakeSeed()

func ShardOf(name string) int { return int(maphash.String(shardSeed, name) & (NShards - 1)) }

// Node is what the store holds at one name. Immutable once published.
type Node struct {
	// RRsets is the served data, one entry per type (a few at most: a slice
	// beats a map in size and speed); nil for an empty non-terminal.
	RRsets []RRset
	// Host is the merged endpoint view for store.Reader (its Name is the
	// node's name); nil for an empty non-terminal.
	Host *store.Host
	// Below counts the declared names strictly below this one (in its zone):
	// a name with no data and below > 0 is an empty non-terminal (RFC 8020).
	Below int32
	// Cut is true for a delegation: NS records below the apex.
	Cut bool
}

// RRset is the records of one type at a name, TTLs equal.
type RRset struct {
	Type uint16
	RRs  []dns.RR
}

func (n *Node) Declared() bool { return n.Host != nil }

// Get returns the RRset of type t at n, nil when there is none.
func (n *Node) Get(t uint16) []dns.RR {
	for i := range n.RRsets {
		if n.RRsets[i].Type == t {
			return n.RRsets[i].RRs
		}
	}
	return nil
}

// Zone is what one zone needs besides its names. Immutable once published.
type Zone struct {
	Origin  string
	Serial  uint32
	SOA     []dns.RR // the SOA RRset, for answers
	NegSOA  []dns.RR // the SOA with TTL min(SOA TTL, MINIMUM), for negative answers (RFC 2308 §3)
	NS      []dns.RR // apex NS: from objects, or synthesized from the SOA MNAME
	Cuts    int      // delegations below the apex
	Records int      // RRs held in the zone, for the records metric
}

// Snapshot is one immutable version of all zones. Readers load it with an
// atomic pointer and never lock; the builder publishes a new one per batch.
type Snapshot struct {
	Synced bool
	Shards [NShards]map[string]*Node
	Zones  map[string]*Zone
}

func (s *Snapshot) Get(name string) *Node { return s.Shards[ShardOf(name)][name] }

// Parent returns name without its first label; "" for the root.
func Parent(name string) string {
	i := strings.IndexByte(name, '.')
	if i < 0 || i == len(name)-1 {
		return ""
	}
	return name[i+1:]
}

// Merged is one RRset as the builder merged it, before it is built into a
// node: the addresses of an A or AAAA RRset, the records of any other.
type Merged struct {
	Type  uint16
	TTL   uint32
	Addrs []netip.Addr
	RRs   []dns.RR
}

// NewNode returns the node holding sets (sorted by type, none empty), its
// store.Host h (h.Name is the node's name) completed with the addresses.
// The address records are built here, once, from the addresses.
//
// A query touches the node, its RRset, the record and the record's address;
// allocated apart they lie in four places of a heap that at 100,000 names is
// hundreds of megabytes, so each query pays four cache and TLB misses for
// them, and every GC cycle marks and scans each of them. Nearly every name at
// that scale holds a single record, so that node is one allocation holding
// the node, its RRset and the record (an A or AAAA with its address bytes),
// in the order a query reads them, and its Host after them; other nodes are
// the node and its Host in one, their address records in one more.
func NewNode(h store.Host, sets []Merged) *Node {
	hdr := func(m Merged) dns.RR_Header {
		return dns.RR_Header{Name: h.Name, Rrtype: m.Type, Class: dns.ClassINET, Ttl: m.TTL}
	}
	if len(sets) == 1 {
		switch m := sets[0]; {
		case m.Type == dns.TypeA && len(m.Addrs) == 1:
			b := &aNode{a: dns.A{Hdr: hdr(m)}, ip: m.Addrs[0].As4(), h: h}
			b.a.A = b.ip[:]
			b.addr[0] = m.Addrs[0]
			b.h.A = b.addr[:]
			b.rr[0] = &b.a
			b.set[0] = RRset{Type: dns.TypeA, RRs: b.rr[:]}
			b.n = Node{Host: &b.h, RRsets: b.set[:]}
			return &b.n
		case m.Type == dns.TypeAAAA && len(m.Addrs) == 1:
			b := &aaaaNode{aaaa: dns.AAAA{Hdr: hdr(m)}, ip: m.Addrs[0].As16(), h: h}
			b.aaaa.AAAA = b.ip[:]
			b.addr[0] = m.Addrs[0]
			b.h.AAAA = b.addr[:]
			b.rr[0] = &b.aaaa
			b.set[0] = RRset{Type: dns.TypeAAAA, RRs: b.rr[:]}
			b.n = Node{Host: &b.h, RRsets: b.set[:]}
			return &b.n
		case len(m.RRs) == 1:
			b := &oneNode{h: h}
			b.rr[0] = m.RRs[0]
			b.set[0] = RRset{Type: m.Type, RRs: b.rr[:]}
			b.n = Node{Host: &b.h, RRsets: b.set[:]}
			return &b.n
		}
	}
	b := &hostNode{h: h}
	rrsets := make([]RRset, len(sets))
	for i, m := range sets {
		rrsets[i] = RRset{Type: m.Type, RRs: m.RRs}
		switch m.Type {
		case dns.TypeA:
			rrsets[i].RRs = ARecords(hdr(m), m.Addrs)
			b.h.A = m.Addrs
		case dns.TypeAAAA:
			rrsets[i].RRs = AAAARecords(hdr(m), m.Addrs)
			b.h.AAAA = m.Addrs
		}
	}
	b.n = Node{Host: &b.h, RRsets: rrsets}
	return &b.n
}

// ARecords returns the A records of addrs, all in one allocation.
func ARecords(hdr dns.RR_Header, addrs []netip.Addr) []dns.RR {
	recs := make([]struct {
		a  dns.A
		ip [4]byte
	}, len(addrs))
	rrs := make([]dns.RR, len(addrs))
	for i, a := range addrs {
		recs[i].ip = a.As4()
		recs[i].a = dns.A{Hdr: hdr, A: recs[i].ip[:]}
		rrs[i] = &recs[i].a
	}
	return rrs
}

// AAAARecords returns the AAAA records of addrs, all in one allocation.
func AAAARecords(hdr dns.RR_Header, addrs []netip.Addr) []dns.RR {
	recs := make([]struct {
		aaaa dns.AAAA
		ip   [16]byte
	}, len(addrs))
	rrs := make([]dns.RR, len(addrs))
	for i, a := range addrs {
		recs[i].ip = a.As16()
		recs[i].aaaa = dns.AAAA{Hdr: hdr, AAAA: recs[i].ip[:]}
		rrs[i] = &recs[i].aaaa
	}
	return rrs
}

// hostNode is a node and its Host in one allocation.
type hostNode struct {
	n Node
	h store.Host
}

// oneNode is a node of one record with its RRset, record slice and Host.
type oneNode struct {
	n   Node
	set [1]RRset
	rr  [1]dns.RR
	h   store.Host
}

// aNode is a node of one A record, the record and its address included.
type aNode struct {
	n    Node
	set  [1]RRset
	rr   [1]dns.RR
	a    dns.A
	ip   [4]byte
	h    store.Host
	addr [1]netip.Addr
}

// aaaaNode is a node of one AAAA record, the record and its address included.
type aaaaNode struct {
	n    Node
	set  [1]RRset
	rr   [1]dns.RR
	aaaa dns.AAAA
	ip   [16]byte
	h    store.Host
	addr [1]netip.Addr
}
