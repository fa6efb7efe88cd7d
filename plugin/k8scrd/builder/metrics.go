package builder

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

	lastSync = promauto.NewGauge(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: "k8scrd",
		Name:      "last_sync_timestamp_seconds",
		Help:      "Unix time at which the latest change from the source became servable.",
	})

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
)
