#!/bin/sh
# Steady-state q/s of a gslb host with two peers against a plain k8scrd host
# on the same server (dnsperf, alternating rounds, server and dnsperf pinned
# to different CPUs), then client latency while one peer is SIGSTOPped.
#
#   test/gslb/bench.sh                      # 5 rounds of 10 s
#   FLEETDNS_BENCH_ROUNDS=3 FLEETDNS_BENCH_SECONDS=5 test/gslb/bench.sh
#   FLEETDNS_BENCH_OUT=/tmp/bench.md test/gslb/bench.sh   # also append the table there
#
# FLEETDNS_COREDNS=bin/coredns uses a built binary instead of building one.
set -eu
cd "$(dirname "$0")/../.."
FLEETDNS_BENCH=1 exec go test -count=1 -timeout 30m -run '^TestBenchmarkGSLBAgainstK8scrd$' -v ./test/gslb
