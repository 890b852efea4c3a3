package shardwheel_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
	"github.com/shardwheel/shardwheel/stats"
)

func TestZeroTimerIsInert(t *testing.T) {
	var tm shardwheel.Timer
	assert.False(t, tm.Cancel())
	assert.False(t, tm.Reset(time.Second))
	assert.False(t, tm.Pending())
	assert.Zero(t, tm.Key())
	assert.True(t, tm.Deadline().IsZero())
}

func TestTimerAccessors(t *testing.T) {
	s := newScheduler(t)
	before := time.Now()
	tm, err := s.AfterFunc(time.Minute, func() {}, shardwheel.ByKey(42))
	require.NoError(t, err)
	assert.Equal(t, uint64(42), tm.Key())
	assert.True(t, tm.Pending())
	dl := tm.Deadline()
	assert.False(t, dl.Before(before.Add(time.Minute)), "deadline %v is early", dl)
	assert.True(t, dl.Before(time.Now().Add(time.Minute+2*s.Tick())), "deadline %v too late", dl)
	require.True(t, tm.Reset(2*time.Minute))
	assert.True(t, tm.Deadline().After(dl.Add(59*time.Second)))
	require.True(t, tm.Cancel())
	assert.True(t, tm.Deadline().IsZero())
	assert.Equal(t, uint64(42), tm.Key(), "the key outlives the timer")
}

// TestDeadlineIsWithinATickAfterCallPlusDelay: at ticks of 1ms and 7ms,
// Deadline is never before the call plus the delay and less than a tick
// after it, and no task runs before the call plus its delay.
func TestDeadlineIsWithinATickAfterCallPlusDelay(t *testing.T) {
	for _, tick := range []time.Duration{shardwheel.DefaultTick, 7 * time.Millisecond} {
		s := newScheduler(t, shardwheel.WithShards(1), shardwheel.WithTick(tick))
		const n = 20
		var wg sync.WaitGroup
		wg.Add(n)
		early := atomic.Int32{}
		for i := range n {
			delay := time.Duration(i) * time.Millisecond
			before := time.Now()
			var tm shardwheel.Timer
			var err error
			tm, err = s.AfterFunc(delay, func() {
				if time.Since(before) < delay {
					early.Add(1)
				}
				wg.Done()
			}, shardwheel.ByKey(uint64(i)))
			after := time.Now()
			require.NoError(t, err)
			if d := tm.Deadline(); !d.IsZero() {
				assert.False(t, d.Before(before.Add(delay)), "Deadline before call+delay (tick %v, delay %v)", tick, delay)
				assert.True(t, d.Before(after.Add(delay+tick)), "Deadline a tick or more after call+delay (tick %v, delay %v): %v", tick, delay, d.Sub(after.Add(delay)))
			}
		}
		wg.Wait()
		assert.Zero(t, early.Load(), "tasks ran early at tick %v", tick)
	}
}

// TestCancelOfTheLastFiledTimerTakesItBackAtOnce: a Cancel of the timer
// its P's shard filed last, from that P, frees its node at once and counts
// in Stats.TakenBack (a subset of Cancelled), closure and Handler timers
// alike; any other cancelled timer stays held until its wheel meets it.
// (A timer that finds the wheel held waits in the queue, and its Cancel
// leaves it there for the holder to free: shard's
// TestCancelTakesBackTheLastFiled holds the wheel for it.) Call counters
// (scheduled, cancelled) show at once, without a pass.
func TestCancelOfTheLastFiledTimerTakesItBackAtOnce(t *testing.T) {
	withGOMAXPROCS(1, func() { // one P: every call is on shard 0's P
		s := newScheduler(t, shardwheel.WithShards(1))
		h, err := s.NewHandler(func(uint64) { t.Error("cancelled Handler timer ran") })
		require.NoError(t, err)
		base := s.Stats().Total

		tm, err := s.AfterFunc(time.Hour, func() { t.Error("cancelled timer ran") })
		require.NoError(t, err)
		st := s.Stats().Total
		assert.Equal(t, base.Scheduled+1, st.Scheduled, "AfterFunc counted at once")
		assert.Equal(t, base.Queued, st.Queued, "filed at once, not queued")
		require.True(t, tm.Cancel())
		st = s.Stats().Total
		assert.Equal(t, base.Cancelled+1, st.Cancelled, "Cancel counted at once")
		// What the holder counts is published by the shard goroutine's
		// next pass, which Stats wakes it for.
		settles(t, s, "taken back, nothing held", func(st stats.Shard) bool {
			return st.TakenBack == base.TakenBack+1 && st.HeldCancelled == base.HeldCancelled
		})
		assert.False(t, tm.Pending())
		assert.False(t, tm.Cancel(), "true at most once")

		ht, err := h.AfterFunc(2, time.Hour)
		require.NoError(t, err)
		require.True(t, ht.Cancel())
		settles(t, s, "Handler timer taken back", func(st stats.Shard) bool {
			return st.TakenBack == base.TakenBack+2 && st.TakenBack <= st.Cancelled
		})

		// One filed before the last is cancelled but held by the wheel.
		below, err := h.AfterFunc(3, time.Hour)
		require.NoError(t, err)
		top, err := h.AfterFunc(4, time.Hour)
		require.NoError(t, err)
		require.True(t, below.Cancel())
		// Held until the wheel meets it: a sweep, or the pass that
		// publishes, which frees the ended timers at the head of the slot
		// it would wake for next (below is that head).
		settles(t, s, "not the last filed: not taken back", func(st stats.Shard) bool {
			return st.TakenBack == base.TakenBack+2 && st.Cancelled == base.Cancelled+3 &&
				st.HeldCancelled <= base.HeldCancelled+1
		})
		require.True(t, top.Cancel())
		settles(t, s, "the last filed is taken back", func(st stats.Shard) bool {
			return st.TakenBack == base.TakenBack+3
		})

		require.Eventually(t, func() bool { return s.Stats().Pending == 0 }, waitFor, pollEvery)
		st = s.Stats().Total
		assert.Equal(t, st.Scheduled, st.Fired+st.Cancelled+st.Stopped, "Stats add up")
	})
}
