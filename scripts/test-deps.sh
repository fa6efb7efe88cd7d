#!/usr/bin/env bash
# Installs everything the tests need on a fresh machine, and caches what is
# expensive outside the clone so a second run takes seconds:
#   - Debian packages: dig, kdig, dnsperf, NSD, Knot, Unbound, PowerDNS Recursor, iproute2
#     (and setcap, unshare, setpriv for test/deploy)
#   - kube-apiserver, kubectl and etcd, built from the Go module proxy
#     (no download sites are reachable here, so no release tarballs).
#   - helm (test/chart), built from the Go module proxy likewise, and linked
#     beside kubectl.
# Prints the folder holding the Kubernetes binaries on its last line.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.37.2}
STAGING_VERSION=${STAGING_VERSION:-v0.37.2}
ETCD_VERSION=${ETCD_VERSION:-v3.7.0}
HELM_VERSION=${HELM_VERSION:-v3.22.0}
CACHE=${FLEETDNS_CACHE:-/var/cache/fleetdns}
BIN="$CACHE/k8s-$K8S_VERSION-etcd-$ETCD_VERSION/bin"

log() { echo "test-deps: $*" >&2; }

# valgrind: make bench-instr (callgrind); prometheus: promtool for
# test/monitoring; runc, ca-certificates: test/image and make image;
# zonemaster-cli: test/k8scrd (replicas' SOA serials); bind9: parents for
# publish_delegation and delv; nftables: the witness partition; dnsviz:
# DNSSEC judging; pdns-server, pdns-backend-sqlite3, sqlite3: a PowerDNS
# parent for publish_delegation; pdns-recursor:
# test/gslb (ECS caching); the rest: the tests and make bench.
apt_pkgs=(dnsutils knot-dnsutils dnsperf nsd knot unbound pdns-recursor dnsdist iproute2 procps psmisc openssl libcap2-bin util-linux valgrind prometheus runc ca-certificates zonemaster-cli bind9 nftables dnsviz pdns-server pdns-backend-sqlite3 sqlite3)
missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
# The packaged daemons start themselves on :53 when installed; the tests run
# their own instances on loopback, so stop any system copy that would hold ports.
for svc in nsd knot unbound dnsdist named; do
  pkill -x "$svc" 2>/dev/null || true
  pkill -x "${svc}d" 2>/dev/null || true
done
# Debian's pdns-recursor starts only as a systemd unit (no init script):
# stop the unit, never the tests' own recursors.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet pdns-recursor 2>/dev/null; then
  systemctl stop pdns-recursor >&2 || true
fi
# Only promtool is used: stop the packaged Prometheus server if its install
# started it (with systemd; a container's policy-rc.d keeps it from starting).
if command -v systemctl >/dev/null && systemctl is-active --quiet prometheus 2>/dev/null; then
  systemctl disable --now prometheus >&2 || true
fi

# test/monitoring validates its objects against the prometheus-operator CRDs
# of this release, read from the Go module cache (not a fleetdns dependency).
PROMETHEUS_OPERATOR_VERSION=${PROMETHEUS_OPERATOR_VERSION:-v0.94.0}
(cd / && GOFLAGS= GOTOOLCHAIN=local go mod download "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION" >&2)

mkdir -p "$BIN"
# helm: `go install pkg@version` builds it against its own go.mod (no
# replace directives in helm's), in a folder of its own per version, with
# the ldflags of helm's Makefile: its version, and the Kubernetes version
# (its client-go's) that `helm template` and `helm lint` assume.
HELM="$CACHE/helm-$HELM_VERSION/helm"
if [ ! -x "$HELM" ]; then
  log "building helm $HELM_VERSION (cold: about 4 minutes of CPU)"
  mkdir -p "$CACHE/helm-$HELM_VERSION"
  # Outside the fleetdns module, so that its go.mod and go.sum stay as they are.
  helm_mod=$(cd / && GOFLAGS= GOTOOLCHAIN=local go mod download -json "helm.sh/helm/v3@$HELM_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
  k8s_minor=$(sed -n 's/^[[:space:]]*k8s.io\/client-go v0\.\([0-9]*\)\..*/\1/p' "$helm_mod")
  [ -n "$k8s_minor" ] || { log "no k8s.io/client-go in $helm_mod"; exit 1; }
  (cd / && GOBIN="$CACHE/helm-$HELM_VERSION" GOFLAGS= GOTOOLCHAIN=local CGO_ENABLED=0 go install -trimpath -ldflags "-s -w \
    -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION \
    -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$k8s_minor \
    -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$k8s_minor" \
    "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >&2)
fi
ln -sfn "$HELM" "$BIN/helm"

if [ -x "$BIN/kube-apiserver" ] && [ -x "$BIN/kubectl" ] && [ -x "$BIN/etcd" ]; then
  log "cached: $BIN"
  echo "$BIN"
  exit 0
fi

staging=(api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider
  cluster-bootstrap code-generator component-base component-helpers controller-manager cri-api
  cri-client cri-streaming csi-translation-lib dynamic-resource-allocation endpointslice externaljwt
  kms kube-aggregator kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics
  mount-utils pod-security-admission sample-apiserver streaming)

if [ ! -x "$BIN/kube-apiserver" ] || [ ! -x "$BIN/kubectl" ]; then
  mod="$CACHE/build/kube"
  mkdir -p "$mod"
  log "building kube-apiserver and kubectl $K8S_VERSION (cold: about 10 minutes)"
  {
    echo "module fleetdns.local/kubebuild"
    echo
    echo "go 1.26"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    echo "replace ("
    for s in "${staging[@]}"; do echo "	k8s.io/$s => k8s.io/$s $STAGING_VERSION"; done
    echo ")"
  } > "$mod/go.mod"
  (
    cd "$mod"
    export GOFLAGS=-mod=mod GOTOOLCHAIN=local
    go get "k8s.io/kubernetes/cmd/kube-apiserver@$K8S_VERSION" "k8s.io/kubernetes/cmd/kubectl@$K8S_VERSION" >&2
    CGO_ENABLED=0 go build -o "$BIN/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver >&2
    CGO_ENABLED=0 go build -o "$BIN/kubectl" k8s.io/kubernetes/cmd/kubectl >&2
  )
fi

if [ ! -x "$BIN/etcd" ]; then
  mod="$CACHE/build/etcd"
  mkdir -p "$mod"
  log "building etcd $ETCD_VERSION"
  cat > "$mod/go.mod" <<GOMOD
module fleetdns.local/etcdbuild

go 1.26
GOMOD
  cat > "$mod/main.go" <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  (
    cd "$mod"
    export GOFLAGS=-mod=mod GOTOOLCHAIN=local
    go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >&2
    go mod tidy >&2
    CGO_ENABLED=0 go build -o "$BIN/etcd" . >&2
  )
fi

log "built: $BIN"
echo "$BIN"
