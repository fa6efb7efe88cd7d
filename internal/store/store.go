// Package store is the read interface that k8scrd's record store offers to
// the plugins that run before it in the same server block (localtargets and
// gslb). They find it in OnStartup, the way k8s_external finds kubernetes:
//
//	h := dnsserver.GetConfig(c).Handler("k8scrd")
//	p, ok := h.(store.Provider)
//
// Everything a Reader returns is immutable: callers may keep it and must not
// change it. Lookups take no lock that an update holds.
package store

import "net/netip"

// Provider is implemented by the k8scrd handler.
type Provider interface {
	Store() Reader
}

// Reader reads the current snapshot of the records.
type Reader interface {
	// Synced reports whether the first full sync from the source completed.
	Synced() bool
	// Host returns what the store declares at name: a lower-case, fully
	// qualified name. ok is false when no endpoint of any type exists there.
	Host(name string) (h *Host, ok bool)
	// Hosts calls fn for every name declared at or below zone (lower-case,
	// fully qualified) until fn returns false. It walks a snapshot: meant for
	// background loops, not the query path.
	Hosts(zone string, fn func(*Host) bool)
}

// Host is the merged view of every endpoint declared at one name.
type Host struct {
	// Name is lower-case and fully qualified.
	Name string
	// A and AAAA are the address targets, de-duplicated, in a deterministic
	// order. Both may be empty: a declaration with no targets is still a host.
	A    []netip.Addr
	AAAA []netip.Addr
	// AddressDeclared is true when an A or AAAA endpoint is declared at Name,
	// even one with no targets. A name with only other types (a CNAME, TXT)
	// is zone data, never a host whose addresses gslb assembles.
	AddressDeclared bool
	// TTL is the address RRsets' TTL (the smallest recordTTL among the
	// endpoints, RFC 2181 §5.2); TTLSet is false when no endpoint set one.
	TTL    uint32
	TTLSet bool
	// Properties are the endpoints' providerSpecific name/value pairs merged
	// (first object in store order wins for a duplicate name).
	Properties map[string]string
	// Labels are the endpoints' own labels merged the same way.
	Labels map[string]string
	// Verbatim is true when the data must be served as written and never
	// re-assembled by gslb: the object was written by the k8gb operator
	// (object label k8gb.io/dnstype or k8gb.absa.oss/dnstype).
	Verbatim bool
}

// Targets is implemented by the localtargets handler: this cluster's own
// healthy targets for a host, the same set that peers are told when they ask
// localtargets-<host>. gslb uses it, where localtargets is in the block, for
// this cluster's own contribution to an answer.
type Targets interface {
	// Healthy returns h's address targets minus those whose health checks
	// fail (all of them when no checks are configured).
	Healthy(h *Host) (a, aaaa []netip.Addr)
}
