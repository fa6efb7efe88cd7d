package object

// Sink is what a feed hands its objects to: the builder (package
// builder), which merges, admits (tenancy), refuses what does not fit and
// publishes snapshots. A feed knows nothing else of it.
type Sink interface {
	// Upsert adds or replaces the object at o.Key.
	Upsert(o *Object)
	// Remove and RemoveAt remove the object at key, deleted at version (its
	// deletion's resourceVersion; 0 when unknown).
	Remove(key string)
	RemoveAt(key string, version uint64)
	// Synced marks the end of the feed's first full listing.
	Synced()
	// Report tells an object's owners why some of its endpoints are not
	// served; it does nothing until SetReporter gives it a way (Events).
	Report(o *Object, reason, message string)
	SetReporter(func(o *Object, reason, message string))
}
