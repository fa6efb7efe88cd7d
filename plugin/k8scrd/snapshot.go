package k8scrd

import (
	"hash/maphash"
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
