// Package store is the contract between the plugins of a server block: the
// only place where k8scrd, localtargets and gslb meet. k8scrd holds the
// records and offers them as a Store; localtargets offers this cluster's
// healthy targets as Targets; gslb reads both. A consumer finds them in
// OnStartup, the way k8s_external finds kubernetes, through FromConfig and
// TargetsFromConfig, and never calls another plugin's handler.
//
// Everything a Store returns is immutable: callers may keep it and must not
// change it. Lookups take no lock that an update holds.
package store

import (
	"net/netip"

	"github.com/miekg/dns"
)

// DefaultPrefix is what a host's first label carries to ask a cluster for
// its own targets (k8gb's name for it).
const DefaultPrefix = "localtargets-"

// Provider is implemented by the plugin that holds the records (k8scrd).
type Provider interface {
	Store() Store
}

// Store reads the current snapshot of the records of every source (today
// DNSEndpoint objects; the cluster's other objects feed the same store).
type Store interface {
	// Synced reports whether the first full sync from the source completed.
	Synced() bool
	// Host returns what the store declares at name: a lower-case, fully
	// qualified name. ok is false when no endpoint of any type exists there.
	Host(name string) (h *Host, ok bool)
	// Hosts calls fn for every name declared at or below zone (lower-case,
	// fully qualified) until fn returns false. It walks a snapshot: meant for
	// background work after a change, not the query path.
	Hosts(zone string, fn func(*Host) bool)
	// NegativeSOA returns the SOA record for the authority section of a
	// negative answer at name (NXDOMAIN or NODATA): the SOA of the store's
	// zone that holds name, with TTL min(SOA TTL, MINIMUM) (RFC 2308 §3).
	// It is nil when no zone of the store holds name. Shared: do not change it.
	NegativeSOA(name string) *dns.SOA
	// Subscribe returns a channel that receives after every change the store
	// publishes (and at the first sync). Sends never block: a receiver that
	// is busy gets one pending signal for all the changes it missed, and
	// reads the store again. cancel ends the subscription.
	Subscribe() (changed <-chan struct{}, cancel func())
}

// Host is the merged view of every endpoint declared at one name.
type Host struct {
	// Name is lower-case and fully qualified.
	Name string
	// A and AAAA are the address targets, de-duplicated, in a deterministic
	// order: all of them, as the zone answers them, ready or not (see
	// Ready). Both may be empty: a declaration with no targets is still a host.
	A    []netip.Addr
	AAAA []netip.Addr
	// AddressDeclared is true when an A or AAAA endpoint is declared at Name,
	// even one with no targets. A name with only other types (a CNAME, TXT)
	// is zone data, never a host whose addresses gslb assembles.
	AddressDeclared bool
	// TTL is the address RRsets' TTL: the smallest recordTTL among the
	// endpoints (RFC 2181 §5.2), else the store's default. TTLSet is true
	// when an endpoint set one.
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
	// OtherTypes is true when the store also holds records of types other
	// than A and AAAA at Name (TXT, MX, SRV, CAA, NS...). A CNAME may not
	// stand beside other data (RFC 1034 §3.6.2): gslb does not answer its
	// all-down CNAME at such a host.
	OtherTypes bool
	// Owner is the namespace of the object that owns Name: under strict
	// tenancy the owning namespace, else that of the first object in store
	// order. Consumers share per-tenant budgets by it (localtargets fills
	// its health check caps round robin across owners). "" when unknown.
	Owner string
	// Withdrawn is nil when no target is withdrawn, as for every host that
	// only DNSEndpoints declare. Otherwise source health (the EndpointSlices
	// behind an Ingress, a Service or a route) withdraws some of A and AAAA,
	// and it holds the targets that remain: read them with Ready.
	Withdrawn *Withdrawn
}

// Withdrawn is what remains of a host's targets when source health
// withdraws some: an address stays while at least one ready source object
// contributes it, and is withdrawn when only unready ones do. The zone's own
// answers keep every target; localtargets- and gslb answers carry these.
type Withdrawn struct {
	// Ready are the targets of Host.A and Host.AAAA that are not withdrawn,
	// in the same order (each a subset; both may be empty).
	ReadyA    []netip.Addr
	ReadyAAAA []netip.Addr
}

// Ready returns h's address targets that source health does not withdraw:
// h.A and h.AAAA themselves (no allocation, the same slices) when nothing
// is withdrawn. Like h, the slices are shared: do not change them.
func (h *Host) Ready() (a, aaaa []netip.Addr) {
	if h.Withdrawn == nil {
		return h.A, h.AAAA
	}
	return h.Withdrawn.ReadyA, h.Withdrawn.ReadyAAAA
}

// Targets is implemented by the localtargets handler: this cluster's own
// healthy targets for a host, the same set that peers are told when they ask
// localtargets-<host>. gslb uses it, where localtargets is in the block, for
// this cluster's own contribution to an answer.
type Targets interface {
	// Healthy returns h's ready address targets (Host.Ready) minus those
	// whose health checks fail: both must pass. Without checks configured it
	// is Host.Ready.
	Healthy(h *Host) (a, aaaa []netip.Addr)
	// Prefix is what peers put before a host's first label to ask for this
	// cluster's targets; gslb asks its peers with the same.
	Prefix() string
	// Subscribe returns a channel that receives after every change of what
	// Healthy returns that the store's own Subscribe does not signal: a
	// health verdict that changed. Sends never block, as for
	// Store.Subscribe; cancel ends the subscription.
	Subscribe() (changed <-chan struct{}, cancel func())
}

// Fleet is implemented by gslb when its peers follow each other's views:
// which queries are fleet traffic (signed with a fleet key; without a key,
// from a known peer's address), that rate limiting must never drop. rrl finds it with
// FleetFromConfig.
type Fleet interface {
	FleetTraffic(w dns.ResponseWriter, r *dns.Msg) bool
}
