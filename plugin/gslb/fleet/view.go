package fleet

import (
	"net/netip"
	"strings"

	"github.com/miekg/dns"
)

// Host is one GSLB host as one cluster sees it.
type Host struct {
	Name string       // fully qualified, lower case, within the zone (or the zone itself)
	A    []netip.Addr // healthy IPv4 targets
	AAAA []netip.Addr // healthy IPv6 targets
	TTL  uint32       // of the host's records in the view
	// Policy is the host's gslb/* properties (strategy, primary, weight,
	// ttl, ...), key to value. A key is not empty and has no '='; a
	// "key=value" is at most 255 octets.
	Policy map[string]string
}

// View is one cluster's view: its hosts at one serial. Hosts are sorted by
// Name. A View is immutable once published or returned; do not modify it.
type View struct {
	Zone   string // the gslb zone (not _fleet.<zone>), fully qualified, lower case
	Serial uint32
	Hosts  []Host
}

// Limits caps a view. A zero field means the DefaultLimits value.
type Limits struct {
	MaxHosts   int // hosts in a view
	MaxRecords int // records in a view, SOA and NS included
	MaxOctets  int // octets of one transfer on the wire (the 2-octet length prefixes included)
}

// DefaultLimits are the caps used for a zero Limits field.
var DefaultLimits = Limits{MaxHosts: 50000, MaxRecords: 500000, MaxOctets: 64 << 20}

// Name returns the name of the zone of the view of zone: _fleet.<zone>,
// fully qualified and lower case.
func Name(zone string) string { return "_fleet." + dns.Fqdn(strings.ToLower(zone)) }
