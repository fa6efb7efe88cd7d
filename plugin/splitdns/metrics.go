package splitdns

import (
	"sync/atomic"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/pkg/rcode"
	"github.com/miekg/dns"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Variables declared for monitoring.
var (
	requestCount = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "splitdns",
		Name:      "requests_total",
		Help:      "Counter of requests routed, per route (the zone; \".\" is the default route).",
	}, []string{"server", "route"})

	responseCount = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "splitdns",
		Name:      "responses_total",
		Help:      "Counter of responses per route and response code (SERVFAIL when no upstream answered).",
	}, []string{"server", "route", "rcode"})

	tcpRetryCount = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "splitdns",
		Name:      "tcp_retries_total",
		Help:      "Counter of truncated UDP answers asked again over TCP, per route.",
	}, []string{"server", "route"})

	coalescedCount = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "splitdns",
		Name:      "coalesced_total",
		Help:      "Counter of queries answered with the answer of an identical query already in flight, per route.",
	}, []string{"server", "route"})

	loopCount = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "splitdns",
		Name:      "loops_total",
		Help:      "Counter of queries that came back to this server (a forwarding loop) and were answered SERVFAIL.",
	}, []string{"server"})

	upstreamHealthy = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: "splitdns",
		Name:      "upstream_healthy",
		Help:      "1 when the upstream is taking queries, 0 when health checks hold it down.",
	}, []string{"upstream"})

	routesGauge = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: "splitdns",
		Name:      "routes",
		Help:      "Number of routes in the table, per source (route, stubDomains, default, resolv, upstreamNameservers).",
	}, []string{"source"})

	kubeDNSErrorCount = promauto.NewCounter(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "splitdns",
		Name:      "kubedns_errors_total",
		Help:      "Counter of kube-dns files or entries that could not be used (malformed, or naming this server itself).",
	})

	kubeDNSReloadCount = promauto.NewCounter(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "splitdns",
		Name:      "kubedns_reloads_total",
		Help:      "Counter of routing tables rebuilt after the kube-dns files changed.",
	})
)

// routeMetrics are a route's counters for one server, looked up once rather
// than per query (a label lookup hashes every label value).
type routeMetrics struct {
	server    string
	requests  prometheus.Counter
	rcodes    [dns.RcodeRefused + 1]prometheus.Counter // NOERROR ... REFUSED
	tcpRetry  prometheus.Counter
	coalesced prometheus.Counter
}

// routeCounters caches the routeMetrics of the server a route was last used from.
type routeCounters struct{ p atomic.Pointer[routeMetrics] }

func (c *routeCounters) get(server, zone string) *routeMetrics {
	if m := c.p.Load(); m != nil && m.server == server {
		return m
	}
	m := &routeMetrics{
		server:    server,
		requests:  requestCount.WithLabelValues(server, zone),
		tcpRetry:  tcpRetryCount.WithLabelValues(server, zone),
		coalesced: coalescedCount.WithLabelValues(server, zone),
	}
	for rc := range m.rcodes {
		m.rcodes[rc] = responseCount.WithLabelValues(server, zone, rcode.ToString(rc))
	}
	c.p.Store(m)
	return m
}

func (m *routeMetrics) response(server, zone string, rc int) {
	if rc >= 0 && rc < len(m.rcodes) {
		m.rcodes[rc].Inc()
		return
	}
	responseCount.WithLabelValues(server, zone, rcode.ToString(rc)).Inc()
}
