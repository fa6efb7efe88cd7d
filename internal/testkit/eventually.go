package testkit

import (
	"testing"
	"time"
)

// Condition is what Eventually waits for: a predicate, a predicate that also
// says what it saw, or a check whose error says why it does not hold yet
// (the note or the error goes into the failure message).
type Condition interface {
	func() bool | func() (bool, string) | func() error
}

// Eventually waits until cond holds, for at most d, and fails the test
// otherwise with what was awaited and, for a noting condition, its last note.
func Eventually[C Condition](t testing.TB, d time.Duration, what string, cond C) {
	t.Helper()
	if note, ok := Within(d, cond); !ok {
		if note != "" {
			t.Fatalf("%s: not within %v: %s", what, d, note)
		}
		t.Fatalf("%s: not within %v", what, d)
	}
}

// Within waits until cond holds, for at most d, and reports whether it did
// and cond's last note, for a test that goes on either way. It looks again
// after 10 ms, then less often, at most 50 ms apart: a change that is nearly
// there is seen at once, and a condition that asks a server does not load
// the machine.
func Within[C Condition](d time.Duration, cond C) (note string, ok bool) {
	check := func() (bool, string) {
		switch c := any(cond).(type) {
		case func() bool:
			return c(), ""
		case func() (bool, string):
			return c()
		case func() error:
			if err := c(); err != nil {
				return false, err.Error()
			}
			return true, ""
		}
		panic("unreachable: Condition has three shapes")
	}
	deadline := time.Now().Add(d)
	pause := 10 * time.Millisecond
	for {
		ok, note := check()
		if ok || !time.Now().Before(deadline) {
			return note, ok
		}
		time.Sleep(min(pause, time.Until(deadline)))
		pause = min(2*pause, 50*time.Millisecond)
	}
}
