package object

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coredns/coredns/plugin"
	"github.com/fleetdns/fleetdns/internal/dnsutil"
	"github.com/miekg/dns"
	"sigs.k8s.io/external-dns/endpoint"
)

// Reasons an endpoint is skipped; the values label coredns_k8scrd_invalid_endpoints_total.
const (
	ReasonName    = "name"    // not a valid domain name
	ReasonZone    = "zone"    // outside every zone of this plugin
	ReasonType    = "type"    // a record type this plugin does not serve
	ReasonTarget  = "target"  // a target that does not parse for its type
	ReasonTTL     = "ttl"     // a negative or too large recordTTL
	ReasonDecode  = "decode"  // a manifest or object that is not a DNSEndpoint
	ReasonCNAMEs  = "cname"   // a CNAME endpoint with more than one target
	ReasonSize    = "size"    // an RRset that fits in no DNS message (see builder.Builder.oversized)
	ReasonSource  = "source"  // what of an Ingress, Service or route cannot be served (an address that does not parse)
	MaxTTL        = 1<<31 - 1 // RFC 2181 §8
	verbatimLabel = "k8gb.io/dnstype"
	legacyLabel   = "k8gb.absa.oss/dnstype"
)

// Endpoint is one valid endpoint, converted: what it contributes at one
// name, with the TTL the endpoint asks for. Address targets stay addresses:
// their records are built once, in the snapshot node that serves them.
type Endpoint struct {
	Name   string
	Type   uint16
	TTLSet bool
	TTL    uint32
	Addrs  []netip.Addr   // A and AAAA targets, sorted, without duplicates
	RRs    []dns.RR       // the other types' records, at the endpoint's TTL (the merged RRset may lower it)
	Extra  *EndpointExtra // nil for most endpoints
}

// EndpointExtra is what few endpoints carry: kept apart so that the others
// do not pay for it.
type EndpointExtra struct {
	Props  endpoint.ProviderSpecific
	Labels endpoint.Labels
	// Unready: health from EndpointSlices withdraws these targets from
	// localtargets- and gslb answers; the zone's own answers keep them.
	Unready bool
}

// Object is one DNSEndpoint, validated and grouped by name. Immutable once built.
type Object struct {
	Key       string // unique per source: "ns/name" for the API, "file:PATH#ns/name" for directory; sourceKey for derived kinds
	Kind      string // "" for a DNSEndpoint, else the kind it was derived from (for Events)
	Namespace string
	Name      string
	UID       string    // the API object's, for Events; "" from the directory
	Created   time.Time // creationTimestamp: the tenancy order
	Changed   time.Time // when the object last changed, for the propagation delay metric
	// Version orders the object's writes for the SOA serial: the API's
	// resourceVersion (an etcd revision), or the file time from a directory.
	Version  uint64
	Verbatim bool
	// SOA is an SOA endpoint given at a zone apex (the directory's data
	// only): its serial is the zone's, as a zone file's is.
	SOA *dns.SOA
	// eps are the valid endpoints in one allocation, sorted by name (in the
	// object's order within a name), their addresses in another: two heap
	// objects per object rather than a few per endpoint.
	Endpoints []Endpoint
}

// At returns the endpoints of o at name, in the object's order.
func (o *Object) At(name string) []Endpoint {
	i, ok := slices.BinarySearchFunc(o.Endpoints, name, func(e Endpoint, name string) int { return strings.Compare(e.Name, name) })
	if !ok {
		return nil
	}
	j := i + 1
	for j < len(o.Endpoints) && o.Endpoints[j].Name == name {
		j++
	}
	return o.Endpoints[i:j]
}

// Names yields every name o declares, once each (range over it).
func (o *Object) Names(yield func(name string) bool) {
	for i := range o.Endpoints {
		if i == 0 || o.Endpoints[i].Name != o.Endpoints[i-1].Name {
			if !yield(o.Endpoints[i].Name) {
				return
			}
		}
	}
}

// Invalid describes one skipped endpoint.
type Invalid struct {
	Reason string
	Msg    string
}

