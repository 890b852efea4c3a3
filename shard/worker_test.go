package shard

import (
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests run the real worker goroutine on a manual clock. They wait for
// the worker with require.Eventually, but every assertion is about an
// outcome, never about how long something took.

func startShard(t *testing.T) (*Shard, *ManualClock) {
	t.Helper()
	clock := &ManualClock{}
	sh, err := New(Config{
		Tick: testTick, WheelSize: 64, FirstBlock: 64, TransferCap: 1000,
		Clock: clock, Tokens: 1 << 30, Limited: true, Lanes: 2,
		OnPanic: func(v any) { t.Errorf("panic: %v", v) },
	})
	require.NoError(t, err)
	sh.Start()
	t.Cleanup(func() { sh.Close(); <-sh.Exited() })
	return sh, clock
}

const waitFor, pollEvery = 5 * time.Second, 100 * time.Microsecond

func TestIdleWorkerParksAndScheduleWakesIt(t *testing.T) {
	sh, clock := startShard(t)
	require.Eventually(t, func() bool { return sh.sleepUntil.Load() == math.MaxUint64 }, waitFor, pollEvery,
		"an idle shard parks untimed instead of ticking")

	var ranAt atomic.Int64
	start := clock.Now()
	_, rej := sched(sh, 1, 5*testTick, func() { ranAt.Store(int64(clock.Now())) })
	require.Equal(t, Accepted, rej)
	// The worker must wake (it was parked with no timer at all), take the
	// timer, and sleep until its tick; the test then moves time along.
	require.Eventually(t, func() bool {
		if ranAt.Load() != 0 {
			return true
		}
		clock.Advance(testTick / 4)
		return false
	}, waitFor, pollEvery)
	assert.GreaterOrEqual(t, time.Duration(ranAt.Load()), start+5*testTick, "never early")
}

func TestFarTimerLetsWorkerPark(t *testing.T) {
	sh, _ := startShard(t)
	_, rej := sched(sh, 1, time.Hour, func() {})
	require.Equal(t, Accepted, rej)
	// With only a timer an hour away, the worker parks until it (or a
	// cascade) is due rather than waking every tick.
	require.Eventually(t, func() bool {
		next := sh.sleepUntil.Load()
		return next != math.MaxUint64 && next > sh.floorTick(sh.clock.Now())+1 && sh.Tokens() == 1<<30-1
	}, waitFor, pollEvery)
}

// TestBurstGrowsStorageAndLosesNothing schedules far more timers than the
// first block of node storage holds: the arena grows, the queues never fill.
func TestBurstGrowsStorageAndLosesNothing(t *testing.T) {
	sh, clock := startShard(t) // a first block of 64 nodes
	var ran atomic.Int64
	const n = 5000
	for i := range n {
		_, rej := sched(sh, uint64(i), testTick, func() { ran.Add(1) })
		require.Equal(t, Accepted, rej)
	}
	require.Eventually(t, func() bool {
		clock.Advance(testTick)
		return ran.Load() == n
	}, waitFor, pollEvery)
}

func TestStopFromTaskDoesNotWaitForItself(t *testing.T) {
	sh, clock := startShard(t)
	done := make(chan []Ref, 1)
	_, rej := sched(sh, 1, testTick, func() {
		assert.True(t, sh.IsWorker(GoroutineID()))
		sh.Close()
		var refs []Ref
		sh.Drain(func(r Ref, _ uint64, _ time.Duration, _ Task) bool { refs = append(refs, r); return true })
		done <- refs
	})
	require.Equal(t, Accepted, rej)
	other, rej := sched(sh, 2, time.Hour, func() {})
	require.Equal(t, Accepted, rej)
	require.False(t, sh.IsWorker(GoroutineID()))
	require.Eventually(t, func() bool { clock.Advance(testTick); return len(done) == 1 }, waitFor, pollEvery)
	assert.Equal(t, []Ref{other}, <-done)
	<-sh.Exited() // the worker exits once the task returns
}
