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

// k8s_gateway's naming conventions (k8sgateway.go).
var unservedNames = promauto.NewCounterVec(prometheus.CounterOpts{
	Namespace: plugin.Namespace,
	Subsystem: "k8scrd",
	Name:      "unserved_names_total",
	Help:      "Names that k8s_gateway would serve and this block does not (a naming word off), by reason; logged once per object.",
}, []string{"reason"})
