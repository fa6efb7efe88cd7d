package fleet_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/plugin/gslb/fleet"
	"github.com/fleetdns/fleetdns/plugin/gslb/fleet/fleettest"

	"github.com/miekg/dns"
)

// TestReplicasOfOneDataPublishOneSerial: two publishers (two replicas of
// one cluster) given the same data serial and the same hosts publish the
// same serial, whenever each was started; a change of the data moves both
// forward to the same serial, as does a change that the data serial does
// not account for (a health verdict) seen by both.
func TestReplicasOfOneDataPublishOneSerial(t *testing.T) {
	a := fleet.NewPublisher(zone, nil, fleet.Limits{})
	b := fleet.NewPublisher(zone, nil, fleet.Limits{})
	const data = 4711 // the store's SOA serial of the zone (an etcd revision)
	sa, _ := a.SetData(hosts(20, 0), data)
	time.Sleep(100 * time.Millisecond) // b starts later: the clock does not count
	sb, _ := b.SetData(hosts(20, 0), data)
	if sa != sb || sa != data<<8 {
		t.Fatalf("same data, same view: serials %d and %d, want both %d (the data serial << 8)", sa, sb, data<<8)
	}

	// A verdict changes the view (the data serial does not move): one step.
	sa, _ = a.SetData(hosts(20, 1), data)
	if sa != data<<8+1 {
		t.Fatalf("a verdict change: %d, want %d", sa, data<<8+1)
	}
	sb, _ = b.SetData(hosts(20, 1), data)
	if sa != sb {
		t.Fatalf("after the same verdict change: %d and %d", sa, sb)
	}
	// The verdict goes back: the view is the first one again, its serial
	// is not (it must move forward for the peers that hold the change).
	if s, changed := a.SetData(hosts(20, 0), data); !changed || s != data<<8+2 {
		t.Fatalf("the verdict back: %d %v, want %d", s, changed, data<<8+2)
	}
	b.SetData(hosts(20, 0), data)

	// A change of the data that leaves the view as it is still moves the
	// serial to the data's, so that a replica that starts now agrees.
	for _, p := range []*fleet.Publisher{a, b} {
		if s, changed := p.SetData(hosts(20, 0), data+3); !changed || s != (data+3)<<8 {
			t.Fatalf("the data moved, the view not: %d %v, want %d", s, changed, (data+3)<<8)
		}
		if s, changed := p.SetData(hosts(20, 0), data+3); changed || s != (data+3)<<8 {
			t.Fatalf("nothing moved: %d %v, want %d unchanged", s, changed, (data+3)<<8)
		}
	}
	c := fleet.NewPublisher(zone, nil, fleet.Limits{})
	if s, _ := c.SetData(hosts(20, 0), data+3); s != a.View().Serial || s != b.View().Serial {
		t.Fatalf("a replica started after the changes: %d, the others %d and %d", s, a.View().Serial, b.View().Serial)
	}

	// A data serial that does not move forward (RFC 1982) never takes the
	// view's serial back.
	if s, changed := a.SetData(hosts(20, 2), data); !changed || s != (data+3)<<8+1 {
		t.Fatalf("data serial behind: %d %v, want %d", s, changed, (data+3)<<8+1)
	}
	// Past 2^24 the data serial wraps in the view's serial; serial
	// arithmetic still finds it ahead.
	w := fleet.NewPublisher(zone, nil, fleet.Limits{})
	s1, _ := w.SetData(hosts(1, 0), 1<<24-1)
	s2, _ := w.SetData(hosts(1, 1), 1<<24+5)
	if int32(s2-s1) <= 0 {
		t.Fatalf("data serial past 2^24: %d after %d, not ahead", s2, s1)
	}
}

// replicas serves one of two publishers behind one address, as a Service
// in front of a Deployment's replicas: which one answers is up to the test.
type replicas struct {
	pub  [2]atomic.Pointer[fleet.Publisher]
	next atomic.Int32 // the replica that answers the next SOA query and the transfer after it
}

func serveReplicas(t *testing.T) (*replicas, string) {
	r := &replicas{}
	r.restart(0)
	r.restart(1)
	addr := fleettest.Serve(t, "127.0.0.1:0", dns.HandlerFunc(func(w dns.ResponseWriter, m *dns.Msg) {
		fleettest.Handler(r.pub[r.next.Load()].Load()).ServeDNS(w, m)
	}), nil)
	return r, addr
}

// pubs returns the replicas' publishers.
func (r *replicas) pubs(i int) *fleet.Publisher { return r.pub[i].Load() }

// restart replaces replica i with a new publisher, with no view yet.
func (r *replicas) restart(i int) { r.pub[i].Store(fleet.NewPublisher(zone, nil, fleet.Limits{})) }

