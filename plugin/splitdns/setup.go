package splitdns

import (
	"crypto/tls"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/pkg/parse"
	pkgtls "github.com/coredns/coredns/plugin/pkg/tls"
	"github.com/coredns/coredns/plugin/pkg/transport"
	"github.com/fleetdns/fleetdns/internal/corefile"

	"github.com/miekg/dns"
)

func init() { plugin.Register("splitdns", setup) }

const (
	defaultHealthCheck = 500 * time.Millisecond // as forward
	defaultTimeout     = 2 * time.Second        // forward's read timeout
	defaultMaxFails    = 2                      // as forward
	defaultExpire      = 10 * time.Second       // as forward: idle connections to upstreams are closed after this
	// stopGrace is how long an upstream that left the table keeps its
	// connections, so that queries still using it finish.
	stopGrace = 10 * time.Second
)

// config is what the Corefile says.
type config struct {
	routes        []zoneRoute
	def           []string     // default UPSTREAM...
	resolv        []string     // the nameservers of resolv PATH
	kubedns       string       // kubedns DIR
	opts          routeOptions // the block's forward options: every route's defaults
	readyRequires []string     // nil: the default route; "all"; or zones ("." for the default route)
	listener      listener
}

type zoneRoute struct {
	zone  string
	addrs []string
	opts  routeOptions // the route's own sub-block; the block's fill the rest after parsing
}

func setup(c *caddy.Controller) error {
	s, kd, err := parseSplitDNS(c)
	if err != nil {
		return plugin.Error("splitdns", err)
	}
	t, errs := s.build(kd)
	if len(errs) > 0 {
		// The Corefile's own upstreams were checked line by line in parse;
		// what is left came from the kube-dns files.
		return plugin.Error("splitdns", fmt.Errorf("kubedns %s: %w", s.cfg.kubedns, errs[0]))
	}
	s.swap(t)

	c.OnStartup(s.OnStartup)
	c.OnShutdown(s.OnShutdown)

	dnsserver.GetConfig(c).AddPlugin(func(next plugin.Handler) plugin.Handler {
		s.Next = next
		return s
	})
	return nil
}

// New returns a SplitDNS with the defaults and an empty table.
func New() *SplitDNS {
	s := &SplitDNS{pool: newPool(), stop: make(chan struct{})}
	s.cfg.opts = defaultRouteOptions()
	s.table.Store(newTable())
	return s
}

// OnStartup starts the upstreams' health probes and the background watchers.
func (s *SplitDNS) OnStartup() error {
	s.pool.start()
	go s.watchHealth()
	if s.cfg.kubedns != "" {
		files, _ := readKubeDNSFiles(s.cfg.kubedns)
		go s.watchKubeDNS(files)
	}
	return nil
}

// OnShutdown stops the watchers and, after a grace period for queries in
// flight, the upstreams.
func (s *SplitDNS) OnShutdown() error {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	s.pool.stop(stopGrace)
	return nil
}

