package k8scrd

import (
	"github.com/fleetdns/fleetdns/plugin/k8scrd/builder"
	"github.com/fleetdns/fleetdns/plugin/k8scrd/object"
)

// sink is what the folder feed (directory.go) hands its objects to: the
// builder (package build), which merges, admits (tenancy), refuses what
// does not fit and publishes snapshots. A feed knows nothing else of it.
type sink interface {
	// upsert adds or replaces the object at o.Key.
	upsert(o *object.Object)
	// remove and removeAt remove the object at key, deleted at version (its
	// deletion's resourceVersion; 0 when unknown).
	remove(key string)
	removeAt(key string, version uint64)
	// synced marks the end of the feed's first full listing.
	synced()
	// report tells an object's owners why some of its endpoints are not
	// served; it does nothing until setReporter gives it a way (Events).
	report(o *object.Object, reason, message string)
	setReporter(func(o *object.Object, reason, message string))
}

// builderSink is the builder as the feeds of this package call it. It
// goes when the folder feed has a package of its own, with the sink
// interface (exported) that it calls.
type builderSink struct{ b *builder.Builder }

func (s builderSink) upsert(o *object.Object)                   { s.b.Upsert(o) }
func (s builderSink) remove(key string)                         { s.b.Remove(key) }
func (s builderSink) removeAt(key string, version uint64)       { s.b.RemoveAt(key, version) }
func (s builderSink) synced()                                   { s.b.Synced() }
func (s builderSink) report(o *object.Object, reason, m string) { s.b.Report(o, reason, m) }
func (s builderSink) setReporter(f func(o *object.Object, reason, message string)) {
	s.b.SetReporter(f)
}
