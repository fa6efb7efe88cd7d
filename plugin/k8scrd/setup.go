package k8scrd

import (
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/derive"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/dirfeed"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/kubefeed"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	clog "github.com/coredns/coredns/plugin/pkg/log"
	pkgparse "github.com/coredns/coredns/plugin/pkg/parse"
	"github.com/coredns/coredns/plugin/transfer"
	"github.com/fleetdns/fleetdns/internal/corefile"
	"github.com/fleetdns/fleetdns/internal/store"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/builder"
	"github.com/miekg/dns"
	"k8s.io/apimachinery/pkg/labels"
)

var log = clog.NewWithPlugin("k8scrd")

func init() { plugin.Register("k8scrd", setup) }

// config is the parsed Corefile stanza.
type config struct {
	derive.Options // what the derivations read: zones, classes, naming words
	kubeconfig     string
	context        string
	directory      string
	namespaces     []string
	labels         string
	selector       labels.Selector // parsed labels, nil for everything
	strict         bool
	grants         builder.Grants // tenant lines: who may publish at or below which suffix
	ttl            uint32
	negTTL         uint32
	mname          string
	rname          string
	// refresh, retry and expire are the SOA timers (`soa MNAME RNAME
	// [REFRESH RETRY EXPIRE]`).
	refresh, retry, expire uint32
	// resources are the kinds served (`resources`; default DNSEndpoint).
	resources []string
	// resolvers resolve status host names (`resolver ADDRESS...`, host:port).
	resolvers []string
	// startupWait bounds how long start-up waits for the first sync, as the
	// kubernetes plugin does; queries before the sync get SERVFAIL.
	startupWait time.Duration
}

// buildConfig is what the builder needs of the block.
func (cfg *config) buildConfig() builder.Config {
	return builder.Config{
		Zones: cfg.Zones, TTL: cfg.ttl, NegTTL: cfg.negTTL,
		MName: cfg.mname, RName: cfg.rname, Refresh: cfg.refresh, Retry: cfg.retry, Expire: cfg.expire,
		Strict: cfg.strict, Grants: cfg.grants, FileVersions: cfg.directory != "",
	}
}

// serves reports whether kind is among the resources served.
func (cfg *config) serves(kind string) bool { return slices.Contains(cfg.resources, kind) }

// feedConfig is what the API feed needs of the block.
func (cfg *config) feedConfig() *kubefeed.Config {
	return &kubefeed.Config{
		Options: cfg.Options, Kubeconfig: cfg.kubeconfig, Context: cfg.context,
		Namespaces: cfg.namespaces, Labels: cfg.labels, Resources: cfg.resources,
		Resolvers: cfg.resolvers, TTL: cfg.ttl,
	}
}

// dirConfig is what the folder feed needs of the block.
func (cfg *config) dirConfig() *dirfeed.Config {
	return &dirfeed.Config{
		Options: cfg.Options, Directory: cfg.directory, Namespaces: cfg.namespaces,
		Selector: cfg.selector, Resources: cfg.resources, TTL: cfg.ttl,
	}
}

func newConfig() *config {
	return &config{ttl: 30, negTTL: 30, refresh: 7200, retry: 1800, expire: 86400, startupWait: 5 * time.Second, resources: []string{object.KindDNSEndpoint}}
}

func setup(c *caddy.Controller) error {
	k, err := parse(c)
	if err != nil {
		return plugin.Error("k8scrd", err)
	}
	c.OnStartup(func() error {
		// Tenancy guards literal localtargets- records under the prefix
		// that the block's localtargets answers with.
		if t := store.TargetsFromConfig(c); t != nil {
			k.builder.SetPrefix(strings.ToLower(t.Prefix()))
		}
		// With transfer in the block, secondaries are notified of changes.
		if x, ok := dnsserver.GetConfig(c).Handler("transfer").(*transfer.Transfer); ok {
			k.notifier = builder.NewNotifier(x, nil)
		}
		return k.start()
	})
	c.OnShutdown(k.shutdown)
	dnsserver.GetConfig(c).AddPlugin(func(next plugin.Handler) plugin.Handler {
		k.Next = next
		return k
	})
	return nil
}

