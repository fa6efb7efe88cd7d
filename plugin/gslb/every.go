package gslb

import (
	"context"
	"time"
)

// every runs round now and then interval after each round ends, or at once
// when kick has a value (a nil kick never has one), until ctx is done. The
// wait starts when a round ends, so a slow round (a peer that times out)
// never makes rounds pile up.
func every(ctx context.Context, interval time.Duration, kick <-chan struct{}, round func(context.Context)) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-kick:
		}
		round(ctx)
		if ctx.Err() != nil {
			return
		}
		t.Reset(interval)
	}
}
