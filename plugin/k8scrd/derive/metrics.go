package derive

import (
	"github.com/coredns/coredns/plugin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// unservedNames counts the names k8s_gateway would serve that a block does
// not (names.go).
var unservedNames = promauto.NewCounterVec(prometheus.CounterOpts{
	Namespace: plugin.Namespace,
	Subsystem: "k8scrd",
	Name:      "unserved_names_total",
	Help:      "Names that k8s_gateway would serve and this block does not (a naming word off), by reason; logged once per object.",
}, []string{"reason"})
