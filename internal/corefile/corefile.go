// Package corefile reads a directive's arguments the same way for every
// fleetdns plugin, so that a block written on one line
//
//	k8scrd { directory /etc/zones }
//
// parses as the same block written over several lines.
//
// caddy ends a line's arguments at a line break or a "{", not at a "}":
// RemainingArgs gives "directory" above the arguments "/etc/zones" and "}",
// and NextArg loads the "}", so a plugin that checks its argument count
// refuses the line. Stock forward and hosts get through such lines only where
// they read a fixed number of arguments and ignore the rest: `forward . ADDR
// { force_tcp }` is refused all the same, and `forward . ADDR { except
// example.org }` takes the "}" for a zone. Here a "{" or "}" ends the
// arguments as a line break does, and is left for NextBlock, which opens or
// closes the block on it.
package corefile

import (
	"net/netip"
	"time"

	"github.com/coredns/caddy"
)

// NextArg loads the next argument on the current line, as c.NextArg does,
// but not a "{" or a "}": those open or close a block.
func NextArg(c *caddy.Controller) bool {
	// The dispenser is a value over shared tokens: a copy peeks without
	// moving c's cursor.
	peek := c.Dispenser
	if !peek.NextArg() || isBrace(peek.Val()) {
		return false
	}
	c.Dispenser = peek
	return true
}

// Args returns the arguments left on the current line, as c.RemainingArgs
// does, up to a "{" or "}". The cursor stays on the last argument, so that
// c.ArgErr names it.
func Args(c *caddy.Controller) []string {
	var args []string
	for NextArg(c) {
		args = append(args, c.Val())
	}
	return args
}

// OpensBlock reports whether a block opens after the arguments on the
// current line, for a property with a block of its own (localtargets'
// healthcheck, gslb's peers_from_ns). When it does, `for c.NextBlock()`
// reads it; without this check NextBlock would take the next line of the
// plugin's block as the first property of a block that is not there.
func OpensBlock(c *caddy.Controller) bool {
	peek := c.Dispenser
	return peek.NextArg() && peek.Val() == "{"
}

// Duration reads the one argument of the current property as a Go duration
// of at least least (a positive one when least > 0). The errors name the
// property, its argument and the Corefile line.
func Duration(c *caddy.Controller, least time.Duration) (time.Duration, error) {
	what := c.Val()
	args := Args(c)
	if len(args) != 1 {
		return 0, c.ArgErr()
	}
	d, err := time.ParseDuration(args[0])
	switch {
	case least > 0 && (err != nil || d <= 0):
		return 0, c.Errf("bad %s %q: not a positive duration", what, args[0])
	case err != nil:
		return 0, c.Errf("bad %s %q: not a duration", what, args[0])
	case d < least:
		return 0, c.Errf("%s %s is below %s", what, d, least)
	}
	return d, nil
}

func isBrace(s string) bool { return s == "{" || s == "}" }

// Prefixes reads the arguments of the current property as CIDRs, a bare
// address standing for its own host prefix (allow lists, ACLs). At least one
// is required; the errors name the property, the argument and the line.
func Prefixes(c *caddy.Controller) ([]netip.Prefix, error) {
	what := c.Val()
	args := Args(c)
	if len(args) == 0 {
		return nil, c.ArgErr()
	}
	out := make([]netip.Prefix, 0, len(args))
	for _, a := range args {
		p, err := netip.ParsePrefix(a)
		if err != nil {
			ip, err2 := netip.ParseAddr(a)
			if err2 != nil {
				return nil, c.Errf("%s %q: not a CIDR or an address", what, a)
			}
			p = netip.PrefixFrom(ip, ip.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}