// Meta is what newObject needs to know about an object besides its endpoints.
type Meta struct {
	Key, Namespace, Name, UID string
	Created, Changed          time.Time
	Labels                    map[string]string
	Version                   uint64 // see object.version
	SOA                       bool   // an SOA endpoint at a zone apex is the zone's SOA serial (directory)
}

// New validates and converts the endpoints of one object. Endpoints that
// cannot be served are returned in bad and left out; the rest is served.
func New(m Meta, eps []*endpoint.Endpoint, zones []string, defaultTTL uint32) (o *Object, bad []Invalid) {
	o = &Object{
		Key: m.Key, Namespace: m.Namespace, Name: m.Name, UID: m.UID,
		Created: m.Created, Changed: m.Changed, Version: m.Version,
	}
	if m.Labels != nil {
		_, v1 := m.Labels[verbatimLabel]
		_, v2 := m.Labels[legacyLabel]
		o.Verbatim = v1 || v2
	}
	n, targets := 0, 0
	for _, ep := range eps {
		if ep != nil {
			n++
			if t := strings.ToUpper(ep.RecordType); t == "A" || t == "AAAA" {
				targets += len(ep.Targets)
			}
		}
	}
	// Sized up front: the appends below never move what they hold.
	o.Endpoints = make([]Endpoint, 0, n)
	addrs := make([]netip.Addr, 0, targets)
	for i, ep := range eps {
		if ep == nil {
			continue
		}
		var e Endpoint
		var reason string
		var err error
		if m.SOA && strings.EqualFold(ep.RecordType, "SOA") {
			if err = o.setSOA(ep, zones); err != nil {
				bad = append(bad, Invalid{Reason: ReasonTarget, Msg: fmt.Sprintf("endpoint %d (%s SOA): %v", i, ep.DNSName, err)})
			}
			continue
		}
		addrs, reason, err = e.convert(ep, zones, defaultTTL, addrs)
		if err != nil {
			bad = append(bad, Invalid{Reason: reason, Msg: fmt.Sprintf("endpoint %d (%s %s): %v", i, ep.DNSName, ep.RecordType, err)})
			continue
		}
		o.Endpoints = append(o.Endpoints, e)
	}
	slices.SortStableFunc(o.Endpoints, func(x, y Endpoint) int { return strings.Compare(x.Name, y.Name) })
	o.Endpoints = slices.Clip(o.Endpoints)
	return o, bad
}

// setSOA takes the SOA endpoint ep (a directory's data): at a zone apex,
// one target in the SOA's presentation form (MNAME RNAME SERIAL REFRESH
// RETRY EXPIRE MINIMUM). Only its serial is used; the other fields are the
// Corefile's (soa, negttl).
func (o *Object) setSOA(ep *endpoint.Endpoint, zones []string) error {
	name := strings.ToLower(dns.Fqdn(ep.DNSName))
	if !slices.Contains(zones, name) {
		return fmt.Errorf("an SOA is only taken at a zone apex (%s)", strings.Join(zones, " "))
	}
	if len(ep.Targets) != 1 {
		return fmt.Errorf("an SOA has one target, not %d", len(ep.Targets))
	}
	rr, err := dns.NewRR(name + " IN SOA " + ep.Targets[0])
	if err != nil || rr == nil {
		return fmt.Errorf("SOA target %q does not parse", ep.Targets[0])
	}
	if o.SOA != nil && o.SOA.Hdr.Name != name {
		return fmt.Errorf("a second SOA in one object")
	}
	o.SOA = rr.(*dns.SOA)
	return nil
}

// convert turns one external-dns endpoint into an rrEndpoint, on its own:
// the tests' view of newObject.
func convert(ep *endpoint.Endpoint, zones []string, defaultTTL uint32) (string, *Endpoint, string, error) {
	e := &Endpoint{}
	if _, reason, err := e.convert(ep, zones, defaultTTL, nil); err != nil {
		return "", nil, reason, err
	}
	return e.Name, e, "", nil
}

