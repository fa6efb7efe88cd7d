// Package scale holds fleetdns's scale benchmarks against a real
// kube-apiserver + etcd (test/harness): k8scrd at 1k, 10k and 100k endpoints
// (start-to-ready, RSS, queries per second with dnsperf, CPU time per query)
// and DNSEndpoint create-to-first-answer propagation over 200 objects.
// sources_test.go (TestSourcesScale) serves 10,000 hosts derived from
// Ingresses (each with its Service and EndpointSlice) beside the same hosts
// as DNSEndpoints: start-to-ready, RSS, dnsperf q/s for A and localtargets-
// queries, and EndpointSlice readiness change -> localtargets- answer.
//
// They are tests that skip unless FLEETDNS_BENCH=1, so CI never runs them:
//
//	FLEETDNS_BENCH=1 FLEETDNS_COREDNS=$PWD/bin/coredns \
//	    go test -count=1 -v -timeout 60m ./test/bench/scale
//
// Knobs (environment): FLEETDNS_BENCH_SIZES (endpoints, comma list, default
// 1000,10000,100000), FLEETDNS_BENCH_ROUNDS (3), FLEETDNS_BENCH_SECONDS
// (dnsperf seconds per run, 10), FLEETDNS_BENCH_PROPAGATION (objects, 200),
// FLEETDNS_BENCH_PROP_BACKGROUND (endpoints loaded beside the propagation
// run; default the largest size, 0 for none), FLEETDNS_BENCH_STRICT=1 (fail
// when a goal is missed; otherwise goals are only reported),
// FLEETDNS_BENCH_CONTROL=0 (leave out the stock file plugin control),
// FLEETDNS_BENCH_SOURCES (Ingress hosts, 10000), FLEETDNS_BENCH_SOURCE_CHANGES
// (readiness changes measured, 200), FLEETDNS_BENCH_CREATORS (parallel API
// clients creating objects, 8), FLEETDNS_BENCH_BASE (TestSourcesScale: a
// second coredns binary, started beside the one under test in every round,
// for a before/after comparison in one run), FLEETDNS_BENCH_PPROF (a folder
// for heap profiles; also reads the runtime's heap in use and live heap),
// FLEETDNS_BENCH_OUT (append the markdown tables to this file).
package scale
