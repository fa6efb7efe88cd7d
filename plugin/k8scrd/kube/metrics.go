package kube

import (
	"github.com/coredns/coredns/plugin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

var (
	eventsWritten = promauto.NewCounter(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "k8scrd",
		Name:      "events_total",
		Help:      "Kubernetes Events written on objects for refused claims and invalid endpoints.",
	})

	eventsDropped = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "k8scrd",
		Name:      "events_dropped_total",
		Help:      "Events not written, by reason (rate: the object had its share; namespace: the namespace had its share; queue: full; error: the API refused).",
	}, []string{"reason"})
)