// convert fills e from ep, in external-dns's target formats ("10
// mail.example.org" for MX, "prio weight port target" for SRV). Address
// targets are appended to addrs, which is returned.
func (e *Endpoint) convert(ep *endpoint.Endpoint, zones []string, defaultTTL uint32, addrs []netip.Addr) ([]netip.Addr, string, error) {
	name := strings.ToLower(dns.Fqdn(strings.TrimSpace(ep.DNSName)))
	if _, ok := dns.IsDomainName(name); !ok || name == "." || strings.Contains(name, " ") {
		return addrs, ReasonName, fmt.Errorf("invalid name %q", ep.DNSName)
	}
	if plugin.Zones(zones).Matches(name) == "" {
		return addrs, ReasonZone, fmt.Errorf("name %q is outside zones %v", name, zones)
	}
	rtype, ok := servedTypes[strings.ToUpper(ep.RecordType)]
	if !ok {
		return addrs, ReasonType, fmt.Errorf("record type %q is not served", ep.RecordType)
	}
	*e = Endpoint{Name: name, Type: rtype, TTL: defaultTTL}
	if len(ep.ProviderSpecific) > 0 || len(ep.Labels) > 0 { // not an empty map kept alive per endpoint
		e.Extra = &EndpointExtra{}
		if len(ep.ProviderSpecific) > 0 {
			e.Extra.Props = ep.ProviderSpecific
		}
		if len(ep.Labels) > 0 {
			e.Extra.Labels = ep.Labels
		}
	}
	if ep.RecordTTL.IsConfigured() {
		if ep.RecordTTL < 0 || ep.RecordTTL > MaxTTL {
			return addrs, ReasonTTL, fmt.Errorf("recordTTL %d out of range", ep.RecordTTL)
		}
		e.TTL, e.TTLSet = uint32(ep.RecordTTL), true
	}
	if rtype == dns.TypeCNAME && len(ep.Targets) > 1 {
		return addrs, ReasonCNAMEs, fmt.Errorf("a CNAME has one target, not %d", len(ep.Targets))
	}
	hdr := dns.RR_Header{Name: name, Rrtype: rtype, Class: dns.ClassINET, Ttl: e.TTL}
	start := len(addrs)
	for _, t := range ep.Targets {
		rr, a, err := target(hdr, t)
		if err != nil {
			return addrs[:start], ReasonTarget, err
		}
		if rr == nil {
			addrs = append(addrs, a)
		} else {
			e.RRs = append(e.RRs, rr)
		}
	}
	if len(addrs) > start {
		own := addrs[start:]
		slices.SortFunc(own, netip.Addr.Compare)
		own = slices.Compact(own)
		addrs = addrs[:start+len(own)]
		e.Addrs = addrs[start:len(addrs):len(addrs)]
	}
	return addrs, "", nil
}

var servedTypes = map[string]uint16{
	"A": dns.TypeA, "AAAA": dns.TypeAAAA, "CNAME": dns.TypeCNAME, "TXT": dns.TypeTXT,
	"SRV": dns.TypeSRV, "MX": dns.TypeMX, "NS": dns.TypeNS, "PTR": dns.TypePTR,
	"CAA": dns.TypeCAA, "NAPTR": dns.TypeNAPTR,
}

