// Package resolve resolves the host names that load balancers give in an
// object's status (cloud load balancers do) to addresses, in the background,
// so that a GSLB or localtargets answer carries addresses: the query path
// reads the last good addresses and never waits for a lookup. It imports no
// plugin code; the API feed tracks names per object key and is told which
// keys changed.
package resolve

import (
	"net/netip"
	"time"

	clog "github.com/coredns/coredns/plugin/pkg/log"
)

var log = clog.NewWithPlugin("k8scrd")

// Resolver resolves status host names, A and AAAA, each re-resolved at its
// TTL clamped to [floor, ceiling], at most maxNames names. Safe for
// concurrent use.
type Resolver struct{ r *resolver }

// New returns a Resolver asking servers ("host:port", in order on failure),
// or the nameservers of /etc/resolv.conf when servers is empty. changed is
// called from Run's goroutine, never concurrently, with the keys whose names'
// addresses changed.
func New(servers []string, floor, ceiling time.Duration, maxNames int, changed func(keys []string)) *Resolver {
	return &Resolver{newResolver(servers, floor, ceiling, maxNames, changed)}
}

// Track sets the host names the object at key needs; nil stops tracking it.
// annotated is true when its authors declared them (k8gb.io/exposed-hostnames)
// rather than a controller writing them in status: those come second when
// the names are shared out.
func (r *Resolver) Track(key string, hostnames []string, annotated bool) {
	r.r.track(key, hostnames, annotated)
}

// Addrs returns the last good addresses of hostname, sorted; nil when it is
// not resolved (yet, or beyond the cap).
func (r *Resolver) Addrs(hostname string) []netip.Addr { return r.r.addrs(hostname) }

// Run resolves the names due until stop is closed.
func (r *Resolver) Run(stop <-chan struct{}) { r.r.run(stop) }
