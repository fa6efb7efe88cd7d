package localtargets

import (
	"github.com/coredns/coredns/plugin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

var (
	// answerCount counts localtargets- answers by result: targets or nodata.
	answerCount = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "localtargets",
		Name:      "answers_total",
		Help:      "Counter of localtargets- answers by result (targets, nodata).",
	}, []string{"server", "result"})

	// targetHealthy is 1 for a target that passes its health checks, 0 otherwise.
	targetHealthy = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: "localtargets",
		Name:      "target_healthy",
		Help:      "Whether a target is healthy (1) or unknown or unhealthy (0).",
	}, []string{"target"})

	// targetsByState counts targets by health state.
	targetsByState = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: "localtargets",
		Name:      "targets",
		Help:      "Number of health-checked targets by state (unknown, healthy, unhealthy).",
	}, []string{"state"})

	// checkCount counts health checks by result: pass or fail.
	checkCount = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "localtargets",
		Name:      "health_checks_total",
		Help:      "Counter of target health checks by result (pass, fail).",
	}, []string{"result"})
)