// target converts one target of an endpoint: an address for A and AAAA
// (rr nil), else the record.
func target(hdr dns.RR_Header, t string) (dns.RR, netip.Addr, error) {
	if hdr.Rrtype == dns.TypeTXT {
		// Every byte of a TXT target is data: no trimming.
		return &dns.TXT{Hdr: hdr, Txt: txtStrings(t)}, netip.Addr{}, nil
	}
	t = strings.TrimSpace(t)
	switch hdr.Rrtype {
	case dns.TypeA, dns.TypeAAAA:
		a, err := netip.ParseAddr(t)
		if err != nil || a.Zone() != "" {
			return nil, netip.Addr{}, fmt.Errorf("invalid address %q", t)
		}
		if hdr.Rrtype == dns.TypeA {
			if !a.Is4() && !a.Is4In6() {
				return nil, netip.Addr{}, fmt.Errorf("%q is not an IPv4 address", t)
			}
			return nil, a.Unmap(), nil
		}
		if !a.Is6() || a.Is4In6() {
			return nil, netip.Addr{}, fmt.Errorf("%q is not an IPv6 address", t)
		}
		return nil, a, nil
	case dns.TypeCNAME, dns.TypeNS, dns.TypePTR:
		host, err := hostname(t)
		if err != nil {
			return nil, netip.Addr{}, err
		}
		switch hdr.Rrtype {
		case dns.TypeCNAME:
			return &dns.CNAME{Hdr: hdr, Target: host}, netip.Addr{}, nil
		case dns.TypeNS:
			return &dns.NS{Hdr: hdr, Ns: host}, netip.Addr{}, nil
		}
		return &dns.PTR{Hdr: hdr, Ptr: host}, netip.Addr{}, nil
	case dns.TypeMX:
		f := strings.Fields(t)
		if len(f) != 2 {
			return nil, netip.Addr{}, fmt.Errorf("MX target %q is not \"PREFERENCE HOST\"", t)
		}
		pref, err := strconv.ParseUint(f[0], 10, 16)
		if err != nil {
			return nil, netip.Addr{}, fmt.Errorf("MX preference %q: not a 16-bit number", f[0])
		}
		host, err := hostname(f[1])
		if err != nil {
			return nil, netip.Addr{}, err
		}
		return &dns.MX{Hdr: hdr, Preference: uint16(pref), Mx: host}, netip.Addr{}, nil
	case dns.TypeSRV:
		f := strings.Fields(t)
		if len(f) != 4 {
			return nil, netip.Addr{}, fmt.Errorf("SRV target %q is not \"PRIORITY WEIGHT PORT TARGET\"", t)
		}
		var n [3]uint16
		for i := range 3 {
			v, err := strconv.ParseUint(f[i], 10, 16)
			if err != nil {
				return nil, netip.Addr{}, fmt.Errorf("SRV target %q: %q is not a 16-bit number", t, f[i])
			}
			n[i] = uint16(v)
		}
		host, err := hostname(f[3])
		if err != nil {
			return nil, netip.Addr{}, err
		}
		return &dns.SRV{Hdr: hdr, Priority: n[0], Weight: n[1], Port: n[2], Target: host}, netip.Addr{}, nil
	}
	// CAA and NAPTR: external-dns targets are the presentation format of the RDATA.
	rr, err := dns.NewRR(hdr.Name + " " + strconv.FormatUint(uint64(hdr.Ttl), 10) + " IN " + dns.TypeToString[hdr.Rrtype] + " " + t)
	if err != nil || rr == nil {
		return nil, netip.Addr{}, fmt.Errorf("%s target %q does not parse", dns.TypeToString[hdr.Rrtype], t)
	}
	if x, ok := rr.(*dns.NAPTR); ok {
		x.Replacement = strings.ToLower(x.Replacement)
	}
	return rr, netip.Addr{}, nil
}

// hostname validates a host name target and makes it fully qualified and lower case.
func hostname(t string) (string, error) {
	h := strings.ToLower(dns.Fqdn(t))
	if _, ok := dns.IsDomainName(h); !ok || strings.ContainsAny(h, " \t\"") || h == "." && t != "." {
		return "", fmt.Errorf("invalid host name %q", t)
	}
	return h, nil
}

// txtStrings splits a TXT target into character-strings of at most 255 octets
// (RFC 1035 §3.3.14). A target quoted as a whole, as external-dns's TXT
// registry writes them, is unquoted first. The text is taken as it is: a
// backslash is a backslash (miekg/dns reads TXT strings as escaped text).
func txtStrings(t string) []string {
	if len(t) >= 2 && t[0] == '"' && t[len(t)-1] == '"' && !strings.Contains(t[1:len(t)-1], `"`) {
		t = t[1 : len(t)-1]
	}
	return dnsutil.TXTStrings(t)
}

// Rdata is the presentation form of rr's RDATA: the key for de-duplication and ordering.
func Rdata(rr dns.RR) string {
	s := rr.String()
	h := rr.Header().String()
	return strings.TrimPrefix(s, h)
}
