package builder

import "time"

// coalescer runs one function on its own goroutine for any number of pokes
// from others: the builder's batches and the NOTIFY rounds. (The directory
// source keeps its per-file settle timer in the goroutine that reads the
// file events: a second goroutine there lowered Go's adaptive initial stack
// size enough that every query's goroutine had to grow its stack, +60%
// instructions per query in a gslb block.) What the pokes are about, the poker queues beside it (under
// its own lock); fn takes all of it when it runs.
//
// The first poke of an idle coalescer starts a wait of delay (the builder's
// 20 ms batch), so that one run gathers a burst; pokes during the wait ride along. After a run the
// coalescer rests gap, so that runs are at least that far apart (pokes in
// between are kept for the next run: NOTIFY at most once a second). fn
// returns how long until it wants to run again unpoked (work queued that
// is not due yet), 0 for never.
type coalescer struct {
	delay time.Duration
	gap   time.Duration
	wake  chan struct{}
}

func newCoalescer(delay, gap time.Duration) *coalescer {
	return &coalescer{delay: delay, gap: gap, wake: make(chan struct{}, 1)}
}

// poke asks for a run; it never blocks.
func (c *coalescer) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// run calls fn as the pokes ask until stop is closed.
func (c *coalescer) run(stop <-chan struct{}, fn func() (again time.Duration)) {
	t := time.NewTimer(time.Hour)
	t.Stop()
	defer t.Stop()
	sleep := func(d time.Duration) bool {
		if d <= 0 {
			select {
			case <-stop:
				return false
			default:
				return true
			}
		}
		t.Reset(d)
		select {
		case <-stop:
			return false
		case <-t.C:
			return true
		}
	}
	wait := time.Duration(-1) // until poked
	for {
		if wait < 0 {
			select {
			case <-stop:
				return
			case <-c.wake:
			}
			wait = c.delay
		}
		if !sleep(wait) {
			return
		}
		select { // the pokes so far are this run's
		case <-c.wake:
		default:
		}
		again := fn()
		if !sleep(c.gap) {
			return
		}
		wait = -1
		if again > 0 {
			wait = again
		}
	}
}
