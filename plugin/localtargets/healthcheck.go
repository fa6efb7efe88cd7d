package localtargets

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fleetdns/fleetdns/internal/store"
)

// healthCheck is the healthcheck stanza: the check of every host that sets
// none of its own, and the bounds of the checker.
type healthCheck struct {
	def      probeSpec // the stanza's check; its addr is unset
	none     bool      // `healthcheck none`: only hosts with health/check are checked
	interval time.Duration
	timeout  time.Duration
	fails    int // consecutive failures that make a healthy target unhealthy
	passes   int // consecutive passes that make an unhealthy target healthy

	workers    int // checks in flight at most
	maxPerHost int // targets of one host and family checked at most
	maxPerZone int // distinct checks of one zone at most
	// allow opens refused addresses; deny refuses addresses whatever
	// allow says (the cluster's service and pod ranges, which no address
	// class can know).
	allow []netip.Prefix
	deny  []netip.Prefix
	// tenantAddress and tenantBody are whether hosts may set health/address
	// and a health/expect body substring (`tenant_address off`,
	// `tenant_body off`).
	tenantAddress bool
	tenantBody    bool
}

func newHealthCheck() healthCheck {
	return healthCheck{
		def:      probeSpec{expectLo: 200, expectHi: 399},
		interval: 5 * time.Second, timeout: time.Second, fails: 3, passes: 2,
		workers: 8, maxPerHost: 16, maxPerZone: 1024,
		tenantAddress: true, tenantBody: true,
	}
}

// probeSpec is what is checked, and the key of a verdict: two targets (of
// one host or of several, of one object or of several) with the same spec
// share one check and one verdict, and a target that moves from one object
// to another keeps its verdict.
type probeSpec struct {
	addr     netip.Addr // the address checked
	proto    string     // tcp, http or https
	port     uint16
	path     string
	host     string // Host header and TLS server name for http(s)
	expectLo int    // status range for http(s)
	expectHi int
	body     string // substring the body must hold, for http(s)
	// tenant is true for a check that a host's health/* properties set:
	// its address may not be private (see refusal).
	tenant bool
}

func (p probeSpec) String() string {
	hp := net.JoinHostPort(p.addr.String(), strconv.Itoa(int(p.port)))
	if p.proto == "tcp" {
		return "tcp " + hp
	}
	s := p.proto + "://" + hp + p.path
	if p.host != "" {
		s += " (Host " + p.host + ")"
	}
	return s
}

// Classes of addresses that are not checked, the label of refused_targets.
// The set is fixed: the label never carries tenant input.
const (
	classLoopback      = "loopback"       // 127.0.0.0/8, ::1: the DNS pod itself
	classUnspecified   = "unspecified"    // 0.0.0.0/8, ::: the pod's own loopback too
	classLinkLocal     = "link_local"     // 169.254.0.0/16, fe80::/10: the node's link
	classMulticast     = "multicast"      // 224.0.0.0/3 (multicast, reserved, broadcast), ff00::/8
	classMetadata      = "metadata"       // the cloud providers' metadata services
	classPrivate       = "private"        // RFC 1918, 100.64.0.0/10, fc00::/7: refused for tenant-set checks
	classDenied        = "denied"         // a deny CIDR of the block
	classTenantAddress = "tenant_address" // health/address where `tenant_address off`
	classTenantBody    = "tenant_body"    // a health/expect body where `tenant_body off`
)

// refusalClasses are the classes in the order the README lists them.
var refusalClasses = []string{classLoopback, classUnspecified, classLinkLocal, classMulticast, classMetadata, classPrivate, classDenied, classTenantAddress, classTenantBody}

// hostClasses are refused for every check: a check would reach the DNS pod
// itself, its node or its link, which no target may be a way into.
var hostClasses = []struct {
	class  string
	prefix netip.Prefix
}{
	{classUnspecified, netip.MustParsePrefix("0.0.0.0/8")},
	{classLoopback, netip.MustParsePrefix("127.0.0.0/8")},
	{classLinkLocal, netip.MustParsePrefix("169.254.0.0/16")},
	{classMulticast, netip.MustParsePrefix("224.0.0.0/3")},
	{classUnspecified, netip.MustParsePrefix("::/128")},
	{classLoopback, netip.MustParsePrefix("::1/128")},
	{classLinkLocal, netip.MustParsePrefix("fe80::/10")},
	{classMulticast, netip.MustParsePrefix("ff00::/8")},
}

