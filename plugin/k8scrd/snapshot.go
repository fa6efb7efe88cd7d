package k8scrd

import (
	"hash/maphash"
	"net/netip"
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
	// rrsets is the served data, one entry per type (a few at most: a slice
	// beats a map in size and speed); nil for an empty non-terminal.
	rrsets []rrset
	// host is the merged endpoint view for store.Reader (its Name is the
	// node's name); nil for an empty non-terminal.
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

// merged is one RRset as the builder merged it, before it is built into a
// node: the addresses of an A or AAAA RRset, the records of any other.
type merged struct {
	rtype uint16
	ttl   uint32
	addrs []netip.Addr
	rrs   []dns.RR
}

// newNode returns the node holding sets (sorted by type, none empty), its
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
func newNode(h store.Host, sets []merged) *node {
	hdr := func(m merged) dns.RR_Header {
		return dns.RR_Header{Name: h.Name, Rrtype: m.rtype, Class: dns.ClassINET, Ttl: m.ttl}
	}
	if len(sets) == 1 {
		switch m := sets[0]; {
		case m.rtype == dns.TypeA && len(m.addrs) == 1:
			b := &aNode{a: dns.A{Hdr: hdr(m)}, ip: m.addrs[0].As4(), h: h}
			b.a.A = b.ip[:]
			b.addr[0] = m.addrs[0]
			b.h.A = b.addr[:]
			b.rr[0] = &b.a
			b.set[0] = rrset{rtype: dns.TypeA, rrs: b.rr[:]}
			b.n = node{host: &b.h, rrsets: b.set[:]}
			return &b.n
		case m.rtype == dns.TypeAAAA && len(m.addrs) == 1:
			b := &aaaaNode{aaaa: dns.AAAA{Hdr: hdr(m)}, ip: m.addrs[0].As16(), h: h}
			b.aaaa.AAAA = b.ip[:]
			b.addr[0] = m.addrs[0]
			b.h.AAAA = b.addr[:]
			b.rr[0] = &b.aaaa
			b.set[0] = rrset{rtype: dns.TypeAAAA, rrs: b.rr[:]}
			b.n = node{host: &b.h, rrsets: b.set[:]}
			return &b.n
		case len(m.rrs) == 1:
			b := &oneNode{h: h}
			b.rr[0] = m.rrs[0]
			b.set[0] = rrset{rtype: m.rtype, rrs: b.rr[:]}
			b.n = node{host: &b.h, rrsets: b.set[:]}
			return &b.n
		}
	}
	b := &hostNode{h: h}
	rrsets := make([]rrset, len(sets))
	for i, m := range sets {
		rrsets[i] = rrset{rtype: m.rtype, rrs: m.rrs}
		switch m.rtype {
		case dns.TypeA:
			rrsets[i].rrs = aRecords(hdr(m), m.addrs)
			b.h.A = m.addrs
		case dns.TypeAAAA:
			rrsets[i].rrs = aaaaRecords(hdr(m), m.addrs)
			b.h.AAAA = m.addrs
		}
	}
	b.n = node{host: &b.h, rrsets: rrsets}
	return &b.n
}

// aRecords returns the A records of addrs, all in one allocation.
func aRecords(hdr dns.RR_Header, addrs []netip.Addr) []dns.RR {
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

// aaaaRecords returns the AAAA records of addrs, all in one allocation.
func aaaaRecords(hdr dns.RR_Header, addrs []netip.Addr) []dns.RR {
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
