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
	c := newChecker(newHealthCheck(), nil, defaultPrefix, storetest.New())
	a, b := netip.MustParseAddr("10.9.9.1"), netip.MustParseAddr("10.9.9.2")
	ta, tb := &target{addr: a, cancel: func() {}}, &target{addr: b, cancel: func() {}}
	c.targets[a], c.targets[b] = ta, tb
	c.record(ta, nil)
	c.record(tb, errors.New("refused"))
	if v := testutil.ToFloat64(targetHealthy.WithLabelValues("10.9.9.1")); v != 1 {
		t.Errorf("target_healthy{10.9.9.1} = %v, want 1", v)
	}
	if v := testutil.ToFloat64(targetHealthy.WithLabelValues("10.9.9.2")); v != 0 {
		t.Errorf("target_healthy{10.9.9.2} = %v, want 0", v)
	}
	if h, u := testutil.ToFloat64(targetsByState.WithLabelValues("healthy")), testutil.ToFloat64(targetsByState.WithLabelValues("unhealthy")); h != 1 || u != 1 {
		t.Errorf("targets{healthy}=%v {unhealthy}=%v, want 1 and 1", h, u)
	}
}
