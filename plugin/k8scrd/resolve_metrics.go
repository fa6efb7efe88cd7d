package k8scrd

import (
	"github.com/coredns/coredns/plugin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// resolverTruncatedNames counts the status host names whose answers are
// cut to resolverMaxAddrs (source_resolve.go); type is A or AAAA.
var resolverTruncatedNames = promauto.NewGaugeVec(prometheus.GaugeOpts{
	Namespace: plugin.Namespace,
	Subsystem: "k8scrd",
	Name:      "resolver_truncated_names",
	Help:      "Status host names whose last answer held more addresses of a type than are kept (the first 64 in address order), by type (A, AAAA).",
}, []string{"type"})
