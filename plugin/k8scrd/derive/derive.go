// Package derive holds the derivations: what one of the cluster's objects
// (an Ingress, a Service, an HTTPRoute, GRPCRoute or TLSRoute, a k8gb Gslb)
// declares for the zones, read from the object and the world around it
// (its Services' EndpointSlices, its Gateways, a default IngressClass). One
// table (table.go) maps a kind to its derivation, one file per kind; both
// feeds derive every object through it, and the lint through the same
// functions. A derivation reads Options, never the Corefile, and imports no
// plugin code.
package derive

import clog "github.com/coredns/coredns/plugin/pkg/log"

var log = clog.NewWithPlugin("k8scrd")
