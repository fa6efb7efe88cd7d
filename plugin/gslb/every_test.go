package gslb

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetdns/fleetdns/internal/testkit"
)

func TestEveryRunsNowOnKickAndStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	kick := make(chan struct{}, 1)
	var rounds atomic.Int32
	var done atomic.Bool
	go func() {
		every(ctx, time.Hour, kick, func(context.Context) { rounds.Add(1) })
		done.Store(true)
	}()

	// An hour's interval: only the start and the kick can run a round.
	testkit.Eventually(t, 5*time.Second, "a round at start", func() bool { return rounds.Load() == 1 })
	kick <- struct{}{}
	testkit.Eventually(t, 5*time.Second, "a round on a kick", func() bool { return rounds.Load() == 2 })

	cancel()
	testkit.Eventually(t, 5*time.Second, "every returns when its context ends", done.Load)
	if n := rounds.Load(); n != 2 {
		t.Errorf("%d rounds, want 2: the start and the kick", n)
	}
}

func TestEveryRepeatsAfterInterval(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var rounds atomic.Int32
	go every(ctx, 10*time.Millisecond, nil, func(context.Context) { rounds.Add(1) })
	testkit.Eventually(t, 5*time.Second, "three rounds", func() bool { return rounds.Load() >= 3 })
}
