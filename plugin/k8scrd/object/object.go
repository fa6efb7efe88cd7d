// Package object holds the objects k8scrd serves from and the records they
// make: a DNSEndpoint (or what an Ingress, Service, route or Gslb declares)
// validated and converted into endpoints grouped by name, each endpoint's
// records built once. Endpoints that cannot be served are returned with a
// reason (the label of coredns_k8scrd_invalid_endpoints_total) and left out.
// It imports no plugin code.
package object
