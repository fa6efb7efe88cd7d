package rrl

import (
	"github.com/coredns/coredns/plugin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// No per-client series: the label is the kind of response only.
var (
	droppedCount = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "rrl",
		Name:      "responses_dropped_total",
		Help:      "Counter of UDP responses dropped by rate limiting, by kind (answer, nodata, nxdomain, referral, error).",
	}, []string{"kind"})
	slippedCount = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "rrl",
		Name:      "responses_slipped_total",
		Help:      "Counter of rate-limited UDP responses sent truncated (TC=1) instead, by kind.",
	}, []string{"kind"})
	evictedCount = promauto.NewCounter(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "rrl",
		Name:      "table_evictions_total",
		Help:      "Counter of accounts evicted from a full table (max_table_size), the least recently used first.",
	})
)