func parse(c *caddy.Controller) (*K8sCRD, error) {
	cfg := newConfig()
	k := &K8sCRD{cfg: cfg}
	i := 0
	for c.Next() {
		if i > 0 {
			return nil, plugin.ErrOnce
		}
		i++
		k.Zones = plugin.OriginsFromArgsOrServerBlock(corefile.Args(c), c.ServerBlockKeys)
		for c.NextBlock() {
			switch c.Val() {
			case "kubeconfig":
				if cfg.directory != "" {
					return nil, errTwoSources(c)
				}
				args := corefile.Args(c)
				if len(args) < 1 || len(args) > 2 {
					return nil, c.ArgErr()
				}
				cfg.kubeconfig = args[0]
				if len(args) == 2 {
					cfg.context = args[1]
				}
			case "directory":
				if cfg.kubeconfig != "" {
					return nil, errTwoSources(c)
				}
				if !corefile.NextArg(c) {
					return nil, c.ArgErr()
				}
				cfg.directory = c.Val()
				if !filepath.IsAbs(cfg.directory) {
					cfg.directory = filepath.Join(dnsserver.GetConfig(c).Root, cfg.directory)
				}
				if corefile.NextArg(c) {
					return nil, c.ArgErr()
				}
			case "namespaces":
				cfg.namespaces = corefile.Args(c)
				if len(cfg.namespaces) == 0 {
					return nil, c.ArgErr()
				}
			case "labels":
				args := corefile.Args(c)
				if len(args) == 0 {
					return nil, c.ArgErr()
				}
				sel := args[0]
				for _, a := range args[1:] {
					sel += " " + a
				}
				parsed, err := labels.Parse(sel)
				if err != nil {
					return nil, c.Errf("labels %q: %v", sel, err)
				}
				cfg.labels, cfg.selector = sel, parsed
			case "tenancy":
				if !corefile.NextArg(c) {
					return nil, c.ArgErr()
				}
				switch c.Val() {
				case "shared":
					cfg.strict = false
				case "strict":
					cfg.strict = true
				default:
					return nil, c.Errf("tenancy %q: want shared or strict", c.Val())
				}
				if corefile.NextArg(c) {
					return nil, c.ArgErr()
				}
			case "tenant":
				args := corefile.Args(c)
				if len(args) < 2 {
					return nil, c.ArgErr()
				}
				ns := args[0]
				for _, a := range args[1:] {
					suffix := strings.ToLower(dns.Fqdn(a))
					if _, ok := dns.IsDomainName(suffix); !ok {
						return nil, c.Errf("tenant %s: %q is not a domain name", ns, a)
					}
					if plugin.Zones(k.Zones).Matches(suffix) == "" {
						return nil, c.Errf("tenant %s: %s is outside the zones %v", ns, suffix, k.Zones)
					}
					if other := cfg.grants.Add(ns, suffix); other != "" {
						return nil, c.Errf("tenant %s %s: namespace %q is granted the same suffix; two equally specific grants cannot both hold it", ns, suffix, other)
					}
				}
			case "ttl", "negttl":
				word := c.Val()
				if !corefile.NextArg(c) {
					return nil, c.ArgErr()
				}
				v, err := strconv.ParseUint(c.Val(), 10, 32)
				if err != nil || v > object.MaxTTL {
					return nil, c.Errf("%s %q: want seconds, 0 to %d", word, c.Val(), object.MaxTTL)
				}
				if word == "ttl" {
					cfg.ttl = uint32(v)
				} else {
					cfg.negTTL = uint32(v)
				}
				if corefile.NextArg(c) {
					return nil, c.ArgErr()
				}
			case "soa":
				args := corefile.Args(c)
				if len(args) != 2 && len(args) != 5 {
					return nil, c.ArgErr()
				}
				if len(args) == 5 {
					var t [3]uint32
					for j, a := range args[2:] {
						v, err := strconv.ParseUint(a, 10, 32)
						if err != nil || v == 0 || v > math.MaxInt32 {
							return nil, c.Errf("soa %s %q: want seconds, 1 to %d", []string{"refresh", "retry", "expire"}[j], a, math.MaxInt32)
						}
						t[j] = uint32(v)
					}
					if t[1] >= t[0] || t[2] <= t[0] {
						return nil, c.Errf("soa: want retry < refresh < expire (RFC 1912 §2.2), have %d %d %d", t[0], t[1], t[2])
					}
					cfg.refresh, cfg.retry, cfg.expire = t[0], t[1], t[2]
					args = args[:2]
				}
				for j, a := range args {
					if _, ok := dns.IsDomainName(a); !ok {
						return nil, c.Errf("soa: %q is not a domain name", a)
					}
					args[j] = dns.Fqdn(a)
				}
				cfg.mname, cfg.rname = args[0], args[1]
			case "resources":
				args := corefile.Args(c)
				if len(args) == 0 {
					return nil, c.ArgErr()
				}
				cfg.resources = cfg.resources[:0]
				for _, a := range args {
					i := slices.IndexFunc(object.Kinds, func(k string) bool { return strings.EqualFold(k, a) })
					if i < 0 {
						return nil, c.Errf("resources %q: want some of %s", a, strings.Join(object.Kinds, " "))
					}
					if !slices.Contains(cfg.resources, object.Kinds[i]) {
						cfg.resources = append(cfg.resources, object.Kinds[i])
					}
				}
			case "ingress_class", "gateway_class":
				word := c.Val()
				args := corefile.Args(c)
				if len(args) == 0 {
					return nil, c.ArgErr()
				}
				if word == "ingress_class" {
					cfg.IngressClasses = args
				} else {
					cfg.GatewayClasses = args
				}
			case "resolver":
				args := corefile.Args(c)
				if len(args) == 0 {
					return nil, c.ArgErr()
				}
				servers, err := pkgparse.HostPortOrFile(args...)
				if err != nil {
					return nil, c.Errf("resolver: %v", err)
				}
				cfg.resolvers = servers
			case "hostname_annotation", "service_names", "relative_hosts":
				if err := parseNameConvention(c, &cfg.Names); err != nil {
					return nil, err
				}
			case "fallthrough":
				k.Fall.SetZonesFromArgs(corefile.Args(c))
			default:
				return nil, c.Errf("unknown property %q", c.Val())
			}
		}
	}
	cfg.Zones = k.Zones
	k.builder = builder.New(cfg.buildConfig(), &k.snap)
	if cfg.directory != "" {
		k.source = dirfeed.New(cfg.dirConfig(), k.builder)
	} else {
		k.source = kubefeed.New(cfg.feedConfig(), k.builder)
	}
	return k, nil
}

