// Package object holds the objects k8scrd serves from and the records they
// make: a DNSEndpoint (or what an Ingress, Service, route or Gslb declares)
// validated and converted into endpoints grouped by name, each endpoint's
// records built once. Endpoints that cannot be served are returned with a
// reason (the label of coredns_k8scrd_invalid_endpoints_total) and left out.
//
// It also holds what the rest of k8scrd shares of the cluster's objects:
// the kinds, groups, annotations and labels read (kinds.go), k8gb's Gslb
// types (gslb.go), the informer transforms that keep only what the
// derivations read (transform.go, as CoreDNS's kubernetes/object.ToService),
// and the Sink the feeds hand objects to (sink.go). It imports no plugin code.
package object
