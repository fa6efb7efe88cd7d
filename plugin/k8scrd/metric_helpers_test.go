package k8scrd

import (
	"sync"
	"testing"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"
	"github.com/prometheus/client_golang/prometheus"
)

// metricValue is the value of metric name's series with these label pairs
// (name, value, ...) as the process exports it, whichever package of
// k8scrd counts it: a counter's or gauge's value, a histogram's sample
// count; 0 when the series does not exist yet.
func metricValue(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	families, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue series
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return 0
}

// recordingSink is a sink that keeps what a feed hands it, for the tests
// of the feeds that run no builder.
type recordingSink struct {
	mu     sync.Mutex
	held   map[string]*object.Object // what would be served now, by key
	handed map[string]*object.Object // since the last take: key -> object, nil for a removal
	done   bool                      // synced
}

func (r *recordingSink) Upsert(o *object.Object) { r.set(o.Key, o) }
func (r *recordingSink) Remove(key string)       { r.set(key, nil) }
func (r *recordingSink) RemoveAt(key string, _ uint64) {
	r.set(key, nil)
}
func (r *recordingSink) Synced()                                              { r.mu.Lock(); r.done = true; r.mu.Unlock() }
func (r *recordingSink) Report(*object.Object, string, string)                {}
func (r *recordingSink) SetReporter(func(o *object.Object, reason, m string)) {}

func (r *recordingSink) set(key string, o *object.Object) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held == nil {
		r.held, r.handed = map[string]*object.Object{}, map[string]*object.Object{}
	}
	if o == nil {
		delete(r.held, key)
	} else {
		r.held[key] = o
	}
	r.handed[key] = o
}

// take returns what was handed since the last take.
func (r *recordingSink) take() map[string]*object.Object {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.handed
	r.handed = map[string]*object.Object{}
	if out == nil {
		out = map[string]*object.Object{}
	}
	return out
}

// holds reports whether the object at key would be served.
func (r *recordingSink) holds(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.held[key]
	return ok
}
