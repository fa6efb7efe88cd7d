package object

import (
	discoveryv1 "k8s.io/api/discovery/v1"
)

// SliceReady reports whether s has an endpoint that takes traffic, by the
// API's rule (and k8gb's): conditions.ready unset counts as ready, and a
// terminating endpoint does not count, whatever its ready says.
func SliceReady(s *discoveryv1.EndpointSlice) bool {
	if s == nil {
		return false
	}
	for i := range s.Endpoints {
		c := s.Endpoints[i].Conditions
		if (c.Ready == nil || *c.Ready) && (c.Terminating == nil || !*c.Terminating) {
			return true
		}
	}
	return false
}
