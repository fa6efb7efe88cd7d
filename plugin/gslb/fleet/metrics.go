package fleet

import (
	"github.com/coredns/coredns/plugin"
	clog "github.com/coredns/coredns/plugin/pkg/log"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

var log = clog.NewWithPlugin("gslb")

var (
	requestsTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "gslb",
		Name:      "fleet_view_requests_total",
		Help:      "Counter of requests for this cluster's fleet view answered, by type (query, ixfr, ixfr_full, ixfr_soa, axfr).",
	}, []string{"type"})
	refusedTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "gslb",
		Name:      "fleet_view_refused_total",
		Help:      "Counter of requests for this cluster's fleet view refused, by reason (tsig, axfr, zone).",
	}, []string{"reason"})
	notifiesTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "gslb",
		Name:      "fleet_notifies_sent_total",
		Help:      "Counter of NOTIFYs sent to peers, by result (ok, refused, error, timeout).",
	}, []string{"result"})
)
