package splitdns

import (
	"time"
)

// Ready implements ready.Readiness. By default only the default route must
// have an upstream that has answered and is not held down, so that one dead
// private upstream cannot take every replica out of service; ready_requires
// widens that to all routes or names zones.
func (s *SplitDNS) Ready() bool {
	for _, rt := range s.required(s.table.Load()) {
		if rt == nil || !s.routeUp(rt) {
			return false
		}
	}
	return true
}

// required returns the routes readiness waits for; a nil entry is a zone
// named in ready_requires that has no route (yet).
func (s *SplitDNS) required(t *table) []*route {
	switch {
	case len(s.cfg.readyRequires) == 0:
		if t.def == nil {
			return nil
		}
		return []*route{t.def}
	case s.cfg.readyRequires[0] == "all":
		return t.routes()
	}
	rs := make([]*route, 0, len(s.cfg.readyRequires))
	for _, z := range s.cfg.readyRequires {
		if z == "." {
			rs = append(rs, t.def)
			continue
		}
		rs = append(rs, t.zones[z])
	}
	return rs
}

func (s *SplitDNS) routeUp(rt *route) bool {
	for _, u := range rt.upstreams {
		if u.answered.Load() && !u.down() {
			return true
		}
	}
	return false
}

// watchHealth runs every health_check interval: it asks the upstreams of the
// routes that readiness waits for until one of each answers (queries alone
// would never reach an idle default route), and publishes every upstream's
// health.
func (s *SplitDNS) watchHealth() {
	tick := time.NewTicker(s.pool.interval)
	defer tick.Stop()
	for {
		for _, rt := range s.required(s.table.Load()) {
			if rt == nil || s.routeUp(rt) {
				continue
			}
			for _, u := range rt.upstreams {
				if err := u.proxy.GetHealthchecker().Check(u.proxy); err == nil {
					u.answered.Store(true)
				}
			}
		}
		for _, u := range s.pool.all() {
			v := 1.0
			if u.down() {
				v = 0
			}
			upstreamHealthy.WithLabelValues(u.addr).Set(v)
		}
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
	}
}
