package store

import (
	"errors"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
)

// ErrNoStore is returned by FromConfig for a server block whose plugins
// offer no store (k8scrd is not in the block).
var ErrNoStore = errors.New("no plugin in this server block offers a record store (k8scrd)")

// FromConfig returns the store of c's server block: the first plugin of the
// block, in directive order, that is a Provider. Call it in OnStartup, when
// every plugin of the block is set up.
func FromConfig(c *caddy.Controller) (Store, error) {
	for _, h := range dnsserver.GetConfig(c).Handlers() {
		if p, ok := h.(Provider); ok {
			return p.Store(), nil
		}
	}
	return nil, ErrNoStore
}

// TargetsFromConfig returns the Targets of c's server block (localtargets),
// nil when no plugin of the block offers them. Call it in OnStartup.
func TargetsFromConfig(c *caddy.Controller) Targets {
	for _, h := range dnsserver.GetConfig(c).Handlers() {
		if t, ok := h.(Targets); ok {
			return t
		}
	}
	return nil
}

// FleetFromConfig returns the Fleet of c's server block (gslb), nil when no
// plugin of the block offers one. Call it in OnStartup.
func FleetFromConfig(c *caddy.Controller) Fleet {
	for _, h := range dnsserver.GetConfig(c).Handlers() {
		if f, ok := h.(Fleet); ok {
			return f
		}
	}
	return nil
}
