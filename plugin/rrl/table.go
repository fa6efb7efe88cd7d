package rrl

import (
	"container/list"
	"sync"
	"time"
)

// account is one token bucket: a client prefix and a kind of response
// (BIND's "account"). balance is credited rate per second up to rate (one
// second of responses), debited one per response, and may fall to
// -window*rate: a flood keeps its client limited until window seconds after
// it stops, as BIND and Knot do.
type account struct {
	key     string
	balance float64
	last    time.Time
	drops   int // responses dropped, for slip
	elem    *list.Element
}

// table is the bounded set of accounts, the least recently used evicted
// first when it is full.
type table struct {
	mu      sync.Mutex
	max     int
	window  float64 // seconds
	slip    int
	entries map[string]*account
	order   *list.List // front: most recently used
}

func newTable(max int, window time.Duration, slip int) *table {
	return &table{max: max, window: window.Seconds(), slip: slip, entries: map[string]*account{}, order: list.New()}
}

// verdict is what happens to a response.
type verdict int

const (
	send verdict = iota
	drop
	slipped // sent truncated (TC=1, no records) so that a real client retries over TCP
)

// debit charges one response of rate per second to key at now.
func (t *table) debit(key string, rate float64, now time.Time) (verdict, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	a, ok := t.entries[key]
	evicted := false
	if !ok {
		if len(t.entries) >= t.max {
			oldest := t.order.Back()
			t.order.Remove(oldest)
			delete(t.entries, oldest.Value.(*account).key)
			evicted = true
		}
		a = &account{key: key, balance: rate, last: now}
		a.elem = t.order.PushFront(a)
		t.entries[key] = a
	} else {
		t.order.MoveToFront(a.elem)
		if d := now.Sub(a.last).Seconds(); d > 0 {
			a.balance = min(rate, a.balance+d*rate)
		}
		a.last = now
	}
	a.balance--
	if a.balance >= 0 {
		return send, evicted
	}
	a.balance = max(a.balance, -t.window*rate)
	a.drops++
	if t.slip > 0 && a.drops%t.slip == 0 {
		return slipped, evicted
	}
	return drop, evicted
}

func (t *table) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.entries)
}
