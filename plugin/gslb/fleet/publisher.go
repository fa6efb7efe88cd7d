package fleet

import (
	"context"

	"github.com/miekg/dns"
)

// Publisher is this cluster's view, served to peers and stock secondaries
// at _fleet.<zone>. Its methods are safe for concurrent use.
type Publisher struct {
}

// NewPublisher returns a Publisher of the view of zone. It serves nothing
// (SERVFAIL) until the first Set.
func NewPublisher(zone string, keys *Keys, lim Limits) *Publisher { return nil }

// Set publishes hosts as the new view. Hosts need not be sorted; names are
// made fully qualified and lower case, hosts outside the zone, duplicates and
// what exceeds the caps are left out (and logged). The serial moves only when
// the view changes, and never backwards (see the package doc); changed says
// whether it did. The caller then sends Notify.
func (p *Publisher) Set(hosts []Host) (serial uint32, changed bool) { return 0, false }

// View returns the published view, nil before the first Set.
func (p *Publisher) View() *View { return nil }

// Zone returns the name of the view's zone, _fleet.<zone>.
func (p *Publisher) Zone() string { return "" }

// ServeDNS answers a query for a name in _fleet.<zone>: SOA, NS, the hosts'
// records, AXFR and IXFR (from the journal when it holds the client's serial,
// else the whole view) over TCP; IXFR over UDP gets the SOA only (RFC 1995
// §2), AXFR over UDP is refused. With keys set, an unsigned or wrongly signed
// request is refused. As a CoreDNS handler, it returns (rcode, nil) without
// writing for REFUSED, SERVFAIL and NOTIMP, the caller writing them.
func (p *Publisher) ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	return dns.RcodeServerFailure, nil
}

// Notify sends a NOTIFY for the current serial to each peer (host:port),
// signed when keys are set, in the background: it never blocks. Each peer
// has at most one NOTIFY in flight; a Notify while one is in flight to that
// peer is folded into one more NOTIFY after it (coalescing). A NOTIFY that
// gets no answer is retried with backoff (250 ms doubling, 5 tries); a
// REFUSED or other answer is final. ctx ends the retries.
func (p *Publisher) Notify(ctx context.Context, peers []string) {}
