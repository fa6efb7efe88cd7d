package fleet

import (
	"context"
	"errors"
)

// ErrNoView means the peer serves no view (a k8gb CoreDNS, a stock file zone):
// the SOA of _fleet.<zone> is NXDOMAIN, REFUSED or NOTAUTH, or the SOA of
// another zone. The caller falls back to per-host queries. Errors wrap it
// (use errors.Is) with the reason.
var ErrNoView = errors.New("peer serves no fleet view")

// Follower follows one peer's view. Its methods are safe for concurrent use;
// concurrent Checks are serialized.
type Follower struct {
}

// NewFollower returns a Follower of the view of zone served at peerAddr
// (host:port), with TSIG when keys is not nil.
func NewFollower(zone, peerAddr string, keys *Keys, lim Limits) *Follower { return nil }

// Check asks the peer for its SOA (UDP, TCP on truncation) and, on a new
// serial, transfers the view over TCP: IXFR when it holds a view, AXFR else
// (and AXFR when the IXFR fails to apply). It returns the last good view
// (nil before the first) and whether this call changed it. A response that
// is unsigned or wrongly signed (keys set), over a cap, with names outside
// _fleet.<zone>, a serial that moves backwards, or malformed records is an
// error with the reason, and the last good view is kept.
func (f *Follower) Check(ctx context.Context) (v *View, changed bool, err error) {
	return nil, false, nil
}

// View returns the last good view, nil before the first.
func (f *Follower) View() *View { return nil }

// Peer returns the peer's address.
func (f *Follower) Peer() string { return "" }