func parseSplitDNS(c *caddy.Controller) (*SplitDNS, kubeDNS, error) {
	s := New()
	var kd kubeDNS
	cfg := dnsserver.GetConfig(c)
	s.cfg.listener = listener{hosts: cfg.ListenHosts, port: cfg.Port, local: localAddrs()}

	var tlsArgs []string
	seen := false
	for c.Next() {
		if seen {
			return nil, kd, plugin.ErrOnce
		}
		seen = true
		if len(corefile.Args(c)) != 0 {
			return nil, kd, c.ArgErr()
		}
		for c.NextBlock() {
			switch c.Val() {
			case "route":
				args := corefile.Args(c)
				if len(args) < 2 {
					return nil, kd, c.ArgErr()
				}
				// A CIDR (10.0.0.0/12) is its reverse zones, as in a server block's key.
				zones := plugin.Host(args[0]).NormalizeExact()
				if len(zones) == 0 {
					return nil, kd, c.Errf("route: %q is not a zone", args[0])
				}
				addrs, err := upstreams(c, "route "+args[0], args[1:], s.cfg.listener)
				if err != nil {
					return nil, kd, err
				}
				opts, err := parseRouteBlock(c, zones)
				if err != nil {
					return nil, kd, err
				}
				for _, zone := range zones {
					if zone == "." {
						return nil, kd, c.Errf("route: the root zone is the default route; use 'default' or 'resolv'")
					}
					if slices.ContainsFunc(s.cfg.routes, func(r zoneRoute) bool { return r.zone == zone }) {
						return nil, kd, c.Errf("route: zone %s is routed twice", zone)
					}
					s.cfg.routes = append(s.cfg.routes, zoneRoute{zone: zone, addrs: addrs, opts: opts})
				}
			case "default":
				args := corefile.Args(c)
				if len(args) == 0 {
					return nil, kd, c.ArgErr()
				}
				if s.cfg.def != nil || s.cfg.resolv != nil {
					return nil, kd, c.Errf("default: only one of 'default' and 'resolv' may be given")
				}
				addrs, err := upstreams(c, "default", args, s.cfg.listener)
				if err != nil {
					return nil, kd, err
				}
				s.cfg.def = addrs
			case "resolv":
				if !corefile.NextArg(c) {
					return nil, kd, c.ArgErr()
				}
				if s.cfg.def != nil || s.cfg.resolv != nil {
					return nil, kd, c.Errf("resolv: only one of 'default' and 'resolv' may be given")
				}
				path := c.Val()
				if corefile.NextArg(c) {
					return nil, kd, c.ArgErr()
				}
				rc, err := dns.ClientConfigFromFile(path)
				if err != nil {
					return nil, kd, c.Errf("resolv: %v", err)
				}
				if len(rc.Servers) == 0 {
					return nil, kd, c.Errf("resolv: no nameserver lines in %s", path)
				}
				addrs, err := upstreams(c, "resolv "+path, rc.Servers, s.cfg.listener)
				if err != nil {
					return nil, kd, err
				}
				s.cfg.resolv = addrs
			case "kubedns":
				if !corefile.NextArg(c) {
					return nil, kd, c.ArgErr()
				}
				dir := c.Val()
				if corefile.NextArg(c) {
					return nil, kd, c.ArgErr()
				}
				files, err := readKubeDNSFiles(dir)
				if err == nil {
					kd, err = files.parse()
				}
				if err != nil {
					return nil, kd, c.Errf("kubedns: %v", err)
				}
				s.cfg.kubedns = dir
			case "timeout":
				d, err := corefile.Duration(c, time.Nanosecond)
				if err != nil {
					return nil, kd, err
				}
				s.pool.timeout = d
			case "tls":
				tlsArgs = corefile.Args(c)
				if len(tlsArgs) > 3 {
					return nil, kd, c.ArgErr()
				}
				for i := range tlsArgs {
					if !filepath.IsAbs(tlsArgs[i]) && cfg.Root != "" {
						tlsArgs[i] = filepath.Join(cfg.Root, tlsArgs[i])
					}
				}
			case "ready_requires":
				args := corefile.Args(c)
				if len(args) == 0 {
					return nil, kd, c.ArgErr()
				}
				s.cfg.readyRequires = nil
				switch {
				case len(args) == 1 && args[0] == "default":
				case len(args) == 1 && args[0] == "all":
					s.cfg.readyRequires = []string{"all"}
				default:
					for _, a := range args {
						if a == "default" {
							a = "."
						}
						zones := plugin.Host(a).NormalizeExact()
						if len(zones) == 0 {
							return nil, kd, c.Errf("ready_requires: %q is not a zone", a)
						}
						s.cfg.readyRequires = append(s.cfg.readyRequires, zones[0])
					}
				}
			default:
				ok, err := parseRouteOption(c, &s.cfg.opts, false)
				if err != nil {
					return nil, kd, err
				}
				if !ok {
					return nil, kd, c.Errf("unknown property '%s'", c.Val())
				}
			}
		}
	}
	// The block's max_concurrent is one limit for every query the block
	// forwards, as forward's is for its block.
	s.maxConcurrent = s.cfg.opts.maxConcurrent
	for i := range s.cfg.routes {
		s.cfg.routes[i].opts = s.cfg.routes[i].opts.inherit(s.cfg.opts)
	}
	s.cfg.opts = routeOptions{set: map[string]bool{}}.inherit(s.cfg.opts)
	s.pool.interval = s.cfg.opts.healthCheck

	if s.cfg.kubedns == "" {
		// Without kube-dns files the routes are all known now: a zone that
		// readiness waits for must be one of them, or it would never be ready.
		for _, z := range s.cfg.readyRequires {
			routed := z == "all" || (z == "." && (s.cfg.def != nil || s.cfg.resolv != nil)) ||
				slices.ContainsFunc(s.cfg.routes, func(r zoneRoute) bool { return r.zone == z })
			if !routed {
				return nil, kd, c.Errf("ready_requires: no route for %s", z)
			}
		}
	}

	tlsConfig := new(tls.Config)
	if tlsArgs != nil {
		var err error
		if tlsConfig, err = pkgtls.NewTLSConfigFromArgs(tlsArgs...); err != nil {
			return nil, kd, fmt.Errorf("tls: %w", err)
		}
	}
	tlsConfig.ClientSessionCache = tls.NewLRUClientSessionCache(0)
	s.pool.tls = tlsConfig
	return s, kd, nil
}

// parseRouteBlock parses the optional `{ ... }` after a route's upstreams:
// forward's words, each overriding the block's for this route.
func parseRouteBlock(c *caddy.Controller, zones []string) (routeOptions, error) {
	o := routeOptions{set: map[string]bool{}}
	if !corefile.OpensBlock(c) {
		return o, nil
	}
	for c.NextBlock() {
		w := c.Val()
		ok, err := parseRouteOption(c, &o, true)
		if err != nil {
			return o, err
		}
		if !ok {
			return o, c.Errf("route: unknown property '%s'", w)
		}
		if w == "except" {
			if err := checkExcepts(c, zones, o); err != nil {
				return o, err
			}
		}
	}
	return o, nil
}

// upstreams normalizes UPSTREAM arguments (ip, ip:port, dns://, tls://) and
// refuses any that is this server itself, naming the Corefile line.
func upstreams(c *caddy.Controller, what string, args []string, l listener) ([]string, error) {
	addrs, err := parse.HostPortOrFile(args...)
	if err != nil {
		return nil, c.Errf("%s: %v", what, err)
	}
	for i, a := range addrs {
		trans, hostport := parse.Transport(a)
		switch trans {
		case transport.DNS:
			addrs[i] = hostport
		case transport.TLS:
		default:
			return nil, c.Errf("%s: %s: only dns:// and tls:// upstreams are supported", what, a)
		}
		if err := l.self(addrs[i]); err != nil {
			return nil, c.Errf("%s: %v; forwarding there would loop", what, err)
		}
	}
	return addrs, nil
}
