package kubefeed

// dependents is the API feed's dependency index: what the last derivation
// of each derived object read (a Service's EndpointSlices, a Gateway, a
// Gslb's reference), and for each of those the objects that read it, so
// that a change queues exactly them. Most things are read by one object:
// that one costs no set of its own. Not safe for concurrent use.
type dependents struct {
	uses map[string][]string // object key -> what its derivation read
	by   map[string]keySet   // what was read -> the keys of the objects that read it
}

// keySet is a set of object keys: one, or one and more.
type keySet struct {
	one  string
	more map[string]struct{}
}

func newDependents() *dependents {
	return &dependents{uses: map[string][]string{}, by: map[string]keySet{}}
}

// use records that the derivation of key read uses (nothing: forget key).
func (d *dependents) use(key string, uses []string) {
	for _, u := range d.uses[key] {
		s := d.by[u]
		switch {
		case s.one == key && len(s.more) == 0:
			delete(d.by, u)
			continue
		case s.one == key:
			for k := range s.more {
				s.one = k
				break
			}
			delete(s.more, s.one)
		default:
			delete(s.more, key)
		}
		if len(s.more) == 0 {
			s.more = nil
		}
		d.by[u] = s
	}
	if len(uses) == 0 {
		delete(d.uses, key)
		return
	}
	d.uses[key] = uses
	for _, u := range uses {
		s, ok := d.by[u]
		switch {
		case !ok:
			s.one = key
		case s.one != key:
			if s.more == nil {
				s.more = map[string]struct{}{}
			}
			s.more[key] = struct{}{}
		}
		d.by[u] = s
	}
}

// readers returns the keys of the objects whose derivation read dep.
func (d *dependents) readers(dep string) []string {
	s, ok := d.by[dep]
	if !ok {
		return nil
	}
	keys := make([]string, 0, 1+len(s.more))
	keys = append(keys, s.one)
	for k := range s.more {
		keys = append(keys, k)
	}
	return keys
}
