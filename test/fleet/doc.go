// Package fleet holds the end-to-end tests of the fleet protocol on the wire
// (plugin/gslb/fleet) against a stock secondary: Debian's Knot DNS follows
// the view of a cluster (the coredns binary, a directory source, `fleet {
// key FILE also_notify KNOT }`) with the fleet's TSIG key, by AXFR, then,
// after a change of the cluster's manifests, NOTIFY and IXFR, and serves the
// same records; kdig reads the view; unsigned and wrongly signed requests
// are refused.
package fleet
