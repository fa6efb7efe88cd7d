package splitdns

import (
	"crypto/tls"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coredns/coredns/plugin/pkg/parse"
	"github.com/coredns/coredns/plugin/pkg/proxy"
	"github.com/coredns/coredns/plugin/pkg/transport"
)

// upstream is one upstream server, shared by every route that names it, so
// that a thousand routes to one server use one connection pool and one
// health state.
type upstream struct {
	addr  string // as configured, with its transport: "10.0.0.1:53", "tls://10.0.0.9:853"
	proxy *proxy.Proxy
	// maxFails is the route's max_fails: failed health checks in a row
	// beyond it hold the upstream down; 0 never does.
	maxFails uint32
	interval time.Duration // health_check: how often a failed upstream is checked
	// answered is set once the upstream has answered a health check or a
	// query; readiness waits for it.
	answered atomic.Bool
}

// down reports whether health checks hold the upstream down.
func (u *upstream) down() bool { return u.proxy.Down(u.maxFails) }

// pool holds the upstreams of one plugin instance, keyed by address and
// the settings that live in the proxy (upstreamKey). Routes
// from the Corefile and from kube-dns files take their upstreams from here.
type pool struct {
	mu       sync.Mutex
	m        map[string]*upstream
	started  bool
	interval time.Duration // the block's health_check: readiness probes
	timeout  time.Duration // read timeout of one upstream
	tls      *tls.Config   // for tls:// upstreams
	// tlsByName holds tls with each route's tls_servername, one per name,
	// so that upstreams verified against one name share a session cache.
	tlsByName map[string]*tls.Config
}

func newPool() *pool {
	return &pool{m: map[string]*upstream{}, interval: defaultHealthCheck, timeout: defaultTimeout, tlsByName: map[string]*tls.Config{}}
}

// get returns the upstream for addr with the proxy settings of o, creating
// it the first time. addr has been normalized by parse.HostPortOrFile.
func (p *pool) get(addr string, o routeOptions) *upstream {
	key := upstreamKey(addr, o)
	p.mu.Lock()
	defer p.mu.Unlock()
	if u, ok := p.m[key]; ok {
		return u
	}
	trans, hostport := parse.Transport(addr)
	px := proxy.NewProxy("splitdns", hostport, trans)
	if trans == transport.TLS {
		px.SetTLSConfig(p.tlsFor(o.tlsServerName))
	}
	px.SetReadTimeout(p.timeout)
	px.SetExpire(o.expire)
	hc := px.GetHealthchecker()
	hc.SetRecursionDesired(!o.hcNoRec)
	hc.SetDomain(o.hcDomain)
	if o.forceTCP && trans == transport.DNS {
		hc.SetTCPTransport() // as forward: check the way queries go
	}
	u := &upstream{addr: addr, proxy: px, maxFails: o.maxFails, interval: o.healthCheck}
	p.m[key] = u
	if p.started {
		px.Start(u.interval)
	}
	return u
}

// tlsFor returns the block's TLS configuration verifying name; p.mu is held.
func (p *pool) tlsFor(name string) *tls.Config {
	if c, ok := p.tlsByName[name]; ok {
		return c
	}
	c := new(tls.Config)
	if p.tls != nil {
		c = p.tls.Clone()
	}
	c.ServerName = name
	c.ClientSessionCache = tls.NewLRUClientSessionCache(0)
	p.tlsByName[name] = c
	return c
}

// start starts every upstream's connection manager and health probe.
func (p *pool) start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.started = true
	for _, u := range p.m {
		u.proxy.Start(u.interval)
	}
}

// stop stops every upstream, after grace, so that queries still in flight on
// them finish (a Corefile reload shuts the old instance down while its last
// queries are being answered).
func (p *pool) stop(grace time.Duration) {
	p.mu.Lock()
	us := make([]*upstream, 0, len(p.m))
	for _, u := range p.m {
		us = append(us, u)
	}
	p.m = map[string]*upstream{}
	started := p.started
	p.started = false
	p.mu.Unlock()
	if !started {
		return
	}
	time.AfterFunc(grace, func() {
		for _, u := range us {
			u.proxy.Stop()
		}
	})
}

// retain drops (and later stops) every upstream that t does not use.
func (p *pool) retain(t *table, grace time.Duration) {
	used := map[*upstream]bool{}
	for _, r := range t.routes() {
		for _, u := range r.upstreams {
			used[u] = true
		}
	}
	p.mu.Lock()
	var gone []*upstream
	for addr, u := range p.m {
		if !used[u] {
			gone = append(gone, u)
			delete(p.m, addr)
			upstreamHealthy.DeleteLabelValues(addr)
		}
	}
	started := p.started
	p.mu.Unlock()
	if !started || len(gone) == 0 {
		return
	}
	time.AfterFunc(grace, func() {
		for _, u := range gone {
			u.proxy.Stop()
		}
	})
}

// all returns the upstreams in the pool.
func (p *pool) all() []*upstream {
	p.mu.Lock()
	defer p.mu.Unlock()
	us := make([]*upstream, 0, len(p.m))
	for _, u := range p.m {
		us = append(us, u)
	}
	return us
}
