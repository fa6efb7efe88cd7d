package gslb

import (
	"errors"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	coreparse "github.com/coredns/coredns/plugin/pkg/parse"
	"github.com/fleetdns/fleetdns/internal/corefile"
	"github.com/fleetdns/fleetdns/internal/store"
	"github.com/fleetdns/fleetdns/plugin/gslb/fleet"

	"github.com/oschwald/maxminddb-golang/v2"
)

func init() { plugin.Register(pluginName, setup) }

func setup(c *caddy.Controller) error {
	g, err := parse(c)
	if err != nil {
		return plugin.Error(pluginName, err)
	}
	if g.fl != nil {
		if g.fl.keys != nil {
			// The server verifies the TSIG of requests and signs the
			// answers with these secrets, as plugin/tsig has it do.
			cfg := dnsserver.GetConfig(c)
			if cfg.TsigSecret == nil {
				cfg.TsigSecret = map[string]string{}
			}
			maps.Copy(cfg.TsigSecret, g.fl.keys.Secrets())
		}
	}

	// Do this in OnStartup, so all plugins have been initialized.
	c.OnStartup(func() error {
		s, err := store.FromConfig(c)
		if err != nil {
			return plugin.Error(pluginName, err)
		}
		g.store = s
		// This cluster's own contribution: the healthy targets from
		// localtargets when it is in the block, else the store's. Peers are
		// asked with the prefix this cluster answers with, unless the
		// Corefile says otherwise.
		if t := store.TargetsFromConfig(c); t != nil {
			g.local = t
			if !g.prefixSet {
				g.prefix = strings.ToLower(t.Prefix())
			}
		}
		g.start()
		return nil
	})
	c.OnShutdown(func() error {
		g.stop()
		return nil
	})

	dnsserver.GetConfig(c).AddPlugin(func(next plugin.Handler) plugin.Handler {
		g.Next = next
		return g
	})
	return nil
}

func parse(c *caddy.Controller) (*GSLB, error) {
	var g *GSLB
	for c.Next() { // gslb
		if g != nil {
			return nil, c.Err("gslb can be used once per server block")
		}
		zones := plugin.OriginsFromArgsOrServerBlock(corefile.Args(c), c.ServerBlockKeys)
		if len(zones) != 1 {
			return nil, c.Errf("gslb takes exactly one zone, got %d", len(zones))
		}
		g = New(strings.ToLower(zones[0]))
		p := &parser{g: g, pattern: defaultNSPattern}
		for c.NextBlock() {
			if err := p.word(c); err != nil {
				return nil, err
			}
		}
		if err := p.finish(c); err != nil {
			return nil, err
		}
	}
	if g == nil {
		return nil, errors.New("no gslb directive")
	}
	g.derive()
	return g, nil
}

// parser holds what one gslb block's words set beyond the GSLB itself.
type parser struct {
	g                   *GSLB
	pattern             string // peers_from_ns pattern
	mmdbPath, mmdbField string
}

// word parses one line of the gslb block, in the order the README
// documents the words.
func (p *parser) word(c *caddy.Controller) error {
	g := p.g
	switch c.Val() {
	case "geotag":
		args := corefile.Args(c)
		if len(args) != 1 {
			return c.ArgErr()
		}
		g.geotag = args[0]
	case "peer":
		return p.peer(c)
	case "peers_from_ns":
		return p.peersFromNS(c)
	case "publish_delegation":
		return p.publishDelegation(c)
	case "max_targets":
		n, err := positive(c)
		if err != nil {
			return err
		}
		g.maxTargets = n
	case "strategy", "primary", "weight", "ttl", "fallback", "all_down":
		return p.policy(c)
	case "geo":
		return p.geo(c)
	case "timeout", "refresh", "split_brain_threshold":
		return p.timing(c)
	case "explain":
		return p.explain(c)
	case "prefix":
		args := corefile.Args(c)
		if len(args) != 1 {
			return c.ArgErr()
		}
		if strings.Contains(args[0], ".") {
			return c.Errf("prefix %q must be part of one label, without dots", args[0])
		}
		g.prefix, g.prefixSet = strings.ToLower(args[0]), true
	case "fleet":
		return p.fleet(c)
	case "witness":
		return p.witness(c)
	default:
		return c.Errf("unknown property %q", c.Val())
	}
	return nil
}

