// Package fleet benchmarks how a fleet of GSLB clusters learns, side by
// side in one run: today's per-host protocol (every peer asked
// `localtargets-<host>` A and AAAA for every host, once per refresh: gslb
// without `fleet`) against the fleet protocol (`fleet { key FILE }`: one SOA
// check per peer per refresh, NOTIFY and IXFR on change; plugin/gslb
// README.md, "The fleet protocol").
//
// Each mode starts N clusters as coredns processes (directory source,
// static peers, the shipped refresh of 30 s), every cluster declaring the
// same H roundRobin hosts with a target of its own, and measures per
// cluster: the peer queries it sends per second with nothing changing (from
// its own metrics: per-host query durations and fleet checks), its CPU
// seconds per minute idle (/proc/PID/stat), its RSS, and the time from a
// readiness change in the first cluster (a changed target of one host,
// written into its directory) to every other cluster's new answer, p50 and
// p99.
//
// It is a test that skips unless FLEETDNS_BENCH=1, so CI never runs it:
//
//	make build && FLEETDNS_BENCH=1 FLEETDNS_COREDNS=$PWD/bin/coredns \
//	    scripts/e2e.sh -count=1 -v -timeout 40m -run TestFleetBench ./test/bench/fleet
//
// Knobs (environment): FLEETDNS_BENCH_CLUSTERS (8), FLEETDNS_BENCH_HOSTS
// (10000), FLEETDNS_BENCH_IDLE (seconds of the idle window, 60),
// FLEETDNS_BENCH_CHANGES (readiness changes with the fleet protocol, 200),
// FLEETDNS_BENCH_PERHOST_CHANGES (with the per-host protocol, where each
// takes up to a refresh, 6), FLEETDNS_BENCH_CONVERGE (seconds a mode may
// take to converge before it is measured anyway and said not to have, 120),
// FLEETDNS_BENCH_MODES (perhost,fleet).
package fleet
