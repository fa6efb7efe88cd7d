package k8scrd

import (
	"github.com/coredns/coredns/plugin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

var (
	recordsGauge = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: "k8scrd",
		Name:      "records",
		Help:      "Resource records served per zone.",
	}, []string{"zone"})

	invalidEndpoints = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "k8scrd",
		Name:      "invalid_endpoints_total",
		Help:      "Endpoints (or whole manifests, reason decode) skipped because they cannot be served, by reason.",
	}, []string{"reason"})

	lastSync = promauto.NewGauge(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: "k8scrd",
		Name:      "last_sync_timestamp_seconds",
		Help:      "Unix time at which the latest change from the source became servable.",
	})

	syncErrors = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "k8scrd",
		Name:      "sync_errors_total",
		Help:      "Errors reading the source: failed list/watch calls to the API server, unreadable files.",
	}, []string{"source"})

	refusedEndpoints = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: "k8scrd",
		Name:      "refused_endpoints",
		Help:      "Endpoints refused now by tenancy, by reason (owner, grant, reserved, localtargets, cover).",
	}, []string{"reason"})
	tenancySkipped = promauto.NewGauge(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: "k8scrd",
		Name:      "tenancy_skipped_endpoints",
		Help:      "Endpoints ignored now because another namespace owns their name (tenancy strict).",
	})

	cnameConflicts = promauto.NewGauge(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: "k8scrd",
		Name:      "cname_conflicts",
		Help:      "CNAME records skipped now because other data (or another CNAME) is at the same name.",
	})

	propagationDelay = promauto.NewHistogram(prometheus.HistogramOpts{
		Namespace: plugin.Namespace,
		Subsystem: "k8scrd",
		Name:      "propagation_delay_seconds",
		Help:      "Time from an object's change, as its metadata records it (newest managedFields time, else creationTimestamp; file modification time for directory), to its first servable answer.",
		Buckets:   []float64{.01, .025, .05, .1, .25, .5, 1, 2, 5, 10, 30},
	})

	applyDelay = promauto.NewHistogram(prometheus.HistogramOpts{
		Namespace: plugin.Namespace,
		Subsystem: "k8scrd",
		Name:      "apply_delay_seconds",
		Help:      "Time from an object event reaching the plugin to its first servable answer.",
		Buckets:   []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1},
	})

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
