package splitdns

import (
	"math/rand/v2"
	"sync/atomic"
)

// Policy orders a route's upstreams for one query. The names are forward's.
type Policy interface {
	List([]*upstream) []*upstream
	String() string
}

func newPolicy(name string) Policy {
	switch name {
	case "random":
		return &random{}
	case "round_robin":
		return &roundRobin{}
	case "sequential":
		return &sequential{}
	}
	return nil
}

// random orders the upstreams randomly.
type random struct{}

func (*random) String() string { return "random" }

func (*random) List(u []*upstream) []*upstream {
	switch len(u) {
	case 1:
		return u
	case 2:
		if rand.IntN(2) == 0 {
			return []*upstream{u[1], u[0]}
		}
		return u
	}
	r := make([]*upstream, len(u))
	for i, j := range rand.Perm(len(u)) {
		r[i] = u[j]
	}
	return r
}

// roundRobin starts each query at the next upstream.
type roundRobin struct{ robin atomic.Uint32 }

func (*roundRobin) String() string { return "round_robin" }

func (r *roundRobin) List(u []*upstream) []*upstream {
	if len(u) == 1 {
		return u
	}
	i := int(r.robin.Add(1) % uint32(len(u))) // #nosec G115 -- a handful of upstreams
	l := make([]*upstream, 0, len(u))
	l = append(l, u[i:]...)
	return append(l, u[:i]...)
}

// sequential always tries the upstreams in the order they were written.
type sequential struct{}

func (*sequential) String() string { return "sequential" }

func (*sequential) List(u []*upstream) []*upstream { return u }
