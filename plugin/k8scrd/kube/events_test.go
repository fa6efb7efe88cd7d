package kube

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// recordingEvents is the part of the Events API the eventer uses: Create.
type recordingEvents struct {
	typedcorev1.EventInterface // nil: any other call panics, which the eventer must never make
	mu                         sync.Mutex
	created                    []*corev1.Event
}

func (r *recordingEvents) Events(string) typedcorev1.EventInterface { return r }

func (r *recordingEvents) Create(_ context.Context, e *corev1.Event, _ metav1.CreateOptions) (*corev1.Event, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.created = append(r.created, e)
	return e, nil
}

func (r *recordingEvents) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.created)
}

// TestEventsRateLimitedPerObject: the same refusal on one object is one
// Event per interval, distinct ones at most eventsPerObj, and the queue
// drops (counted) rather than blocks the builder.
func TestEventsRateLimitedPerObject(t *testing.T) {
	api := &recordingEvents{}
	e := newEventer(api)
	now := time.Unix(1_800_000_000, 0)
	e.now = func() time.Time { return now }
	ref := eventRef{apiVersion: "externaldns.k8s.io/v1alpha1", kind: "DNSEndpoint", namespace: "team-b", name: "claim", uid: "u1"}

	for range 5 {
		e.report(ref, "NameRefused", "owned by team-a")
	}
	for i := range 2 * eventsPerObj {
		e.report(ref, "NameRefused", fmt.Sprintf("name %d owned by team-a", i))
	}
	if got := len(e.queue); got != eventsPerObj {
		t.Errorf("%d Events queued for one object; want %d (one per distinct message, at most %d)", got, eventsPerObj, eventsPerObj)
	}
	now = now.Add(eventInterval)
	e.report(ref, "NameRefused", "owned by team-a")
	if got := len(e.queue); got != eventsPerObj+1 {
		t.Errorf("after the interval the refusal is not reported again: %d queued", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.run(ctx)
	for deadline := time.Now().Add(5 * time.Second); api.count() < eventsPerObj+1 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if got := api.count(); got != eventsPerObj+1 {
		t.Fatalf("%d Events created, want %d", got, eventsPerObj+1)
	}
	ev := api.created[0]
	if ev.Type != corev1.EventTypeWarning || ev.InvolvedObject.Name != "claim" || ev.InvolvedObject.Namespace != "team-b" || ev.Reason != "NameRefused" {
		t.Errorf("Event %+v", ev)
	}

	// A full queue drops, counted, without blocking.
	cancel()
	before := testutil.ToFloat64(eventsDropped.WithLabelValues("queue"))
	blocked := newEventer(api)
	done := make(chan struct{})
	go func() {
		for i := range eventQueue + 10 {
			blocked.report(eventRef{namespace: fmt.Sprint("ns", i), name: "o"}, "InvalidEndpoint", "bad")
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("report blocked on a full queue")
	}
	if d := testutil.ToFloat64(eventsDropped.WithLabelValues("queue")) - before; d != 10 {
		t.Errorf("dropped %v Events on a full queue, want 10", d)
	}
}

// Issue 24, finding 10: past eventRemembers messages the de-duplication
// forgets the least recently reported, never everything: a message
// reported again and again is still written once per interval.
func TestEventsForgetLeastRecentlyUsed(t *testing.T) {
	e := newEventer(&recordingEvents{})
	now := time.Unix(1_800_000_000, 0)
	e.now = func() time.Time { return now }
	e.queue = make(chan eventReq, 4*eventRemembers)
	hot := eventRef{kind: "DNSEndpoint", namespace: "team-a", name: "hot", uid: "u"}
	e.report(hot, "NameRefused", "taken")
	for i := range 2 * eventRemembers {
		// Every object of its own namespace, so that no rate applies.
		e.report(eventRef{kind: "DNSEndpoint", namespace: fmt.Sprint("ns", i), name: "o", uid: "u"}, "NameRefused", "taken")
		if i%1000 == 0 {
			e.report(hot, "NameRefused", "taken")
		}
	}
	hotEvents := 0
	for len(e.queue) > 0 {
		if r := <-e.queue; r.ref == hot {
			hotEvents++
		}
	}
	if hotEvents != 1 {
		t.Errorf("the same message on one object written %d times within the interval, want 1", hotEvents)
	}
}

// Issue 24, finding 10: one namespace's Events are rate-limited as a
// whole, and another namespace keeps its own share.
func TestEventsRateLimitedPerNamespace(t *testing.T) {
	e := newEventer(&recordingEvents{})
	now := time.Unix(1_800_000_000, 0)
	e.now = func() time.Time { return now }
	e.queue = make(chan eventReq, 100_000)
	before := testutil.ToFloat64(eventsDropped.WithLabelValues("namespace"))
	for i := range 2000 {
		for n := range 10 {
			e.report(eventRef{namespace: "noisy", name: fmt.Sprint("o", i), uid: "u"}, "NameRefused", fmt.Sprintf("name %d is not granted", n))
		}
	}
	if got := len(e.queue); got != eventsPerNamespace {
		t.Errorf("%d Events queued for one namespace at once, want %d", got, eventsPerNamespace)
	}
	if got := testutil.ToFloat64(eventsDropped.WithLabelValues("namespace")) - before; got != 20000-eventsPerNamespace {
		t.Errorf("%v dropped for the namespace's rate, want %d", got, 20000-eventsPerNamespace)
	}
	e.report(eventRef{namespace: "victim", name: "web", uid: "u"}, "NameRefused", "taken")
	if got := len(e.queue); got != eventsPerNamespace+1 {
		t.Errorf("another namespace's Event not queued behind the noisy one")
	}
	now = now.Add(eventNamespaceRefill)
	e.report(eventRef{namespace: "noisy", name: "late", uid: "u"}, "NameRefused", "x")
	if got := len(e.queue); got != eventsPerNamespace+2 {
		t.Errorf("no Event for the noisy namespace after %v", eventNamespaceRefill)
	}
}
