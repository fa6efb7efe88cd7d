package builder

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
)

func TestCoalescerBurstIsOneRunAndAgainRunsUnpoked(t *testing.T) {
	c := newCoalescer(20*time.Millisecond, 0)
	stop := make(chan struct{})
	defer close(stop)
	var runs atomic.Int32
	// The burst is poked before the runner starts: with the runner
	// already waiting, a burst preempted past the delay and the run it
	// asks for (25 ms) would poke a third run.
	for range 100 {
		c.poke()
	}
	go c.run(stop, func() time.Duration {
		if runs.Add(1) == 1 {
			return 5 * time.Millisecond // work queued that is not due yet
		}
		return 0
	})
	testkit.Eventually(t, 5*time.Second, "the run and the unpoked one after it", func() bool { return runs.Load() >= 2 })
	time.Sleep(50 * time.Millisecond)
	if n := runs.Load(); n != 2 {
		t.Errorf("100 pokes in a burst: %d runs, want 1 and the one it asked for", n)
	}
}

func TestCoalescerGapKeepsPokesForTheNextRun(t *testing.T) {
	c := newCoalescer(0, 100*time.Millisecond)
	stop := make(chan struct{})
	defer close(stop)
	var runs atomic.Int32
	go c.run(stop, func() time.Duration { runs.Add(1); return 0 })
	c.poke()
	testkit.Eventually(t, 5*time.Second, "first run", func() bool { return runs.Load() == 1 })
	c.poke() // during the gap: held, not lost
	c.poke()
	testkit.Eventually(t, 5*time.Second, "second run after the gap", func() bool { return runs.Load() == 2 })
	time.Sleep(150 * time.Millisecond)
	if n := runs.Load(); n != 2 {
		t.Errorf("two pokes during the gap: %d runs in all, want 2", n)
	}
}