// metadataAddrs are the cloud providers' instance metadata (and wire)
// services. They are refused for every check, and `allow` opens one only
// by naming the address itself: a CIDR that allows a private range does
// not open the metadata service inside it.
var metadataAddrs = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"), // AWS, GCP, Azure, OpenStack, Oracle
	netip.MustParseAddr("169.254.170.2"),   // AWS ECS task metadata
	netip.MustParseAddr("100.100.100.200"), // Alibaba Cloud
	netip.MustParseAddr("168.63.129.16"),   // Azure wire server
	netip.MustParseAddr("192.0.0.192"),     // Oracle Cloud (classic)
	netip.MustParseAddr("fd00:ec2::254"),   // AWS over IPv6
	netip.MustParseAddr("fd00:ec2::23"),    // AWS over IPv6 (DNS, time)
	netip.MustParseAddr("fd20:ce::254"),    // GCP over IPv6
}

// privatePrefixes are refused for tenant-set checks (health/* properties),
// as Route 53 refuses health checks of private addresses: they reach the
// cluster's own networks (services, pods, nodes), and a tenant's port, path
// and body substring would make the published verdict a port scanner and a
// read oracle of them.
var privatePrefixes = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("100.64.0.0/10"),  // RFC 6598 shared address space
	netip.MustParsePrefix("fc00::/7"),       // unique local
	netip.MustParsePrefix("fec0::/10"),      // site-local (deprecated)
	netip.MustParsePrefix("64:ff9b:1::/48"), // RFC 8215 local-use NAT64
}