func errTwoSources(c *caddy.Controller) error {
	return c.Err("directory and kubeconfig exclude each other: one source per k8scrd")
}

// source feeds objects to the builder until stopped.
type source interface {
	Start() error
	Stop()
}

// start runs the builder and the source, then waits, bounded, for the first sync.
func (k *K8sCRD) start() error {
	k.stop = make(chan struct{})
	var notify func(zones []string)
	if k.notifier != nil {
		notify = k.notifier.Changed
		go k.notifier.Run(k.stop)
	}
	k.builder.OnChange(notify, k.subs.Publish)
	changed, cancel := k.subs.Subscribe()
	defer cancel()
	go k.builder.Run(k.stop)
	if err := k.source.Start(); err != nil {
		return plugin.Error("k8scrd", err)
	}
	deadline := time.NewTimer(k.cfg.startupWait)
	defer deadline.Stop()
	for waiting := true; waiting && !k.snap.Load().Synced; {
		select {
		case <-changed:
		case <-deadline.C:
			waiting = false
		}
	}
	if !k.snap.Load().Synced {
		log.Warningf("Starting without a first sync after %s: answering SERVFAIL for %v until it completes", k.cfg.startupWait, k.Zones)
	}
	k.started.Store(true)
	return nil
}

func (k *K8sCRD) shutdown() error {
	k.started.Store(false)
	k.source.Stop()
	if k.stop != nil {
		close(k.stop)
		k.stop = nil
	}
	return nil
}

// parseNameConvention parses one of the words `hostname_annotation KEY...`,
// `service_names` and `relative_hosts` at c's cursor into n.
func parseNameConvention(c *caddy.Controller, n *derive.NameConventions) error {
	switch word := c.Val(); word {
	case "hostname_annotation":
		args := corefile.Args(c)
		if len(args) == 0 {
			return c.ArgErr()
		}
		n.Annotations = n.Annotations[:0]
		for _, a := range args {
			if !slices.Contains(object.HostnameAnnotations, a) {
				return c.Errf("hostname_annotation %q: want some of %s", a, strings.Join(object.HostnameAnnotations, " "))
			}
			if slices.Contains(n.Annotations, a) {
				return c.Errf("hostname_annotation %q: named twice", a)
			}
			n.Annotations = append(n.Annotations, a)
		}
	case "service_names", "relative_hosts":
		if corefile.NextArg(c) {
			return c.ArgErr()
		}
		if word == "service_names" {
			n.ServiceNames = true
		} else {
			n.RelativeHosts = true
		}
	default:
		return c.Errf("unknown property %q", word)
	}
	return nil
}
