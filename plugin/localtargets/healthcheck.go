package localtargets

import (
	"fmt"
	"net"
	"net/netip"
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
	allow      []netip.Prefix
}

func newHealthCheck() healthCheck {
	return healthCheck{
		def:      probeSpec{expectLo: 200, expectHi: 399},
		interval: 5 * time.Second, timeout: time.Second, fails: 3, passes: 2,
		workers: 8, maxPerHost: 16, maxPerZone: 1024,
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

// refused are the addresses that are never checked unless allowed: a check
// would reach the DNS pod itself, its node or the cloud's metadata service,
// which tenants' targets must never be a way into.
var refused = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"), // 0.0.0.0 reaches the pod's own loopback
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("169.254.0.0/16"), // link-local, 169.254.169.254 metadata
	netip.MustParsePrefix("224.0.0.0/3"),    // multicast, reserved, broadcast
	netip.MustParsePrefix("::/128"),
	netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("ff00::/8"),
	netip.MustParsePrefix("fd00:ec2::254/128"), // AWS metadata over IPv6
}

// checkable reports whether addr may be checked: not refused, or allowed.
func (hc *healthCheck) checkable(addr netip.Addr) bool {
	addr = addr.Unmap().WithZone("")
	for _, p := range hc.allow {
		if p.Contains(addr) {
			return true
		}
	}
	for _, p := range refused {
		if p.Contains(addr) {
			return false
		}
	}
	return true
}

// hostCheck is how one host's targets are checked: the stanza's check, or
// the host's health/* properties.
type hostCheck struct {
	none    bool      // not checked: every target is served
	invalid bool      // properties that do not parse: no target is served
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
	if hasExpect {
		lo, hi, body, err := parseExpect(expect)
		if err != nil {
			return hostCheck{invalid: true}
		}
		out.spec.expectLo, out.spec.expectHi, out.spec.body = lo, hi, body
	}
	if hasAddress {
		a, err := netip.ParseAddr(strings.TrimSpace(address))
		if err != nil {
			return hostCheck{invalid: true}
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
