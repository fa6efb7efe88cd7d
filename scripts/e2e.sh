#!/usr/bin/env bash
# Runs the end-to-end tests (go test ARGS...) inside a network namespace of
# their own that has only loopback (unshare -n), so that no test can reach
# beyond the machine by mistake: every upstream, peer, parent and
# health-check target must be on 127.0.0.0/8, ::1 or a namespace the test
# creates itself. Modules are downloaded and the test binaries built
# outside first (the namespace has no route to the module proxy); inside,
# GOPROXY=off makes any download attempt fail loudly instead of hanging.
#
# FLEETDNS_NETNS=0 runs them in the machine's own namespace (for a user
# without the privilege to unshare).
set -euo pipefail
cd "$(dirname "$0")/.."

go mod download
# Build (and cache) every test binary while the proxy is reachable.
go test -count=1 -exec /bin/true "$@" >/dev/null

if [ "${FLEETDNS_NETNS:-1}" = 0 ]; then
  exec go test "$@"
fi
if ! unshare --net true 2>/dev/null; then
  echo "e2e: cannot unshare a network namespace (not root?); set FLEETDNS_NETNS=0 to run without one" >&2
  exit 1
fi
exec unshare --net -- env GOPROXY=off GOFLAGS="${GOFLAGS:-}" bash -c 'ip link set lo up && exec go test "$@"' e2e "$@"