// peer parses `peer TAG ADDRESS...`.
func (p *parser) peer(c *caddy.Controller) error {
	args := corefile.Args(c)
	if len(args) < 2 {
		return c.ArgErr()
	}
	tag := args[0]
	if _, dup := p.g.static[tag]; dup {
		return c.Errf("peer %s given twice", tag)
	}
	addrs, err := peerAddrs(c, "peer "+tag, args[1:])
	if err != nil {
		return err
	}
	p.g.static[tag] = addrs
	return nil
}

// peersFromNS parses `peers_from_ns SERVER... [{ ... }]`.
func (p *parser) peersFromNS(c *caddy.Controller) error {
	g := p.g
	if g.disc != nil {
		return c.Err("peers_from_ns given twice")
	}
	args := corefile.Args(c)
	if len(args) == 0 {
		return c.ArgErr()
	}
	g.disc = &discovery{refresh: 2 * time.Hour, port: "53"}
	addrs, err := peerAddrs(c, "peers_from_ns", args)
	if err != nil {
		return err
	}
	g.disc.servers = addrs
	if !corefile.OpensBlock(c) {
		return nil
	}
	for c.NextBlock() {
		switch c.Val() {
		case "pattern":
			args := corefile.Args(c)
			if len(args) != 1 {
				return c.ArgErr()
			}
			p.pattern = args[0]
		case "refresh":
			d, err := corefile.Duration(c, time.Second)
			if err != nil {
				return err
			}
			g.disc.refresh = d
		case "max_peers":
			n, err := positive(c)
			if err != nil {
				return err
			}
			g.maxPeers = n
		case "allow":
			p, err := corefile.Prefixes(c)
			if err != nil {
				return err
			}
			g.disc.allow = append(g.disc.allow, p...)
		case "deny":
			p, err := corefile.Prefixes(c)
			if err != nil {
				return err
			}
			g.disc.deny = append(g.disc.deny, p...)
		case "port":
			args := corefile.Args(c)
			if len(args) != 1 {
				return c.ArgErr()
			}
			if n, err := strconv.Atoi(args[0]); err != nil || n < 1 || n > 65535 {
				return c.Errf("bad port %q", args[0])
			}
			g.disc.port = args[0]
		default:
			return c.Errf("unknown property %q in peers_from_ns", c.Val())
		}
	}
	return nil
}

// policy parses the default policy's words: strategy, primary, weight, ttl,
// fallback, all_down.
func (p *parser) policy(c *caddy.Controller) error {
	def := &p.g.defaults
	word := c.Val()
	args := corefile.Args(c)
	switch word {
	case "strategy":
		if len(args) != 1 {
			return c.ArgErr()
		}
		s, ok := strategyName(args[0])
		if !ok {
			return c.Errf("unknown strategy %q, want roundRobin, failover, geoip or weighted", args[0])
		}
		def.strategy = s
	case "primary":
		if len(args) == 0 {
			return c.ArgErr()
		}
		if err := def.setPrimary(args); err != nil {
			return c.Errf("primary: %v", err)
		}
	case "fallback":
		if len(args) < 2 {
			return c.Errf("fallback wants REGION TAG...")
		}
		if def.fallback == nil {
			def.fallback = map[string][]string{}
		}
		if err := addFallback(def.fallback, args[0], args[1:]); err != nil {
			return c.Errf("fallback: %v", err)
		}
	case "all_down":
		if def.allDown != nil {
			return c.Err("all_down given twice")
		}
		ad, err := parseAllDown(args)
		if err != nil {
			return c.Errf("all_down: %v", err)
		}
		def.allDown = ad
	case "weight":
		if len(args) == 0 || len(args)%2 != 0 {
			return c.Errf("weight wants TAG N pairs")
		}
		if def.weights == nil {
			def.weights = map[string]int{}
		}
		for i := 0; i < len(args); i += 2 {
			n, err := strconv.Atoi(args[i+1])
			if err != nil || n < 0 {
				return c.Errf("bad weight %q for %s", args[i+1], args[i])
			}
			def.weights[args[i]] = n
		}
	case "ttl":
		if len(args) != 1 {
			return c.ArgErr()
		}
		n, err := strconv.ParseUint(args[0], 10, 32)
		if err != nil {
			return c.Errf("bad ttl %q", args[0])
		}
		def.ttl = uint32(n)
	}
	return nil
}

