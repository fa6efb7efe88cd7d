package localtargets

import (
	"context"
	"errors"
	"github.com/fleetdns/fleetdns/internal/store/storetest"
	"net/netip"
	"testing"

	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestAnswerMetrics(t *testing.T) {
	lt := newTestLocalTargets(testStore)
	targets := testutil.ToFloat64(answerCount.WithLabelValues("", "targets"))
	nodataBefore := testutil.ToFloat64(answerCount.WithLabelValues("", "nodata"))
	for _, q := range []struct {
		name  string
		qtype uint16
	}{
		{"localtargets-app.example.org.", dns.TypeA},
		{"localtargets-v4only.example.org.", dns.TypeAAAA},
		{"app.example.org.", dns.TypeA}, // not ours: not counted
	} {
		m := new(dns.Msg)
		m.SetQuestion(q.name, q.qtype)
		lt.ServeDNS(context.Background(), dnstest.NewRecorder(&test.ResponseWriter{}), m)
	}
	if d := testutil.ToFloat64(answerCount.WithLabelValues("", "targets")) - targets; d != 1 {
		t.Errorf("answers_total{result=targets} grew by %v, want 1", d)
	}
	if d := testutil.ToFloat64(answerCount.WithLabelValues("", "nodata")) - nodataBefore; d != 1 {
		t.Errorf("answers_total{result=nodata} grew by %v, want 1", d)
	}
}

func TestTargetStateMetrics(t *testing.T) {
	c := newChecker(tcpHealthCheck(80), nil, defaultPrefix, storetest.New())
	state := func(s string) float64 { return testutil.ToFloat64(targetsByState.WithLabelValues(s)) }
	h0, u0, n0 := state("healthy"), state("unhealthy"), state("unknown")
	ta, tb := stubCheck(c, netip.MustParseAddr("10.9.9.1")), stubCheck(c, netip.MustParseAddr("10.9.9.2"))
	if d := state("unknown") - n0; d != 2 {
		t.Errorf("targets{unknown} grew by %v, want 2", d)
	}
	c.record(ta, nil)
	c.record(tb, errors.New("refused"))
	if h, u, n := state("healthy")-h0, state("unhealthy")-u0, state("unknown")-n0; h != 1 || u != 1 || n != 0 {
		t.Errorf("targets{healthy}+%v {unhealthy}+%v {unknown}+%v, want 1, 1 and 0", h, u, n)
	}
	// No series per address: targets are tenant input.
	if n := testutil.CollectAndCount(targetsByState); n > 3 {
		t.Errorf("%d series of targets, want at most one per state", n)
	}
}
