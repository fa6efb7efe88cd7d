package store

import "sync"

// Notifier is the change signal a Store gives its subscribers (Subscribe),
// for the store's implementations: k8scrd's and storetest's. The zero value
// is ready to use. Its subscribers are the plugins of a server block that
// read the store: their number is not tenant input.
type Notifier struct {
	mu   sync.Mutex
	next int
	chs  map[int]chan struct{}
}

// Subscribe implements Store.Subscribe.
func (n *Notifier) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	n.mu.Lock()
	if n.chs == nil {
		n.chs = map[int]chan struct{}{}
	}
	id := n.next
	n.next++
	n.chs[id] = ch
	n.mu.Unlock()
	return ch, func() {
		n.mu.Lock()
		delete(n.chs, id)
		n.mu.Unlock()
	}
}

// Publish signals every subscriber without blocking: a busy one keeps one
// pending signal for all it missed.
func (n *Notifier) Publish() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, ch := range n.chs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
