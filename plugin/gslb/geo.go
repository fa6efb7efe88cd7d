package gslb

import (
	"context"
	"fmt"
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
// for: the matched CIDR's or MaxMind network's, else the client's own.
func (r *geoResolver) lookup(cl *client) (tag string, scope int, ok bool) {
	if r == nil || cl == nil {
		return "", 0, false
	}
	scope = cl.bits
	addr := cl.addr.Unmap()
	if addr.IsValid() {
		for _, c := range r.cidrs {
			if c.prefix.Contains(addr) {
				return c.tag, c.prefix.Bits(), true
			}
		}
		if r.mmdb != nil {
			res := r.mmdb.Lookup(addr)
			if p := res.Prefix(); p.IsValid() {
				scope = p.Bits()
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