// embeddedV4 returns the IPv4 address that an IPv6 address carries to
// an IPv4 host: the well-known NAT64 prefix 64:ff9b::/96 (RFC 6052), the
// IPv4-compatible ::/96, and 6to4 2002::/16 (RFC 3056). A check of
// 64:ff9b::a63:1 reaches 10.99.0.1 through the NAT64 gateway, and is
// refused as 10.99.0.1 is. (IPv4-mapped addresses are unmapped before.)
func embeddedV4(a netip.Addr) (netip.Addr, bool) {
	if !a.Is6() {
		return netip.Addr{}, false
	}
	b := a.As16()
	switch {
	case b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && allZero(b[4:12]):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case allZero(b[0:12]) && !allZero(b[12:15]): // not :: and ::1
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case b[0] == 0x20 && b[1] == 0x02:
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// refusal returns the class of addr that refuses its check, or "" when it
// may be checked. A tenant-set check (tenant) is refused the private
// classes too. deny refuses whatever allow says; allow opens the other
// classes (a metadata address only by naming it).
func (hc *healthCheck) refusal(addr netip.Addr, tenant bool) string {
	addr = addr.Unmap().WithZone("")
	addrs := []netip.Addr{addr}
	if v4, ok := embeddedV4(addr); ok {
		addrs = append(addrs, v4)
	}
	for _, a := range addrs {
		for _, p := range hc.deny {
			if p.Contains(a) {
				return classDenied
			}
		}
	}
	for _, a := range addrs {
		if class := hc.classOf(a, tenant); class != "" {
			return class
		}
	}
	return ""
}

// classOf returns the class of a that is refused and not allowed.
func (hc *healthCheck) classOf(a netip.Addr, tenant bool) string {
	if slices.Contains(metadataAddrs, a) {
		for _, p := range hc.allow {
			if p.Contains(a) && p.Bits() == a.BitLen() {
				return ""
			}
		}
		return classMetadata
	}
	class := ""
	for _, c := range hostClasses {
		if c.prefix.Contains(a) {
			class = c.class
			break
		}
	}
	if class == "" && tenant {
		for _, p := range privatePrefixes {
			if p.Contains(a) {
				class = classPrivate
				break
			}
		}
	}
	if class == "" {
		return ""
	}
	for _, p := range hc.allow {
		if p.Contains(a) {
			return ""
		}
	}
	return class
}

// refusedBy returns the class that refuses p under hc, or "".
func (p probeSpec) refusedBy(hc *healthCheck) string { return hc.refusal(p.addr, p.tenant) }

// hostCheck is how one host's targets are checked: the stanza's check, or
// the host's health/* properties.
type hostCheck struct {
	none    bool      // not checked: every target is served
	invalid bool      // properties that do not parse: no target is served
	refused string    // a class that refuses the whole check: no target is served
	spec    probeSpec // addr set when health/address is
}

// The host properties that override the stanza.
const (
	propCheck   = "health/check"
	propExpect  = "health/expect"
	propAddress = "health/address"
)

// forHost returns h's check.
func (hc *healthCheck) forHost(h *store.Host) hostCheck {
	check, hasCheck := h.Properties[propCheck]
	expect, hasExpect := h.Properties[propExpect]
	address, hasAddress := h.Properties[propAddress]
	out := hostCheck{none: hc.none, spec: hc.def}
	if !hasCheck && !hasExpect && !hasAddress {
		return out
	}
	if hasCheck {
		if strings.TrimSpace(check) == "none" {
			return hostCheck{none: true}
		}
		spec, err := parseCheck(strings.Fields(check))
		if err != nil {
			return hostCheck{invalid: true}
		}
		spec.expectLo, spec.expectHi, spec.body = hc.def.expectLo, hc.def.expectHi, hc.def.body
		out = hostCheck{spec: spec}
	}
	if out.none {
		return out // expect or address without a check to apply them to
	}
	out.spec.tenant = true
	if hasExpect {
		lo, hi, body, err := parseExpect(expect)
		if err != nil {
			return hostCheck{invalid: true}
		}
		out.spec.expectLo, out.spec.expectHi, out.spec.body = lo, hi, body
		if body != "" && !hc.tenantBody {
			return hostCheck{refused: classTenantBody}
		}
	}
	if hasAddress {
		a, err := netip.ParseAddr(strings.TrimSpace(address))
		if err != nil {
			return hostCheck{invalid: true}
		}
		if !hc.tenantAddress {
			return hostCheck{refused: classTenantAddress}
		}
		out.spec.addr = a.Unmap()
	}
	return out
}

// parseCheck parses `tcp PORT`, `http PORT PATH [HOST]`, `https PORT PATH [HOST]`.
func parseCheck(args []string) (probeSpec, error) {
	if len(args) < 2 {
		return probeSpec{}, fmt.Errorf("want tcp PORT, http PORT PATH [HOST] or https PORT PATH [HOST]")
	}
	p := probeSpec{proto: args[0]}
	port, err := strconv.Atoi(args[1])
	if err != nil || port < 1 || port > 65535 {
		return p, fmt.Errorf("port %q: not a port number", args[1])
	}
	p.port = uint16(port)
	switch p.proto {
	case "tcp":
		if len(args) != 2 {
			return p, fmt.Errorf("tcp takes only a port, got %q", strings.Join(args[2:], " "))
		}
	case "http", "https":
		if len(args) < 3 || len(args) > 4 {
			return p, fmt.Errorf("%s needs PORT PATH [HOST]", p.proto)
		}
		if !strings.HasPrefix(args[2], "/") {
			return p, fmt.Errorf("path %q must start with /", args[2])
		}
		p.path = args[2]
		if len(args) == 4 {
			p.host = args[3]
		}
	default:
		return p, fmt.Errorf("%q: want tcp, http or https", p.proto)
	}
	return p, nil
}

// parseExpect parses `RANGE [SUBSTRING]`: a status (200) or a range
// (200-399), then optionally the rest of the value as a body substring.
func parseExpect(v string) (lo, hi int, body string, err error) {
	v = strings.TrimLeft(v, " \t")
	rng, body, _ := strings.Cut(v, " ")
	body = strings.TrimSpace(body)
	l, h, isRange := strings.Cut(rng, "-")
	if !isRange {
		h = l
	}
	lo, err1 := strconv.Atoi(l)
	hi, err2 := strconv.Atoi(h)
	if err1 != nil || err2 != nil || lo < 100 || hi > 599 || lo > hi {
		return 0, 0, "", fmt.Errorf("expect %q: want a status or a range such as 200-399, then an optional body substring", v)
	}
	return lo, hi, body, nil
}
