// Package kube holds what the API feed writes back to the cluster: the
// Events that tell an object's team why a claim was refused or an endpoint
// skipped. It imports no plugin code.
package kube

import (
	"context"

	clog "github.com/coredns/coredns/plugin/pkg/log"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

var log = clog.NewWithPlugin("k8scrd")

// Ref names the object an Event is about.
type Ref struct {
	APIVersion, Kind, Namespace, Name, UID string
}

// Eventer writes Events in the background, bounded in queue, memory and rate
// per object. A nil *Eventer reports nothing (the directory feed).
type Eventer struct{ e *eventer }

// NewEventer returns an Eventer creating Events through client.
func NewEventer(client typedcorev1.EventsGetter) *Eventer { return &Eventer{newEventer(client)} }

// Report queues a Warning Event on ref unless the same one was written
// recently or the object had its share; it never blocks.
func (e *Eventer) Report(ref Ref, reason, message string) {
	if e == nil {
		return
	}
	e.e.report(eventRef{apiVersion: ref.APIVersion, kind: ref.Kind, namespace: ref.Namespace, name: ref.Name, uid: ref.UID}, reason, message)
}

// Run writes queued Events until ctx ends.
func (e *Eventer) Run(ctx context.Context) { e.e.run(ctx) }