// geo parses `geo cidr|mmdb|map|metadata ...`.
func (p *parser) geo(c *caddy.Controller) error {
	g := p.g
	args := corefile.Args(c)
	if len(args) == 0 {
		return c.ArgErr()
	}
	if g.geo == nil {
		g.geo = &geoResolver{values: map[string]string{}}
	}
	switch args[0] {
	case "cidr":
		if len(args) != 3 {
			return c.ArgErr()
		}
		pfx, err := netip.ParsePrefix(args[1])
		if err != nil {
			return c.Errf("geo cidr: %v", err)
		}
		g.geo.cidrs = append(g.geo.cidrs, cidrTag{prefix: pfx.Masked(), tag: args[2]})
	case "mmdb":
		if len(args) != 3 {
			return c.ArgErr()
		}
		if p.mmdbPath != "" {
			return c.Err("geo mmdb given twice")
		}
		p.mmdbPath, p.mmdbField = args[1], args[2]
	case "map":
		if len(args) != 3 {
			return c.ArgErr()
		}
		g.geo.values[args[1]] = args[2]
	case "metadata":
		if len(args) != 2 {
			return c.ArgErr()
		}
		g.geo.metaKey = args[1]
	default:
		return c.Errf("unknown geo source %q, want cidr, mmdb, map or metadata", args[0])
	}
	return nil
}

// timing parses timeout, refresh and split_brain_threshold.
func (p *parser) timing(c *caddy.Controller) error {
	g := p.g
	word := c.Val()
	least := map[string]time.Duration{"timeout": time.Millisecond, "refresh": 100 * time.Millisecond, "split_brain_threshold": 0}[word]
	d, err := corefile.Duration(c, least)
	if err != nil {
		return err
	}
	switch word {
	case "timeout":
		g.timeout = d
	case "refresh":
		g.refresh = d
	case "split_brain_threshold":
		g.splitBrain = d
	}
	return nil
}

// explain parses `explain CIDR...|none`.
func (p *parser) explain(c *caddy.Controller) error {
	g := p.g
	args := corefile.Args(c)
	if len(args) == 0 {
		return c.ArgErr()
	}
	g.explain = nil
	for _, a := range args {
		if a == "none" {
			continue
		}
		pfx, err := netip.ParsePrefix(a)
		if err != nil {
			ip, err2 := netip.ParseAddr(a)
			if err2 != nil {
				return c.Errf("explain: %v", err)
			}
			pfx = netip.PrefixFrom(ip, ip.BitLen())
		}
		g.explain = append(g.explain, pfx.Masked())
	}
	return nil
}

// fleet parses `fleet [{ ... }]`.
func (p *parser) fleet(c *caddy.Controller) error {
	g := p.g
	if g.fl != nil {
		return c.Err("fleet given twice")
	}
	if len(corefile.Args(c)) != 0 {
		return c.ArgErr()
	}
	g.fl = newFleetConfig()
	if !corefile.OpensBlock(c) {
		return nil
	}
	for c.NextBlock() {
		switch c.Val() {
		case "key":
			args := corefile.Args(c)
			if len(args) != 1 {
				return c.ArgErr()
			}
			if g.fl.keys != nil {
				return c.Err("fleet key given twice")
			}
			k, err := fleet.LoadKeys(args[0])
			if err != nil {
				return c.Errf("fleet key: %v", err)
			}
			g.fl.keys, g.fl.keyFile = k, args[0]
		case "also_notify":
			args := corefile.Args(c)
			if len(args) == 0 {
				return c.ArgErr()
			}
			if len(g.fl.alsoNotify)+len(args) > maxAlsoNotify {
				return c.Errf("fleet also_notify: more than %d addresses", maxAlsoNotify)
			}
			addrs, err := peerAddrs(c, "fleet also_notify", args)
			if err != nil {
				return err
			}
			g.fl.alsoNotify = append(g.fl.alsoNotify, addrs...)
		case "notify_delay":
			d, err := corefile.Duration(c, 0)
			if err != nil {
				return err
			}
			g.fl.notifyDelay = d
		case "notify_rate":
			n, err := positive(c)
			if err != nil {
				return err
			}
			g.fl.notifyRate = n
		case "max_hosts":
			n, err := positive(c)
			if err != nil {
				return err
			}
			g.fl.limits.MaxHosts = n
		case "max_records":
			n, err := positive(c)
			if err != nil {
				return err
			}
			g.fl.limits.MaxRecords = n
		case "max_octets":
			n, err := positive(c)
			if err != nil {
				return err
			}
			g.fl.limits.MaxOctets = n
		default:
			return c.Errf("unknown property %q in fleet", c.Val())
		}
	}
	return nil
}

