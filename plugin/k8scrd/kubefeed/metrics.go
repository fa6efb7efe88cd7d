package kubefeed

import (
	"github.com/coredns/coredns/plugin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// gslbIgnoredEndpoints counts the DNSEndpoints of k8gb's operator held back
// (k8gb_owners.go).
var gslbIgnoredEndpoints = promauto.NewGauge(prometheus.GaugeOpts{
	Namespace: plugin.Namespace,
	Subsystem: "k8scrd",
	Name:      "gslb_ignored_dnsendpoints",
	Help:      "DNSEndpoints written by k8gb's operator ignored now because the Gslb that controls them is served (resources Gslb).",
})
