// Package objecttest has what the tests of k8scrd's feeds share.
package objecttest

import (
	"sync"

	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"
)

// Sink is an object.Sink that keeps what a feed hands it, for the
// tests of the feeds that run no builder. Safe for concurrent use.
type Sink struct {
	mu     sync.Mutex
	held   map[string]*object.Object // what would be served now, by key
	handed map[string]*object.Object // since the last take: key -> object, nil for a removal
	done   bool                      // synced
}

func (r *Sink) Upsert(o *object.Object) { r.set(o.Key, o) }

func (r *Sink) Remove(key string) { r.set(key, nil) }

func (r *Sink) RemoveAt(key string, _ uint64) {
	r.set(key, nil)
}

func (r *Sink) Synced() { r.mu.Lock(); r.done = true; r.mu.Unlock() }

func (r *Sink) Report(*object.Object, string, string) {}

func (r *Sink) SetReporter(func(o *object.Object, reason, m string)) {}

func (r *Sink) set(key string, o *object.Object) {
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

// Take returns what was handed since the last take.
func (r *Sink) Take() map[string]*object.Object {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.handed
	r.handed = map[string]*object.Object{}
	if out == nil {
		out = map[string]*object.Object{}
	}
	return out
}

// Holds reports whether the object at key would be served.
func (r *Sink) Holds(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.held[key]
	return ok
}
