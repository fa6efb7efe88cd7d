package localtargets

import (
	"strconv"
	"strings"
	"time"

	"github.com/fleetdns/fleetdns/internal/corefile"
	"github.com/fleetdns/fleetdns/internal/store"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	clog "github.com/coredns/coredns/plugin/pkg/log"
)

const pluginName = "localtargets"

var log = clog.NewWithPlugin(pluginName)

func init() { plugin.Register(pluginName, setup) }

func setup(c *caddy.Controller) error {
	lt, hc, err := parse(c)
	if err != nil {
		return plugin.Error(pluginName, err)
	}

	// Do this in OnStartup, so all plugins have been initialized.
	c.OnStartup(func() error {
		s, err := store.FromConfig(c)
		if err != nil {
			return plugin.Error(pluginName, err)
		}
		lt.reader = s
		if hc != nil {
			lt.health = newChecker(*hc, lt.Zones, lt.prefix, lt.reader)
			lt.health.start()
		}
		return nil
	})
	c.OnShutdown(func() error {
		if lt.health != nil {
			lt.health.stop()
		}
		return nil
	})

	dnsserver.GetConfig(c).AddPlugin(func(next plugin.Handler) plugin.Handler {
		lt.Next = next
		return lt
	})
	return nil
}

func parse(c *caddy.Controller) (*LocalTargets, *healthCheck, error) {
	lt := New()
	var hc *healthCheck

	i := 0
	for c.Next() { // localtargets
		if i > 0 {
			return nil, nil, plugin.ErrOnce
		}
		i++
		lt.Zones = plugin.OriginsFromArgsOrServerBlock(corefile.Args(c), c.ServerBlockKeys)
		for c.NextBlock() {
			switch c.Val() {
			case "prefix":
				args := corefile.Args(c)
				if len(args) != 1 {
					return nil, nil, c.ArgErr()
				}
				p := strings.ToLower(args[0])
				if strings.Contains(p, ".") {
					return nil, nil, c.Errf("prefix %q must be part of one label, without dots", args[0])
				}
				lt.prefix = p
			case "ttl":
				args := corefile.Args(c)
				if len(args) != 1 {
					return nil, nil, c.ArgErr()
				}
				t, err := strconv.ParseUint(args[0], 10, 32)
				if err != nil {
					return nil, nil, c.Errf("ttl %q: not a number of seconds", args[0])
				}
				lt.ttl = uint32(t)
			case "healthcheck":
				if hc != nil {
					return nil, nil, c.Err("healthcheck given twice")
				}
				h, err := parseHealthCheck(c)
				if err != nil {
					return nil, nil, err
				}
				hc = h
			default:
				return nil, nil, c.Errf("unknown property %q", c.Val())
			}
		}
	}
	return lt, hc, nil
}

// parseHealthCheck parses
//
//	healthcheck tcp PORT | http PORT PATH [HOST] | https PORT PATH [HOST] | none {
//	    expect RANGE [SUBSTRING]; interval; timeout; fails; passes
//	    workers N; max_per_host N; max_per_zone N; allow CIDR...; deny CIDR...
//	    tenant_address on|off; tenant_body on|off
//	}
func parseHealthCheck(c *caddy.Controller) (*healthCheck, error) {
	hc := newHealthCheck()
	args := corefile.Args(c)
	switch {
	case len(args) == 1 && args[0] == "none":
		hc.none = true
	case len(args) < 2:
		return nil, c.ArgErr()
	default:
		spec, err := parseCheck(args)
		if err != nil {
			return nil, c.Errf("healthcheck: %v", err)
		}
		spec.expectLo, spec.expectHi = hc.def.expectLo, hc.def.expectHi
		hc.def = spec
	}

	// The optional block opens on the healthcheck line.
	if corefile.OpensBlock(c) {
		for c.NextBlock() {
			switch what := c.Val(); what {
			case "interval", "timeout":
				d, err := corefile.Duration(c, time.Nanosecond)
				if err != nil {
					return nil, err
				}
				if what == "interval" {
					hc.interval = d
				} else {
					hc.timeout = d
				}
			case "fails", "passes", "workers", "max_per_host", "max_per_zone":
				args := corefile.Args(c)
				if len(args) != 1 {
					return nil, c.ArgErr()
				}
				n, err := strconv.Atoi(args[0])
				if err != nil || n < 1 || n > 1<<20 {
					return nil, c.Errf("healthcheck %s %q: not a positive number", what, args[0])
				}
				switch what {
				case "fails":
					hc.fails = n
				case "passes":
					hc.passes = n
				case "workers":
					hc.workers = n
				case "max_per_host":
					hc.maxPerHost = n
				case "max_per_zone":
					hc.maxPerZone = n
				}
			case "expect":
				lo, hi, body, err := parseExpect(strings.Join(corefile.Args(c), " "))
				if err != nil {
					return nil, c.Errf("healthcheck %v", err)
				}
				hc.def.expectLo, hc.def.expectHi, hc.def.body = lo, hi, body
			case "allow", "deny":
				p, err := corefile.Prefixes(c)
				if err != nil {
					return nil, err
				}
				if what == "allow" {
					hc.allow = append(hc.allow, p...)
				} else {
					hc.deny = append(hc.deny, p...)
				}
			case "tenant_address", "tenant_body":
				args := corefile.Args(c)
				if len(args) != 1 || (args[0] != "on" && args[0] != "off") {
					return nil, c.Errf("healthcheck %s: want on or off", what)
				}
				if what == "tenant_address" {
					hc.tenantAddress = args[0] == "on"
				} else {
					hc.tenantBody = args[0] == "on"
				}
			default:
				return nil, c.Errf("unknown healthcheck property %q", c.Val())
			}
		}
		// NextBlock ends on the "}" that closes the block, or at the end
		// of the tokens when there is none.
		if c.Val() != "}" {
			return nil, c.Err("healthcheck block is not closed")
		}
	}
	if hc.timeout > hc.interval {
		return nil, c.Errf("healthcheck timeout %s is longer than its interval %s", hc.timeout, hc.interval)
	}
	return &hc, nil
}

// Ready implements ready.Readiness: without health checks at once, with them
// once every target has had its first check.
func (lt *LocalTargets) Ready() bool {
	return lt.health == nil || lt.health.ready.Load()
}
