package rrl

import (
	"hash/maphash"
	"sync"
	"time"
)

// account is one token bucket: a client prefix and a kind of response
// (BIND's "account"), known by the hash of both (RRL.key), so that every
// account has the same small size whatever names clients ask. balance is
// credited rate per second up to rate (one second of responses), debited
// one per response, and may fall to -window*rate: a flood keeps its client
// limited until window seconds after it stops, as BIND and Knot do.
type account struct {
	key        uint64
	balance    float64
	last       int64 // unix nanoseconds
	drops      int32 // responses dropped, for slip
	prev, next int32 // the recency list, indices into table.accounts; -1 ends it
}

// table is the bounded set of accounts, the least recently used evicted
// first when it is full. Accounts live in one slice, linked by index: no
// allocation per account, a fixed size per entry.
type table struct {
	mu       sync.Mutex
	max      int
	window   float64 // seconds
	slip     int
	seed     maphash.Seed
	index    map[uint64]int32
	accounts []account
	// head is the most recently used account, tail the least; -1: none.
	head, tail int32
}

func newTable(max int, window time.Duration, slip int) *table {
	return &table{max: max, window: window.Seconds(), slip: slip, seed: maphash.MakeSeed(), index: map[uint64]int32{}, head: -1, tail: -1}
}

// verdict is what happens to a response.
type verdict int

const (
	send verdict = iota
	drop
	slipped // sent truncated (TC=1, no records) so that a real client retries over TCP
)

// debit charges one response of rate per second to key at now; it reports
// whether an account was evicted to make room.
func (t *table) debit(key uint64, rate float64, now time.Time) (verdict, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	nanos := now.UnixNano()
	i, ok := t.index[key]
	evicted := false
	var a *account
	if !ok {
		if len(t.accounts) < t.max {
			t.accounts = append(t.accounts, account{})
			i = int32(len(t.accounts) - 1)
		} else {
			i = t.tail
			t.unlink(i)
			delete(t.index, t.accounts[i].key)
			evicted = true
		}
		t.accounts[i] = account{key: key, balance: rate, last: nanos, prev: -1, next: -1}
		t.index[key] = i
		t.pushFront(i)
		a = &t.accounts[i]
	} else {
		if t.head != i {
			t.unlink(i)
			t.pushFront(i)
		}
		a = &t.accounts[i]
		if d := float64(nanos-a.last) / 1e9; d > 0 {
			a.balance = min(rate, a.balance+d*rate)
		}
		a.last = nanos
	}
	a.balance--
	if a.balance >= 0 {
		return send, evicted
	}
	a.balance = max(a.balance, -t.window*rate)
	a.drops++
	if t.slip > 0 && int(a.drops)%t.slip == 0 {
		return slipped, evicted
	}
	return drop, evicted
}

// unlink takes account i out of the recency list.
func (t *table) unlink(i int32) {
	a := &t.accounts[i]
	if a.prev >= 0 {
		t.accounts[a.prev].next = a.next
	} else {
		t.head = a.next
	}
	if a.next >= 0 {
		t.accounts[a.next].prev = a.prev
	} else {
		t.tail = a.prev
	}
	a.prev, a.next = -1, -1
}

// pushFront makes account i the most recently used.
func (t *table) pushFront(i int32) {
	a := &t.accounts[i]
	a.prev, a.next = -1, t.head
	if t.head >= 0 {
		t.accounts[t.head].prev = i
	}
	t.head = i
	if t.tail < 0 {
		t.tail = i
	}
}

func (t *table) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.index)
}
