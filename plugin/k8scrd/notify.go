package k8scrd

import (
	"slices"
	"sync"
	"time"

	"github.com/coredns/coredns/plugin/transfer"
)

// notifyInterval bounds how often NOTIFY goes out for changing zones: under
// churn secondaries hear of the latest serial at most this late.
const notifyInterval = time.Second

// notifier sends NOTIFY (RFC 1996) through the transfer plugin for zones that
// changed, so secondaries transfer at once instead of at the SOA refresh.
type notifier struct {
	xfer *transfer.Transfer
	skip []string // GSLB zones: not transferred, so not notified

	mu      sync.Mutex
	pending map[string]bool
	wake    chan struct{}
}

func newNotifier(x *transfer.Transfer, skip []string) *notifier {
	return &notifier{xfer: x, skip: skip, pending: map[string]bool{}, wake: make(chan struct{}, 1)}
}

// changed queues zones; the builder calls it after each swap.
func (n *notifier) changed(zones []string) {
	n.mu.Lock()
	for _, z := range zones {
		if !slices.Contains(n.skip, z) {
			n.pending[z] = true
		}
	}
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

func (n *notifier) run(stop <-chan struct{}) {
	failing := map[string]bool{}
	for {
		select {
		case <-stop:
			return
		case <-n.wake:
		}
		n.mu.Lock()
		zones := n.pending
		n.pending = map[string]bool{}
		n.mu.Unlock()
		for z := range zones {
			if err := n.xfer.Notify(z); err != nil {
				if !failing[z] {
					log.Warningf("NOTIFY for %s: %v", z, err)
				}
				failing[z] = true
			} else {
				failing[z] = false
			}
		}
		select {
		case <-stop:
			return
		case <-time.After(notifyInterval):
		}
	}
}
