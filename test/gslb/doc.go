// Package gslb holds the multi-cluster end-to-end tests of localtargets and
// gslb: several real coredns processes, one per cluster, each on its own
// loopback address with its own DNSEndpoint manifests, plus a parent zone
// instance whose k8scrd serves the NS delegation and glue that the clusters'
// peers_from_ns discovers. Faults are real: SIGSTOP, SIGKILL, a peer that
// answers garbage.
//
// bench.sh beside this file measures a gslb host against a plain k8scrd host
// on the same server with dnsperf, and client latency while a peer is stopped.
package gslb
