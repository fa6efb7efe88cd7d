// Package chart tests charts/fleetdns with a real helm (built from the Go
// module proxy by scripts/test-deps.sh) against a real API server: helm lint
// and helm template for each shape, helm install over a stock CoreDNS in
// kube-system, and a comparison with the kustomize tree (deploy/kube-system,
// deploy/gslb).
package chart
