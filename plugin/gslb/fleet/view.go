package fleet

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"net/netip"
	"slices"
	"sort"
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

func (l Limits) withDefaults() Limits {
	if l.MaxHosts <= 0 {
		l.MaxHosts = DefaultLimits.MaxHosts
	}
	if l.MaxRecords <= 0 {
		l.MaxRecords = DefaultLimits.MaxRecords
	}
	if l.MaxOctets <= 0 {
		l.MaxOctets = DefaultLimits.MaxOctets
	}
	return l
}

// Name returns the name of the zone of the view of zone: _fleet.<zone>,
// fully qualified and lower case.
func Name(zone string) string { return "_fleet." + dns.CanonicalName(zone) }

// maxPolicyOctets caps a host's TXT, so that a host's records always fit in
// one message of a transfer.
const maxPolicyOctets = 4096

// The view zone's fixed values.
const (
	apexTTL    = 5     // of the SOA and NS: a secondary's view of the serial is fresh
	soaRefresh = 30    // a stock secondary polls the SOA this often (NOTIFY makes it sooner)
	soaRetry   = 10    // and retries this often when the poll fails
	soaExpire  = 86400 // a stock secondary serves the last view this long without the primary
	soaMinTTL  = 5     // negative caching (RFC 2308)
)

// names are the names of the view zone of one gslb zone.
type names struct {
	zone  string // example.org.
	apex  string // _fleet.example.org.
	hosts string // h._fleet.example.org.
	long  string // l._fleet.example.org.
}

func newNames(zone string) names {
	zone = dns.CanonicalName(zone)
	apex := Name(zone)
	return names{zone: zone, apex: apex, hosts: "h." + apex, long: "l." + apex}
}

// owner returns the owner name of host's records (see the package doc) and
// whether it is a hashed one under l._fleet.<zone>.
func (n names) owner(host string) (string, bool) {
	o := n.hosts
	if host != n.zone {
		o = strings.TrimSuffix(host, n.zone) + n.hosts
	}
	if _, ok := dns.IsDomainName(o); ok {
		return o, false
	}
	return hashLabel(host) + "." + n.long, true
}

var b32 = base32.HexEncoding.WithPadding(base32.NoPadding)

// hashLabel is the label of a long host name: 128 bits of its SHA-256.
func hashLabel(host string) string {
	sum := sha256.Sum256([]byte(host))
	return strings.ToLower(b32.EncodeToString(sum[:16]))
}

func (n names) soa(serial uint32) *dns.SOA {
	return &dns.SOA{
		Hdr:     dns.RR_Header{Name: n.apex, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: apexTTL},
		Ns:      n.zone,
		Mbox:    "hostmaster." + n.apex,
		Serial:  serial,
		Refresh: soaRefresh,
		Retry:   soaRetry,
		Expire:  soaExpire,
		Minttl:  soaMinTTL,
	}
}

func (n names) ns() *dns.NS {
	return &dns.NS{Hdr: dns.RR_Header{Name: n.apex, Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: apexTTL}, Ns: n.zone}
}

// encodeHost appends the records of h (normalized) to rrs.
func (n names) encodeHost(rrs []dns.RR, h *Host) []dns.RR {
	owner, long := n.owner(h.Name)
	hdr := func(t uint16) dns.RR_Header {
		return dns.RR_Header{Name: owner, Rrtype: t, Class: dns.ClassINET, Ttl: h.TTL}
	}
	if long {
		rrs = append(rrs, &dns.PTR{Hdr: hdr(dns.TypePTR), Ptr: h.Name})
	}
	rrs = append(rrs, &dns.TXT{Hdr: hdr(dns.TypeTXT), Txt: policyStrings(h.Policy)})
	for _, a := range h.A {
		rrs = append(rrs, &dns.A{Hdr: hdr(dns.TypeA), A: a.AsSlice()})
	}
	for _, a := range h.AAAA {
		rrs = append(rrs, &dns.AAAA{Hdr: hdr(dns.TypeAAAA), AAAA: a.AsSlice()})
	}
	return rrs
}

func hostRecords(h *Host, long bool) int {
	n := 1 + len(h.A) + len(h.AAAA)
	if long {
		n++
	}
	return n
}

// policyStrings is the TXT of a policy: "key=value" sorted, or one empty
// string for none (a TXT has at least one character-string).
func policyStrings(p map[string]string) []string {
	if len(p) == 0 {
		return []string{""}
	}
	s := make([]string, 0, len(p))
	for k, v := range p {
		s = append(s, k+"="+v)
	}
	sort.Strings(s)
	return s
}

