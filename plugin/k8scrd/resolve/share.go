package resolve

import (
	"slices"
	"strings"
)

// The resolver's places (maxNames) are shared, so that one tenant's
// thousand names never keep another team's load balancer unresolved:
//
//   - status host names, which a controller writes (a cloud load
//     balancer's), come before host names an object's authors declare in
//     an annotation (k8gb.io/exposed-hostnames);
//   - within each of the two, the namespaces take places in turn, one name
//     each per round (max-min fairness: a namespace that needs few gets
//     all of them, the rest is shared by those that need more);
//   - within a namespace, its objects take turns the same way, each
//     object's names in name order.
//
// The choice is a function of the objects tracked, so that every replica
// resolves the same names. It is made again in run's goroutine when the
// tracked names exceed maxNames and change: a name that loses its place
// loses its addresses, and the objects that track it are derived again.

// share chooses the names resolved again when that is due and returns the
// keys whose addresses changed (a name with addresses lost its place).
func (r *resolver) share() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.rebalance || r.stopped {
		return nil
	}
	r.rebalance = false
	if len(r.servers) == 0 {
		return nil
	}
	chosen := r.choose()
	var lost []string
	for n, state := range r.names {
		if _, ok := chosen[n]; !ok {
			if len(state.addrs) > 0 {
				lost = append(lost, n)
			}
			r.forget(n)
		}
	}
	for n := range chosen {
		if _, ok := r.names[n]; !ok {
			r.names[n] = &resolvedName{}
		}
	}
	r.publish()
	if len(lost) == 0 {
		return nil
	}
	return r.keysOf(lost...)
}

// choose returns the names that take the maxNames places (see above).
// Callers hold r.mu.
func (r *resolver) choose() map[string]struct{} {
	// tiers[0]: status host names, tiers[1]: annotated; each namespace ->
	// its keys, sorted when taken.
	var tiers [2]map[string][]string
	for i := range tiers {
		tiers[i] = map[string][]string{}
	}
	for key, k := range r.keys {
		t := 0
		if k.annotated {
			t = 1
		}
		tiers[t][k.namespace] = append(tiers[t][k.namespace], key)
	}
	chosen := make(map[string]struct{}, min(r.maxNames, len(r.tracked)))
	for _, byNS := range tiers {
		namespaces := make([]string, 0, len(byNS))
		for ns := range byNS {
			namespaces = append(namespaces, ns)
		}
		slices.Sort(namespaces)
		// Each namespace's names in the order its objects take turns.
		queues := make([][]string, len(namespaces))
		for i, ns := range namespaces {
			keys := byNS[ns]
			slices.Sort(keys)
			queues[i] = r.interleave(keys)
		}
		next := make([]int, len(queues))
		for len(chosen) < r.maxNames {
			took := false
			for i, q := range queues {
				for next[i] < len(q) {
					n := q[next[i]]
					next[i]++
					if _, ok := chosen[n]; !ok {
						chosen[n] = struct{}{}
						took = true
						break
					}
				}
				if len(chosen) >= r.maxNames {
					break
				}
			}
			if !took {
				break
			}
		}
	}
	return chosen
}

// interleave returns the names of keys, the first of each key, then the
// second of each, and so on. Callers hold r.mu.
func (r *resolver) interleave(keys []string) []string {
	var out []string
	for i := 0; ; i++ {
		more := false
		for _, key := range keys {
			if names := r.keys[key].names; i < len(names) {
				out = append(out, names[i])
				more = true
			}
		}
		if !more {
			return out
		}
	}
}

// keyNamespace is the namespace of an object key ("Kind:namespace/name").
func keyNamespace(key string) string {
	_, nsName, ok := strings.Cut(key, ":")
	if !ok {
		nsName = key
	}
	ns, _, _ := strings.Cut(nsName, "/")
	return ns
}

// keyObject names the object of key for a log line: "Kind namespace/name".
func keyObject(key string) string {
	return strings.Replace(key, ":", " ", 1)
}
