package rrl

import (
	"github.com/fleetdns/fleetdns/internal/corefile"
	"github.com/fleetdns/fleetdns/internal/store"
	"strconv"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
)

func init() { plugin.Register("rrl", setup) }

func setup(c *caddy.Controller) error {
	r, err := parse(c)
	if err != nil {
		return plugin.Error("rrl", err)
	}
	// Fleet traffic between gslb peers is never limited (gslb says which).
	c.OnStartup(func() error {
		r.fleet = store.FleetFromConfig(c)
		return nil
	})
	dnsserver.GetConfig(c).AddPlugin(func(next plugin.Handler) plugin.Handler {
		r.Next = next
		return r
	})
	return nil
}

// Defaults, as BIND's examples use them: 10 responses per second per client
// network and kind, 15 seconds of window, every second dropped response
// slipped.
const (
	defaultRate      = 10
	defaultWindow    = 15 * time.Second
	defaultSlip      = 2
	defaultTableSize = 100_000
)

func parse(c *caddy.Controller) (*RRL, error) {
	r := &RRL{responses: defaultRate, nxdomains: -1, errors: -1, ipv4Prefix: 24, ipv6Prefix: 56, now: time.Now}
	window, slip, size := defaultWindow, defaultSlip, defaultTableSize
	for c.Next() {
		r.Zones = plugin.OriginsFromArgsOrServerBlock(corefile.Args(c), c.ServerBlockKeys)
		for c.NextBlock() {
			word := c.Val()
			if word == "exempt" {
				p, err := corefile.Prefixes(c)
				if err != nil {
					return nil, err
				}
				r.exempt = append(r.exempt, p...)
				continue
			}
			args := corefile.Args(c)
			if len(args) != 1 {
				return nil, c.ArgErr()
			}
			n, err := strconv.Atoi(args[0])
			if err != nil || n < 0 {
				return nil, c.Errf("%s: %q is not a count", word, args[0])
			}
			switch word {
			case "responses_per_second":
				r.responses = float64(n)
			case "nxdomains_per_second":
				r.nxdomains = float64(n)
			case "errors_per_second":
				r.errors = float64(n)
			case "window":
				if n < 1 || n > 3600 {
					return nil, c.Errf("window %d: want 1 to 3600 seconds", n)
				}
				window = time.Duration(n) * time.Second
			case "slip":
				if n > 10 {
					return nil, c.Errf("slip %d: want 0 to 10", n)
				}
				slip = n
			case "ipv4_prefix_length":
				if n < 8 || n > 32 {
					return nil, c.Errf("ipv4_prefix_length %d: want 8 to 32", n)
				}
				r.ipv4Prefix = n
			case "ipv6_prefix_length":
				if n < 16 || n > 128 {
					return nil, c.Errf("ipv6_prefix_length %d: want 16 to 128", n)
				}
				r.ipv6Prefix = n
			case "max_table_size":
				if n < 1 {
					return nil, c.Errf("max_table_size %d: want at least 1", n)
				}
				size = n
			default:
				return nil, c.Errf("unknown property %q", word)
			}
		}
	}
	// Unset limits follow responses_per_second, as in BIND.
	if r.nxdomains < 0 {
		r.nxdomains = r.responses
	}
	if r.errors < 0 {
		r.errors = r.responses
	}
	r.table = newTable(size, window, slip)
	return r, nil
}