// normalizeHost returns h in the view's canonical form (name fully
// qualified and lower case, addresses by family, sorted, unique; the policy
// copied) or why it cannot be in the view of zone n.
func (n names) normalizeHost(h Host) (Host, error) {
	name := dns.CanonicalName(h.Name)
	if _, ok := dns.IsDomainName(name); !ok || h.Name == "" {
		return Host{}, fmt.Errorf("host %q: not a domain name", h.Name)
	}
	if !inZone(name, n.zone) {
		return Host{}, fmt.Errorf("host %q: not in zone %s", h.Name, n.zone)
	}
	if inZone(name, n.apex) {
		return Host{}, fmt.Errorf("host %q: inside the view's own name %s", h.Name, n.apex)
	}
	out := Host{Name: name, TTL: h.TTL}
	for _, a := range slices.Concat(h.A, h.AAAA) {
		a = a.Unmap()
		switch {
		case !a.IsValid():
		case a.Is4():
			out.A = append(out.A, a)
		default:
			out.AAAA = append(out.AAAA, a.WithZone(""))
		}
	}
	out.A = sortAddrs(out.A)
	out.AAAA = sortAddrs(out.AAAA)
	if len(h.Policy) > 0 {
		out.Policy = make(map[string]string, len(h.Policy))
		size := 0
		for k, v := range h.Policy {
			if k == "" || strings.Contains(k, "=") || len(k)+1+len(v) > 255 {
				return Host{}, fmt.Errorf("host %q: policy property %.40q cannot be encoded", h.Name, k)
			}
			size += len(k) + 2 + len(v)
			out.Policy[k] = v
		}
		if size > maxPolicyOctets {
			return Host{}, fmt.Errorf("host %q: policy of %d octets, over %d", h.Name, size, maxPolicyOctets)
		}
	}
	return out, nil
}

func sortAddrs(a []netip.Addr) []netip.Addr {
	slices.SortFunc(a, func(x, y netip.Addr) int { return x.Compare(y) })
	return slices.Compact(a)
}

// hostEqual reports whether two normalized hosts encode the same records.
func hostEqual(a, b *Host) bool {
	if a.Name != b.Name || a.TTL != b.TTL || !slices.Equal(a.A, b.A) || !slices.Equal(a.AAAA, b.AAAA) || len(a.Policy) != len(b.Policy) {
		return false
	}
	for k, v := range a.Policy {
		if w, ok := b.Policy[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func hostsEqual(a, b []Host) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !hostEqual(&a[i], &b[i]) {
			return false
		}
	}
	return true
}

// hostOf returns the host whose records are at owner, for owners under
// h._fleet.<zone>; for owners one label under l._fleet.<zone> it returns
// long (the host is in the PTR). ok is false for any other owner.
func (n names) hostOf(owner string) (host string, long, ok bool) {
	switch {
	case owner == n.hosts:
		return n.zone, false, true
	case strings.HasSuffix(owner, "."+n.hosts):
		return strings.TrimSuffix(owner, n.hosts) + n.zone, false, true
	case strings.HasSuffix(owner, "."+n.long) && dns.CountLabel(owner) == dns.CountLabel(n.long)+1:
		return "", true, true
	}
	return "", false, false
}

// decodeHost reads the host whose records (all of one owner) are rrs.
func (n names) decodeHost(owner string, rrs []dns.RR) (Host, error) {
	name, long, ok := n.hostOf(owner)
	if !ok {
		return Host{}, fmt.Errorf("records at %s: not a host's name", owner)
	}
	var h Host
	var txt *dns.TXT
	for _, rr := range rrs {
		switch rr := rr.(type) {
		case *dns.A:
			a, ok := netip.AddrFromSlice(rr.A)
			if !ok || !a.Unmap().Is4() {
				return Host{}, fmt.Errorf("%s: malformed A", owner)
			}
			h.A = append(h.A, a.Unmap())
		case *dns.AAAA:
			a, ok := netip.AddrFromSlice(rr.AAAA)
			if !ok || a.Is4() {
				return Host{}, fmt.Errorf("%s: malformed AAAA", owner)
			}
			h.AAAA = append(h.AAAA, a)
		case *dns.TXT:
			if txt != nil {
				return Host{}, fmt.Errorf("%s: more than one TXT", owner)
			}
			txt = rr
		case *dns.PTR:
			if !long || name != "" {
				return Host{}, fmt.Errorf("%s: unexpected PTR", owner)
			}
			name = dns.CanonicalName(rr.Ptr)
		}
	}
	if txt == nil {
		return Host{}, fmt.Errorf("%s: no TXT", owner)
	}
	if long {
		if name == "" {
			return Host{}, fmt.Errorf("%s: no PTR", owner)
		}
		if !strings.HasPrefix(owner, hashLabel(name)+".") {
			return Host{}, fmt.Errorf("%s: PTR %s does not match its hash", owner, name)
		}
	}
	h.Name = name
	h.TTL = txt.Hdr.Ttl
	for _, s := range txt.Txt {
		if s == "" && len(txt.Txt) == 1 {
			break
		}
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return Host{}, fmt.Errorf("%s: malformed policy %.40q", owner, s)
		}
		if h.Policy == nil {
			h.Policy = map[string]string{}
		}
		if _, dup := h.Policy[k]; dup {
			return Host{}, fmt.Errorf("%s: policy %.40q twice", owner, k)
		}
		h.Policy[k] = v
	}
	norm, err := n.normalizeHost(h)
	if err != nil {
		return Host{}, fmt.Errorf("%s: %v", owner, err)
	}
	if o, _ := n.owner(norm.Name); o != owner {
		return Host{}, fmt.Errorf("%s: host %s belongs at %s", owner, norm.Name, o)
	}
	return norm, nil
}

// inZone reports whether name is zone or below it; both canonical (fully
// qualified, lower case), as dns.IsSubDomain without its allocations.
func inZone(name, zone string) bool {
	if strings.IndexByte(name, '\\') >= 0 { // an escaped dot is no label boundary
		return dns.IsSubDomain(zone, name)
	}
	return zone == "." || name == zone || (strings.HasSuffix(name, zone) && name[len(name)-len(zone)-1] == '.')
}
