package splitdns

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin"
	"github.com/fleetdns/fleetdns/internal/corefile"

	"github.com/miekg/dns"
)

// routeOptions are the settings of one route, in forward's words. Those
// written in the splitdns block are the defaults of every route (the
// Corefile's, kube-dns's stubDomains and the default route); a route's own
// sub-block overrides them word by word.
type routeOptions struct {
	set map[string]bool // the words given here, so that the rest come from the block

	policy        string
	failover      []int // answers with these rcodes make the next upstream be asked
	next          []int // answers with these rcodes make the next-longest route be asked
	tlsServerName string
	healthCheck   time.Duration
	hcNoRec       bool
	hcDomain      string
	maxFails      uint32
	expire        time.Duration
	forceTCP      bool
	preferUDP     bool
	failfast      bool     // failfast_all_unhealthy_upstreams
	except        []string // names inside the route's zone that it leaves to the next-longest route
	maxConcurrent int64    // in a route: its own limit; in the block: one limit for the block
}

func defaultRouteOptions() routeOptions {
	return routeOptions{
		set:         map[string]bool{},
		policy:      "random",
		healthCheck: defaultHealthCheck,
		hcDomain:    ".",
		maxFails:    defaultMaxFails,
		expire:      defaultExpire,
	}
}

// inherit returns o with every word that o's own block did not give taken
// from the splitdns block's options.
func (o routeOptions) inherit(block routeOptions) routeOptions {
	r := block
	r.set = o.set
	r.except = nil      // names in one route's zone mean nothing to another
	r.maxConcurrent = 0 // the block's limit is the block's, not each route's
	for w := range o.set {
		switch w {
		case "policy":
			r.policy = o.policy
		case "failover":
			r.failover = o.failover
		case "next":
			r.next = o.next
		case "tls_servername":
			r.tlsServerName = o.tlsServerName
		case "health_check":
			r.healthCheck, r.hcNoRec, r.hcDomain = o.healthCheck, o.hcNoRec, o.hcDomain
		case "max_fails":
			r.maxFails = o.maxFails
		case "expire":
			r.expire = o.expire
		case "force_tcp":
			r.forceTCP = o.forceTCP
		case "prefer_udp":
			r.preferUDP = o.preferUDP
		case "failfast_all_unhealthy_upstreams":
			r.failfast = o.failfast
		case "except":
			r.except = o.except
		case "max_concurrent":
			r.maxConcurrent = o.maxConcurrent
		}
	}
	return r
}

// parseRouteOption parses one of forward's words into o; it reports false
// for a word that is not one of them. The arguments and errors are forward's.
func parseRouteOption(c *caddy.Controller, o *routeOptions, inRoute bool) (bool, error) {
	w := c.Val()
	switch w {
	case "policy":
		args, err := exactly(c, 1)
		if err != nil {
			return true, err
		}
		if newPolicy(args[0]) == nil {
			return true, c.Errf("policy: unknown policy '%s' (sequential, random or round_robin)", args[0])
		}
		o.policy = args[0]
	case "failover", "next":
		args := corefile.Args(c)
		if len(args) == 0 {
			return true, c.ArgErr()
		}
		var rcodes []int
		for _, a := range args {
			rc, ok := dns.StringToRcode[strings.ToUpper(a)]
			if !ok {
				return true, c.Errf("%s: %s is not a valid rcode", w, a)
			}
			if rc == dns.RcodeSuccess && w == "failover" {
				return true, c.Errf("failover: NOERROR cannot be used in failover")
			}
			if !slices.Contains(rcodes, rc) {
				rcodes = append(rcodes, rc)
			}
		}
		if w == "failover" {
			o.failover = rcodes
		} else {
			o.next = rcodes
		}
	case "tls_servername":
		args, err := exactly(c, 1)
		if err != nil {
			return true, err
		}
		o.tlsServerName = args[0]
	case "health_check":
		args := corefile.Args(c)
		if len(args) == 0 {
			return true, c.ArgErr()
		}
		d, err := time.ParseDuration(args[0])
		if err != nil || d <= 0 {
			return true, c.Errf("health_check: %q is not a positive duration", args[0])
		}
		o.healthCheck, o.hcNoRec, o.hcDomain = d, false, "."
		for i := 1; i < len(args); i++ {
			switch args[i] {
			case "no_rec":
				o.hcNoRec = true
			case "domain":
				i++
				if i == len(args) {
					return true, c.ArgErr()
				}
				if _, ok := dns.IsDomainName(args[i]); !ok {
					return true, c.Errf("health_check: invalid domain name %s", args[i])
				}
				o.hcDomain = plugin.Name(args[i]).Normalize()
			default:
				return true, c.Errf("health_check: unknown option %s", args[i])
			}
		}
	case "max_fails":
		args, err := exactly(c, 1)
		if err != nil {
			return true, err
		}
		n, err := strconv.ParseUint(args[0], 10, 32)
		if err != nil {
			return true, c.Errf("max_fails: %q is not a number", args[0])
		}
		o.maxFails = uint32(n)
	case "expire":
		args, err := exactly(c, 1)
		if err != nil {
			return true, err
		}
		d, err := time.ParseDuration(args[0])
		if err != nil || d < 0 {
			return true, c.Errf("expire: %q is not a duration", args[0])
		}
		o.expire = d
	case "force_tcp", "prefer_udp", "failfast_all_unhealthy_upstreams":
		if _, err := exactly(c, 0); err != nil {
			return true, err
		}
		switch w {
		case "force_tcp":
			o.forceTCP = true
		case "prefer_udp":
			o.preferUDP = true
		default:
			o.failfast = true
		}
	case "max_concurrent":
		args, err := exactly(c, 1)
		if err != nil {
			return true, err
		}
		n, err := strconv.ParseInt(args[0], 10, 64)
		if err != nil || n < 0 {
			return true, c.Errf("max_concurrent: %q is not a number of queries", args[0])
		}
		o.maxConcurrent = n
	case "except":
		if !inRoute {
			return true, c.Errf("except: only inside a route's block (names of its zone that it leaves to the next route)")
		}
		args := corefile.Args(c)
		if len(args) == 0 {
			return true, c.ArgErr()
		}
		for _, a := range args {
			zones := plugin.Host(a).NormalizeExact()
			if len(zones) == 0 {
				return true, c.Errf("except: %q is not a name", a)
			}
			o.except = append(o.except, zones...)
		}
	default:
		return false, nil
	}
	if o.set[w] {
		return true, c.Errf("%s: given twice", w)
	}
	o.set[w] = true
	return true, nil
}

// exactly returns the n arguments on the line, or an error naming the line.
func exactly(c *caddy.Controller, n int) ([]string, error) {
	args := corefile.Args(c)
	if len(args) != n {
		return nil, c.ArgErr()
	}
	return args, nil
}

// checkExcepts refuses except names outside the route's zones: they could
// never match a name that the route takes.
func checkExcepts(c *caddy.Controller, zones []string, o routeOptions) error {
	for _, e := range o.except {
		if !slices.ContainsFunc(zones, func(z string) bool { return dns.IsSubDomain(z, e) }) {
			return c.Errf("except: %s is not inside the route's zone %s", e, strings.Join(zones, " "))
		}
	}
	return nil
}

// upstreamKey names an upstream with the settings that live in its proxy:
// routes that agree on them share one connection pool and health state.
func upstreamKey(addr string, o routeOptions) string {
	return fmt.Sprintf("%s|%s|%s|%s|%t|%s|%t|%d", addr, o.tlsServerName, o.expire, o.healthCheck, o.hcNoRec, o.hcDomain, o.forceTCP, o.maxFails)
}
