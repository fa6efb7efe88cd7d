package builder

import (
	"slices"
	"sync"
	"time"

	"github.com/coredns/coredns/plugin/transfer"
)

// notifyInterval bounds how often NOTIFY goes out for changing zones: under
// churn secondaries hear of the latest serial at most this late.
const notifyInterval = time.Second

// Notifier sends NOTIFY (RFC 1996) through the transfer plugin for zones that
// changed, so secondaries transfer at once instead of at the SOA refresh.
type Notifier struct {
	xfer *transfer.Transfer
	skip []string // GSLB zones: not transferred, so not notified

	co      *coalescer
	mu      sync.Mutex
	pending map[string]bool
	failing map[string]bool // owned by run
}

// NewNotifier returns a notifier through x that never notifies the zones in skip.
func NewNotifier(x *transfer.Transfer, skip []string) *Notifier {
	return &Notifier{xfer: x, skip: skip, co: newCoalescer(0, notifyInterval), pending: map[string]bool{}, failing: map[string]bool{}}
}

// Changed queues zones; the builder calls it after each swap.
func (n *Notifier) Changed(zones []string) {
	n.mu.Lock()
	for _, z := range zones {
		if !slices.Contains(n.skip, z) {
			n.pending[z] = true
		}
	}
	n.mu.Unlock()
	n.co.poke()
}

// Run sends NOTIFY for the zones queued, at once and then at most once per
// notifyInterval, until stop is closed.
func (n *Notifier) Run(stop <-chan struct{}) {
	n.co.run(stop, func() time.Duration {
		n.mu.Lock()
		zones := n.pending
		n.pending = map[string]bool{}
		n.mu.Unlock()
		for z := range zones {
			if err := n.xfer.Notify(z); err != nil {
				if !n.failing[z] {
					log.Warningf("NOTIFY for %s: %v", z, err)
				}
				n.failing[z] = true
			} else {
				n.failing[z] = false
			}
		}
		return 0
	})
}
