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

	rejectCount = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "splitdns",
		Name:      "max_concurrent_rejects_total",
		Help:      "Counter of queries REFUSED because max_concurrent queries were in flight, per route.",
	}, []string{"server", "route"})

	failoverCount = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "splitdns",
		Name:      "failovers_total",
		Help:      "Counter of upstream answers with a failover rcode after which the route's next upstream was asked, per route.",
	}, []string{"server", "route"})

	nextCount = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "splitdns",
		Name:      "next_total",
		Help:      "Counter of answers with a next rcode after which the next-longest route was asked, per route.",
	}, []string{"server", "route"})

	allDownCount = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "splitdns",
		Name:      "all_upstreams_down_total",
		Help:      "Counter of queries that found every upstream of the route held down, per route.",
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
	rejected  prometheus.Counter
	failover  prometheus.Counter
	next      prometheus.Counter
	allDown   prometheus.Counter
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
		rejected:  rejectCount.WithLabelValues(server, zone),
		failover:  failoverCount.WithLabelValues(server, zone),
		next:      nextCount.WithLabelValues(server, zone),
		allDown:   allDownCount.WithLabelValues(server, zone),
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
