package k8scrd

import (
	"github.com/coredns/coredns/plugin"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// invalidEndpoints is declared beside the reasons it counts (package object).
var invalidEndpoints = object.InvalidEndpoints

var (
	syncErrors = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "k8scrd",
		Name:      "sync_errors_total",
		Help:      "Errors reading the source: failed list/watch calls to the API server, unreadable files.",
	}, []string{"source"})

	gslbIgnoredEndpoints = promauto.NewGauge(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: "k8scrd",
		Name:      "gslb_ignored_dnsendpoints",
		Help:      "DNSEndpoints written by k8gb's operator ignored now because the Gslb that controls them is served (resources Gslb).",
	})
)
