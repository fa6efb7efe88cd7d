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

	// targetsByState counts checks by state. No series is labelled with an
	// address: targets are tenant input, the series would grow with them.
	targetsByState = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: "localtargets",
		Name:      "targets",
		Help:      "Number of health checks (distinct checked targets) by state (unknown, healthy, unhealthy).",
	}, []string{"state"})

	// uncheckedTargets counts the targets left unchecked, and so not served,
	// by reason.
	uncheckedTargets = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: "localtargets",
		Name:      "unchecked_targets",
		Help:      "Number of targets not checked and not served, by reason (refused, host_cap, zone_cap, invalid).",
	}, []string{"reason"})

	// refusedTargets counts the refused targets (a part of
	// uncheckedTargets{reason="refused"}) by the class that refuses them.
	refusedTargets = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: "localtargets",
		Name:      "refused_targets",
		Help:      "Number of targets whose health check is refused, by class (loopback, unspecified, link_local, multicast, metadata, private, denied, tenant_address, tenant_body).",
	}, []string{"class"})

	// checkCount counts health checks by result: pass or fail.
	checkCount = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "localtargets",
		Name:      "health_checks_total",
		Help:      "Counter of target health checks by result (pass, fail).",
	}, []string{"result"})
)
