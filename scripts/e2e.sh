#!/usr/bin/env bash
# Runs the end-to-end tests (go test ARGS...) inside a network namespace of
# their own that has only loopback (unshare -n), so that no test can reach
# beyond the machine by mistake: every upstream, peer, parent and
# health-check target must be on 127.0.0.0/8, ::1 or a namespace the test
# creates itself. Modules are downloaded and the packages resolved
# outside first (the namespace has no route to the module proxy); inside,
# GOPROXY=off makes any download attempt fail loudly instead of hanging.
#
# FLEETDNS_NETNS=0 runs them in the machine's own namespace (for a user
# without the privilege to unshare).
set -euo pipefail
cd "$(dirname "$0")/.."

go mod download
# Resolve every package the tests import while the proxy is reachable. Not
# a build: go test links the test binaries again inside (links are not
# cached), so building them here too cost a whole second link of every
# test binary, about 50 s of two cores.
pkgs=()
for a in "$@"; do
  case "$a" in ./* | ../*) pkgs+=("$a") ;; esac
done
if [ ${#pkgs[@]} -gt 0 ]; then
  go list -deps -test "${pkgs[@]}" >/dev/null
fi

if [ "${FLEETDNS_NETNS:-1}" = 0 ]; then
  exec go test "$@"
fi
if ! unshare --net true 2>/dev/null; then
  echo "e2e: cannot unshare a network namespace (not root?); set FLEETDNS_NETNS=0 to run without one" >&2
  exit 1
fi
exec unshare --net -- env GOPROXY=off GOFLAGS="${GOFLAGS:-}" bash -c 'ip link set lo up && exec go test "$@"' e2e "$@"
