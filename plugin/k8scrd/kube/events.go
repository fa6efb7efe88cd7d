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
)

// Events tell the team whose object was refused or skipped why, on the
// object itself (kubectl describe, kubectl events), as external-dns users
// ask: the DNS pods' log and metrics are not theirs to read. Creating an
// Event is the one write k8scrd makes; it only ever creates (RBAC: create on
// events), never updates or patches, so a repeat is a new Event after
// eventInterval, not a counter bumped on the old one.

const (
	eventInterval  = 10 * time.Minute // the same message on one object at most this often
	eventsPerObj   = 10               // distinct messages on one object per eventInterval
	eventQueue     = 256              // Events waiting to be written; beyond it dropped and counted
	eventRemembers = 16384            // messages remembered for the rate limit; then the oldest are forgotten
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
// rate per object. A nil *eventer reports nothing (the directory source).
type eventer struct {
	client typedcorev1.EventsGetter
	host   string
	now    func() time.Time
	queue  chan eventReq

	mu      sync.Mutex
	sent    map[string]time.Time // object/reason/message -> when last written
	perObj  map[string][]time.Time
	lastErr string // the last write error logged: logged again only when it changes
}

func newEventer(client typedcorev1.EventsGetter) *eventer {
	host, _ := os.Hostname()
	return &eventer{
		client: client, host: host, now: time.Now,
		queue: make(chan eventReq, eventQueue),
		sent:  map[string]time.Time{}, perObj: map[string][]time.Time{},
	}
}

// report queues an Event unless the same one was written within
// eventInterval or the object had its share; it never blocks.
func (e *eventer) report(ref eventRef, reason, message string) {
	if e == nil {
		return
	}
	obj := ref.namespace + "/" + ref.name + "/" + ref.uid
	key := obj + "\x00" + reason + "\x00" + message
	now := e.now()
	e.mu.Lock()
	if t, ok := e.sent[key]; ok && now.Sub(t) < eventInterval {
		e.mu.Unlock()
		return
	}
	recent := e.perObj[obj][:0]
	for _, t := range e.perObj[obj] {
		if now.Sub(t) < eventInterval {
			recent = append(recent, t)
		}
	}
	if len(recent) >= eventsPerObj {
		e.perObj[obj] = recent
		e.mu.Unlock()
		eventsDropped.WithLabelValues("rate").Inc()
		return
	}
	if len(e.sent) >= eventRemembers {
		e.forget(now)
	}
	e.sent[key] = now
	e.perObj[obj] = append(recent, now)
	e.mu.Unlock()

	select {
	case e.queue <- eventReq{ref: ref, reason: reason, message: message}:
	default:
		eventsDropped.WithLabelValues("queue").Inc()
	}
}

// forget drops what the rate limit no longer needs, and when every entry is
// recent, all of them: the memory stays bounded whatever tenants publish.
func (e *eventer) forget(now time.Time) {
	for k, t := range e.sent {
		if now.Sub(t) >= eventInterval {
			delete(e.sent, k)
		}
	}
	if len(e.sent) >= eventRemembers {
		clear(e.sent)
		clear(e.perObj)
		return
	}
	for k, ts := range e.perObj {
		if len(ts) == 0 || now.Sub(ts[len(ts)-1]) >= eventInterval {
			delete(e.perObj, k)
		}
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
