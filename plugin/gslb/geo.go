package gslb

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/bits"
	"net/netip"
	"strings"

	"github.com/coredns/coredns/plugin/metadata"

	"github.com/oschwald/maxminddb-golang/v2"
)

// client is what geoip knows about who asks: the address from EDNS Client
// Subnet, else the source address.
type client struct {
	ctx  context.Context // carries the metadata of CoreDNS's geoip plugin
	addr netip.Addr
	bits int // prefix length the address stands for
}

type cidrTag struct {
	prefix netip.Prefix
	tag    string
}

// geoResolver maps a client to a geo tag: `geo cidr` first (most specific
// prefix wins), then `geo mmdb`, then `geo metadata`, each value through
// `geo map`.
type geoResolver struct {
	cidrs   []cidrTag // most specific first
	mmdb    *maxminddb.Reader
	mmdbSrc string
	field   []any // path into the MaxMind record, e.g. continent, code
	values  map[string]string
	metaKey string
}

// lookup returns the client's tag and the prefix length the answer holds
// for (the ECS scope, RFC 7871 §7.2.1). That is the matched CIDR's or
// MaxMind network's prefix, else the client's own, deaggregated: when a
// more specific configured CIDR lies inside it (us 10.0.32.0/23 with ap's
// 10.0.33.0/24 inside), the scope is lengthened until it excludes that CIDR
// (10.0.32.0/24), so that a resolver caching the answer for the scope never
// hands it to a client whose answer differs. gdnsd answers the same way.
func (r *geoResolver) lookup(cl *client) (tag string, scope int, ok bool) {
	if r == nil || cl == nil {
		return "", 0, false
	}
	scope = cl.bits
	addr := cl.addr.Unmap()
	if addr.IsValid() {
		t, plen, matched, excl := r.cidrLookup(addr)
		if matched {
			return t, max(plen, excl), true
		}
		scope = max(scope, excl)
		if r.mmdb != nil {
			res := r.mmdb.Lookup(addr)
			if p := res.Prefix(); p.IsValid() {
				scope = max(p.Bits(), excl)
			}
			if res.Found() {
				var v any
				if err := res.DecodePath(&v, r.field...); err == nil && v != nil {
					if t, ok := r.mapValue(fmt.Sprint(v)); ok {
						return t, scope, true
					}
				}
			}
		}
	}
	if r.metaKey != "" && cl.ctx != nil {
		if f := metadata.ValueFunc(cl.ctx, r.metaKey); f != nil {
			if t, ok := r.mapValue(f()); ok {
				return t, scope, true
			}
		}
	}
	return "", scope, false
}

// cidrLookup returns the tag and prefix length of the most specific `geo
// cidr` that contains addr, and excl: the shortest prefix length around
// addr that no configured CIDR not containing addr overlaps (0 when none
// comes near). A CIDR that does not contain addr overlaps addr/L exactly
// when L is at most the number of leading bits they share; the answer's
// scope must be longer than that. CIDRs less specific than the match never
// overlap the match without containing addr, so every CIDR can be counted
// and the list is walked once.
func (r *geoResolver) cidrLookup(addr netip.Addr) (tag string, plen int, matched bool, excl int) {
	for i := range r.cidrs {
		c := &r.cidrs[i]
		if c.prefix.Addr().Is4() != addr.Is4() {
			continue
		}
		if c.prefix.Contains(addr) {
			if !matched {
				tag, plen, matched = c.tag, c.prefix.Bits(), true
			}
			continue
		}
		excl = max(excl, commonBits(addr, c.prefix.Addr())+1)
	}
	return tag, plen, matched, excl
}

// commonBits is the number of leading bits a and b (of one family) share.
func commonBits(a, b netip.Addr) int {
	if a.Is4() {
		x, y := a.As4(), b.As4()
		return bits.LeadingZeros32(binary.BigEndian.Uint32(x[:]) ^ binary.BigEndian.Uint32(y[:]))
	}
	x, y := a.As16(), b.As16()
	if hi := binary.BigEndian.Uint64(x[:8]) ^ binary.BigEndian.Uint64(y[:8]); hi != 0 {
		return bits.LeadingZeros64(hi)
	}
	return 64 + bits.LeadingZeros64(binary.BigEndian.Uint64(x[8:])^binary.BigEndian.Uint64(y[8:]))
}

// mapValue maps a MaxMind or metadata value to a tag through `geo map`; a
// value that no map names is the tag itself.
func (r *geoResolver) mapValue(v string) (string, bool) {
	if v == "" {
		return "", false
	}
	if t, ok := r.values[v]; ok {
		return t, true
	}
	if t, ok := r.values[strings.ToLower(v)]; ok {
		return t, true
	}
	return v, true
}
