package kube

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/lru"
)

// Events tell the team whose object was refused or skipped why, on the
// object itself (kubectl describe, kubectl events), as external-dns users
// ask: the DNS pods' log and metrics are not theirs to read. Creating an
// Event is the one write k8scrd makes; it only ever creates (RBAC: create on
// events), never updates or patches, so a repeat is a new Event after
// eventInterval, not a counter bumped on the old one. What is remembered for
// that is bounded and forgotten least recently used first.

const (
	eventInterval = 10 * time.Minute // the same message on one object at most this often
	eventsPerObj  = 10               // distinct messages on one object per eventInterval
	eventQueue    = 256              // Events waiting to be written; beyond it dropped and counted
	// eventRemembers bounds the messages remembered for the de-duplication;
	// beyond it the least recently reported is forgotten, never all at once.
	eventRemembers = 16384
	// eventsPerNamespace Events of one namespace at once, then one per
	// eventNamespaceRefill: a tenant with thousands of refused objects
	// gets a bounded stream, and other namespaces their own share.
	eventsPerNamespace   = 50
	eventNamespaceRefill = 10 * time.Second
	// eventLimiters bounds the objects and namespaces whose rates are
	// remembered (least recently used forgotten first).
	eventLimiters  = 4096
	eventComponent = "fleetdns-k8scrd"
)

// eventRef names the object an Event is about.
type eventRef struct {
	apiVersion, kind, namespace, name, uid string
}

type eventReq struct {
	ref             eventRef
	reason, message string
}

// eventer writes Events in the background, bounded in queue, memory and
// rate per object and per namespace. A nil *eventer reports nothing (the
// directory source).
type eventer struct {
	client typedcorev1.EventsGetter
	host   string
	now    func() time.Time
	queue  chan eventReq

	// sent remembers when each object/reason/message was last written.
	sent *lru.Cache
	// perObject and perNamespace are client-go's EventCorrelator spam
	// filters (token buckets in an LRU cache), keyed by object and by
	// namespace: eventsPerObj per object per eventInterval, and
	// eventsPerNamespace then one per eventNamespaceRefill per namespace.
	perObject, perNamespace *record.EventSourceObjectSpamFilter

	mu      sync.Mutex
	lastErr string // the last write error logged: logged again only when it changes
}

func newEventer(client typedcorev1.EventsGetter) *eventer {
	host, _ := os.Hostname()
	e := &eventer{
		client: client, host: host, now: time.Now,
		queue: make(chan eventReq, eventQueue),
		sent:  lru.New(eventRemembers),
	}
	clock := eventClock{e}
	e.perObject = record.NewEventSourceObjectSpamFilter(eventLimiters, eventsPerObj, float32(eventsPerObj/eventInterval.Seconds()), clock,
		func(ev *corev1.Event) string {
			o := ev.InvolvedObject
			return o.Namespace + "/" + o.Name + "/" + string(o.UID)
		})
	e.perNamespace = record.NewEventSourceObjectSpamFilter(eventLimiters, eventsPerNamespace, float32(1/eventNamespaceRefill.Seconds()), clock,
		func(ev *corev1.Event) string { return ev.InvolvedObject.Namespace })
	return e
}

// eventClock is the eventer's clock (its now) for the spam filters.
type eventClock struct{ e *eventer }

func (c eventClock) Now() time.Time                  { return c.e.now() }
func (c eventClock) Since(t time.Time) time.Duration { return c.e.now().Sub(t) }

// report queues an Event unless the same one was written within
// eventInterval, or the object or its namespace had its share; it never
// blocks.
func (e *eventer) report(ref eventRef, reason, message string) {
	if e == nil {
		return
	}
	key := ref.namespace + "/" + ref.name + "/" + ref.uid + "\x00" + reason + "\x00" + message
	now := e.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	if t, ok := e.sent.Get(key); ok && now.Sub(t.(time.Time)) < eventInterval {
		return
	}
	ev := &corev1.Event{InvolvedObject: corev1.ObjectReference{Namespace: ref.namespace, Name: ref.name, UID: types.UID(ref.uid)}}
	if e.perObject.Filter(ev) {
		eventsDropped.WithLabelValues("rate").Inc()
		return
	}
	if e.perNamespace.Filter(ev) {
		eventsDropped.WithLabelValues("namespace").Inc()
		return
	}
	e.sent.Add(key, now)

	select {
	case e.queue <- eventReq{ref: ref, reason: reason, message: message}:
	default:
		eventsDropped.WithLabelValues("queue").Inc()
	}
}

// run writes queued Events until ctx ends.
func (e *eventer) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case r := <-e.queue:
			e.write(ctx, r)
		}
	}
}

func (e *eventer) write(ctx context.Context, r eventReq) {
	now := metav1.NewTime(e.now())
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%s.%x", r.ref.name[:min(len(r.ref.name), 236)], now.UnixNano()), // names end at 253 octets
			Namespace: r.ref.namespace,
		},
		InvolvedObject: corev1.ObjectReference{
			APIVersion: r.ref.apiVersion, Kind: r.ref.kind,
			Namespace: r.ref.namespace, Name: r.ref.name, UID: types.UID(r.ref.uid),
		},
		Reason:              r.reason,
		Message:             r.message,
		Type:                corev1.EventTypeWarning,
		Source:              corev1.EventSource{Component: eventComponent, Host: e.host},
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		ReportingController: "fleetdns.io/k8scrd",
		ReportingInstance:   e.host,
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := e.client.Events(r.ref.namespace).Create(wctx, ev, metav1.CreateOptions{}); err != nil {
		eventsDropped.WithLabelValues("error").Inc()
		e.mu.Lock()
		again := e.lastErr == err.Error()
		e.lastErr = err.Error()
		e.mu.Unlock()
		if !again {
			log.Warningf("Event on %s %s/%s not written (further failures alike are not logged): %v", r.ref.kind, r.ref.namespace, r.ref.name, err)
		}
		return
	}
	eventsWritten.Inc()
}
