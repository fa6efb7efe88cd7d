package resolve

import (
	"github.com/coredns/coredns/plugin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

var (
	resolverNames = promauto.NewGauge(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: "k8scrd",
		Name:      "resolver_names",
		Help:      "Status host names resolved now in the background.",
	})

	resolverSkippedNames = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: "k8scrd",
		Name:      "resolver_skipped_names",
		Help:      "Status host names not resolved now, by reason (cap: beyond the number of names resolved; object: beyond the names resolved per object; noresolver: no resolver configured or in /etc/resolv.conf).",
	}, []string{"reason"})

	resolverLookups = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "k8scrd",
		Name:      "resolver_lookups_total",
		Help:      "Background lookups of status host names (A and AAAA), by result (success, nxdomain, nodata, failure).",
	}, []string{"result"})

	// resolverTruncatedNames counts the status host names whose answers are
	// cut to resolverMaxAddrs; type is A or AAAA.
	resolverTruncatedNames = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: "k8scrd",
		Name:      "resolver_truncated_names",
		Help:      "Status host names whose last answer held more addresses of a type than are kept (the first 64 in address order), by type (A, AAAA).",
	}, []string{"type"})
)
