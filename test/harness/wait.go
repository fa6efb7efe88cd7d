package harness

import (
	"testing"
	"time"
)

// Eventually polls cond every 50 ms until it returns true, and fails the test
// with the last message cond gave if that does not happen within timeout.
func Eventually(t testing.TB, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	if msg, ok := Within(timeout, cond); !ok {
		t.Fatalf("not within %v: %s", timeout, msg)
	}
}

// Within polls cond every 50 ms until it returns true or timeout passes; it
// returns cond's last message and whether it became true.
func Within(timeout time.Duration, cond func() (bool, string)) (string, bool) {
	deadline := time.Now().Add(timeout)
	for {
		ok, msg := cond()
		if ok {
			return msg, true
		}
		if time.Now().After(deadline) {
			return msg, false
		}
		time.Sleep(50 * time.Millisecond)
	}
}