// TestAReplicaBehindIsNotFollowedBack: a follower that holds the newer view
// of one replica keeps it when the other replica, not there yet, answers an
// older serial: refused as behind, not taken, and no transfer.
func TestAReplicaBehindIsNotFollowedBack(t *testing.T) {
	r, addr := serveReplicas(t)
	r.pubs(0).SetData(hosts(5, 0), 10)
	r.pubs(1).SetData(hosts(5, 0), 10)
	f := fleet.NewFollower(zone, addr, nil, fleet.Limits{})
	check(t, f)
	r.pubs(0).SetData(hosts(5, 1), 11) // replica 0 sees the change first
	v, changed := check(t, f)
	if !changed || v.Serial != 11<<8 {
		t.Fatalf("replica 0's change: %s %v", summary(v), changed)
	}
	r.next.Store(1)
	if _, _, err := f.Check(context.Background()); fleet.Reason(err) != fleet.ReasonBackwards {
		t.Fatalf("replica 1, behind: %v, want %s", err, fleet.ReasonBackwards)
	}
	sameView(t, f.View(), r.pubs(0).View())
	// Replica 1 catches up: the same serial, the same view, nothing to do
	// but one whole transfer to verify it (a lower serial was seen).
	r.pubs(1).SetData(hosts(5, 1), 11)
	if _, changed := check(t, f); changed {
		t.Fatal("replica 1 caught up: changed, want the same view")
	}
	for i := range 4 {
		r.next.Store(int32(i % 2))
		if _, changed := check(t, f); changed {
			t.Fatalf("check %d, replicas agree: changed", i)
		}
	}
}

// TestARestartedReplicaAtTheSameSerialIsVerified: a replica restarted after
// a verdict change counts from the data serial again; when it comes back to
// the serial a follower holds with another view (the verdict changed back
// meanwhile), the follower, which saw it behind, transfers it whole and
// takes its view instead of keeping the stale one.
func TestARestartedReplicaAtTheSameSerialIsVerified(t *testing.T) {
	r, addr := serveReplicas(t)
	r.pubs(0).SetData(hosts(5, 0), 10)
	r.pubs(0).SetData(hosts(5, 1), 10) // a target down: 10<<8+1
	f := fleet.NewFollower(zone, addr, nil, fleet.Limits{})
	check(t, f)

	r.restart(0)                       // restarted (a single replica)
	r.pubs(0).SetData(hosts(5, 1), 10) // still down: 10<<8
	if _, _, err := f.Check(context.Background()); fleet.Reason(err) != fleet.ReasonBackwards {
		t.Fatalf("restarted, behind: %v", err)
	}
	r.pubs(0).SetData(hosts(5, 0), 10) // up again: 10<<8+1, the serial held
	v, changed := check(t, f)
	if !changed {
		t.Fatalf("the same serial with another view after a restart: not taken, holding %s", summary(v))
	}
	sameView(t, v, r.pubs(0).View())
}

// TestAPeerBehindForLongIsTakenAnyway: a peer whose serial stays behind for
// longer than the limit (its data restored, the cluster re-created) is
// followed again from its lower serial.
func TestAPeerBehindForLongIsTakenAnyway(t *testing.T) {
	r, addr := serveReplicas(t)
	r.pubs(0).SetData(hosts(5, 0), 1000)
	f := fleet.NewFollower(zone, addr, nil, fleet.Limits{})
	f.SetMaxBehind(300 * time.Millisecond)
	check(t, f)
	r.restart(0)
	r.pubs(0).SetData(hosts(5, 3), 900)
	if _, _, err := f.Check(context.Background()); fleet.Reason(err) != fleet.ReasonBackwards {
		t.Fatalf("behind: %v", err)
	}
	time.Sleep(400 * time.Millisecond)
	v, changed := check(t, f)
	if !changed {
		t.Fatal("behind for longer than the limit: not taken")
	}
	sameView(t, v, r.pubs(0).View())
}

// TestADataOnlyMoveIsAnEmptyIXFR: when the data serial moves and the view
// does not, a follower's IXFR carries no record but the SOAs.
func TestADataOnlyMoveIsAnEmptyIXFR(t *testing.T) {
	p, rec, addr := publish(t, nil, fleet.Limits{})
	p.SetData(hosts(50, 0), 7)
	f := fleet.NewFollower(zone, addr, nil, fleet.Limits{})
	check(t, f)
	rec.take()
	p.SetData(hosts(50, 0), 8)
	v, changed := check(t, f)
	if !changed || v.Serial != 8<<8 {
		t.Fatalf("data moved: %s %v", summary(v), changed)
	}
	sameView(t, v, p.View())
	if qs := rec.take(); len(qs) != 2 || qs[1] != "IXFR 4" {
		t.Fatalf("requests %v, want an SOA query and an IXFR of 4 SOAs", qs)
	}
}
