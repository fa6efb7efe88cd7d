package object

import (
	"github.com/coredns/coredns/plugin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// InvalidEndpoints counts what cannot be served, by the reasons this
// package names (Reason*, and "reference" for a Gslb's refused
// reference). Every part that refuses an endpoint counts it here: the
// feeds as they read objects, the builder as it refuses oversized RRsets.
var InvalidEndpoints = promauto.NewCounterVec(prometheus.CounterOpts{
	Namespace: plugin.Namespace,
	Subsystem: "k8scrd",
	Name:      "invalid_endpoints_total",
	Help:      "Endpoints (or whole manifests, reason decode) skipped because they cannot be served, by reason.",
}, []string{"reason"})

// SyncErrors counts the errors of the feeds reading their source, by
// source ("kubernetes", "directory").
var SyncErrors = promauto.NewCounterVec(prometheus.CounterOpts{
	Namespace: plugin.Namespace,
	Subsystem: "k8scrd",
	Name:      "sync_errors_total",
	Help:      "Errors reading the source: failed list/watch calls to the API server, unreadable files.",
}, []string{"source"})
