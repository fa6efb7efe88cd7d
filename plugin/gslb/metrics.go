package gslb

import (
	"github.com/coredns/coredns/plugin"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

var (
	// peerState is 1 for the state a peer is in and 0 for the others.
	peerState = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: "gslb",
		Name:      "peer_state",
		Help:      "Peer state (unknown, up, stale, down, partitioned): 1 for the current state of each peer.",
	}, []string{"zone", "peer", "state"})

	peerQueryDuration = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: plugin.Namespace,
		Subsystem: "gslb",
		Name:      "peer_query_duration_seconds",
		Help:      "Histogram of the time one localtargets query to a peer took, by result.",
		Buckets:   plugin.TimeBuckets,
	}, []string{"zone", "peer", "result"})

	peerFailures = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "gslb",
		Name:      "peer_failures_total",
		Help:      "Counter of failed peer queries by reason (timeout, network, rcode, malformed, wrong_id, wrong_question, wrong_type).",
	}, []string{"zone", "peer", "reason"})

	peerTargetsDropped = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "gslb",
		Name:      "peer_targets_dropped_total",
		Help:      "Counter of targets dropped from peer answers that carried more than the bounded number of targets.",
	}, []string{"zone", "peer"})

	answers = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "gslb",
		Name:      "answers_total",
		Help:      "Counter of GSLB answers by strategy and result (answer, nodata, servfail).",
	}, []string{"zone", "strategy", "result"})

	failovers = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "gslb",
		Name:      "failovers_total",
		Help:      "Counter of failover answers that did not come from the first primary tag, by the tag that answered (\"all\" when none had targets).",
	}, []string{"zone", "tag"})

	answerSteps = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "gslb",
		Name:      "answer_steps_total",
		Help:      "Counter of GSLB answers by strategy and the step of the policy that answered (first, lower_tier, fallback, all, all_down).",
	}, []string{"zone", "strategy", "step"})

	policyErrors = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "gslb",
		Name:      "policy_errors_total",
		Help:      "Counter of invalid gslb/* properties of hosts, ignored as a whole (the default applies), by property; each invalid value is counted once.",
	}, []string{"zone", "property"})

	cacheMisses = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "gslb",
		Name:      "cache_misses_total",
		Help:      "Counter of client queries that found no cached answer of a peer and asked it on the query path.",
	}, []string{"zone", "peer"})

	discoveryRefreshes = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "gslb",
		Name:      "discovery_refreshes_total",
		Help:      "Counter of successful peer discoveries from the parent's NS delegation.",
	}, []string{"zone"})

	discoveryErrors = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "gslb",
		Name:      "discovery_errors_total",
		Help:      "Counter of failed peer discoveries (parent unreachable or no delegation); the last good peer set is kept.",
	}, []string{"zone"})

	discoveredPeers = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: "gslb",
		Name:      "discovered_peers",
		Help:      "Number of peers found in the parent's NS delegation (this cluster excluded).",
	}, []string{"zone"})

	discoveryIgnored = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: "gslb",
		Name:      "discovery_ignored_peers",
		Help:      "Number of peers in the parent's NS delegation beyond max_peers, ignored.",
	}, []string{"zone"})

	discoveryRefused = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: "gslb",
		Name:      "discovery_refused_glue",
		Help:      "Number of glue addresses in the parent's NS delegation refused as loopback, link-local, unspecified or multicast.",
	}, []string{"zone"})

	fleetChecks = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "gslb",
		Name:      "fleet_checks_total",
		Help:      "Counter of checks of a peer's fleet view (one SOA query, and a transfer when the serial moved), by result (unchanged, changed, noview, unreachable, tsig, cap, outside, backwards, malformed).",
	}, []string{"zone", "peer", "result"})

	fleetPeerSerial = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: "gslb",
		Name:      "fleet_peer_serial",
		Help:      "Serial of the peer's fleet view this cluster holds.",
	}, []string{"zone", "peer"})

	fleetPeerHosts = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: "gslb",
		Name:      "fleet_peer_hosts",
		Help:      "Number of hosts in the peer's fleet view this cluster holds.",
	}, []string{"zone", "peer"})

	fleetSerial = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: "gslb",
		Name:      "fleet_serial",
		Help:      "Serial of this cluster's fleet view.",
	}, []string{"zone"})

	notifiesReceived = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "gslb",
		Name:      "fleet_notifies_received_total",
		Help:      "Counter of NOTIFYs of the fleet view received, by result (accepted, refused).",
	}, []string{"zone", "result"})

	policyConflicts = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: "gslb",
		Name:      "fleet_policy_conflicts",
		Help:      "Number of hosts whose declarations in this cluster and the peers' views disagree on the gslb/* policy.",
	}, []string{"zone"})

	fleetOnlyHosts = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: "gslb",
		Name:      "fleet_peer_only_hosts",
		Help:      "Number of hosts that only peers declare, answered here from their views.",
	}, []string{"zone"})

	parentLink = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: "gslb",
		Name:      "parent_link",
		Help:      "1 when the parent's delegation of the zone includes this cluster's own name server, 0 when it does not.",
	}, []string{"zone", "geotag"})
)

// publish_delegation (delegation.go).
var (
	delegationUpdates = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "gslb",
		Name:      "delegation_updates_total",
		Help:      "Counter of RFC 2136 UPDATEs of this cluster's delegation sent to the parent's servers, by result (ok, refused, notauth, notzone, notimp, formerr, servfail, rcode, badkey, badsig, badtime, unsigned, malformed, timeout, network).",
	}, []string{"zone", "result"})

	delegationChecks = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: "gslb",
		Name:      "delegation_checks_total",
		Help:      "Counter of checks of this cluster's delegation at the parent, by result (in_place: nothing sent; updated: an UPDATE was due; not_applied: the parent answered it NOERROR but does not hold the records; unreachable).",
	}, []string{"zone", "result"})
)

// Results of answers_total.
const (
	resultAnswer = iota
	resultNodata
	resultServfail
)

var resultNames = [...]string{"answer", "nodata", "servfail"}

// answerCounters are the zone's answers_total counters, resolved once so
// that the query path does not hash label values.
type answerCounters map[string]*[3]prometheus.Counter

func newAnswerCounters(zone string) answerCounters {
	c := answerCounters{}
	for _, s := range []string{roundRobin, failover, geoip, weighted} {
		var a [3]prometheus.Counter
		for i, r := range resultNames {
			a[i] = answers.WithLabelValues(zone, s, r)
		}
		c[s] = &a
	}
	return c
}

func (g *GSLB) answered(strategy string, result int) {
	if a, ok := g.answerCount[strategy]; ok {
		a[result].Inc()
	}
}

// stepCounters are the zone's answer_steps_total counters, resolved once.
type stepCounters map[string]*[stepCount]prometheus.Counter

func newStepCounters(zone string) stepCounters {
	c := stepCounters{}
	for _, s := range []string{roundRobin, failover, geoip, weighted} {
		var a [stepCount]prometheus.Counter
		for i, n := range stepNames {
			a[i] = answerSteps.WithLabelValues(zone, s, n)
		}
		c[s] = &a
	}
	return c
}