// finish checks the block as a whole and prepares what its words name: the
// name server pattern and the geo database.
func (p *parser) finish(c *caddy.Controller) error {
	g := p.g
	if g.geotag == "" {
		return c.Err("geotag is required")
	}
	delete(g.static, g.geotag) // this cluster is never its own peer
	ns, err := newNSPattern(p.pattern, g.zone)
	if err != nil {
		return c.Err(err.Error())
	}
	g.ns = ns
	if err := p.finishDelegation(c); err != nil {
		return err
	}
	if p.mmdbPath != "" {
		r, err := maxminddb.Open(p.mmdbPath)
		if err != nil {
			return c.Errf("geo mmdb: %v", err)
		}
		g.geo.mmdb, g.geo.mmdbSrc = r, p.mmdbPath
		for f := range strings.SplitSeq(p.mmdbField, ".") {
			if n, err := strconv.Atoi(f); err == nil {
				g.geo.field = append(g.geo.field, n)
			} else {
				g.geo.field = append(g.geo.field, f)
			}
		}
	}
	if g.geo != nil {
		// Most specific CIDR first.
		slices.SortStableFunc(g.geo.cidrs, func(a, b cidrTag) int { return b.prefix.Bits() - a.prefix.Bits() })
	}
	if g.defaults.strategy == geoip && g.geo == nil {
		return c.Err("strategy geoip needs a geo source (geo cidr, geo mmdb or geo metadata)")
	}
	if g.fl != nil {
		g.pub = fleet.NewPublisher(g.zone, g.fl.keys, g.fl.limits)
	}
	return p.finishWitness(c)
}

// positive reads the one argument of the current option: a number >= 1.
func positive(c *caddy.Controller) (int, error) {
	opt := c.Val()
	args := corefile.Args(c)
	if len(args) != 1 {
		return 0, c.ArgErr()
	}
	n, err := strconv.Atoi(args[0])
	if err != nil || n < 1 {
		return 0, c.Errf("bad %s %q, want a number >= 1", opt, args[0])
	}
	return n, nil
}

// derive sets the timings that follow from refresh.
func (g *GSLB) derive() {
	g.defaults.prepare()
	// No answer is refreshed more often than once a second (or refresh,
	// when that is shorter), whatever TTL the peer gives.
	g.floor = min(time.Second, g.refresh)
	g.tick = max(min(g.refresh/2, time.Second), 50*time.Millisecond)
	g.deriveWitness()
}

// peerAddrs normalizes ADDRESS[:PORT] arguments (IP addresses, port 53 by
// default; IPv6 with a port in brackets) to host:port.
func peerAddrs(c *caddy.Controller, what string, args []string) ([]string, error) {
	addrs := make([]string, 0, len(args))
	for _, a := range args {
		s := a
		if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
			s = s[1 : len(s)-1] // [::1] without a port
		}
		hp, err := coreparse.HostPort(s, "53")
		if err == nil {
			_, err = netip.ParseAddrPort(hp) // HostPort leaves the port unchecked
		}
		if err != nil {
			return nil, c.Errf("%s: %q is not an IP address with an optional port", what, a)
		}
		addrs = append(addrs, hp)
	}
	return addrs, nil
}
