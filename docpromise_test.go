package shardwheel_test

// Hostile tests of the promises of README.md and the doc comments, written
// by a reviewer against the documentation rather than the code.

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
)

// "tick lag (how late a shard started a tick it planned to wake for; a
// shard parked with nothing due plans none, so an idle pause is not lag)"
func TestDocIdlePauseIsNotTickLag(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(1), shardwheel.WithTick(time.Millisecond))
	for range 3 {
		time.Sleep(150 * time.Millisecond) // idle: the shard parks
		done := make(chan struct{})
		_, err := s.Schedule(1, 0, func() { close(done) })
		require.NoError(t, err)
		<-done
	}
	st := s.Stats().Total
	assert.Less(t, st.TickLag.Max(), int64(100*time.Millisecond), "idle pauses show as tick lag: %v", time.Duration(st.TickLag.Max()))
}

// "lateness (how late tasks started against their deadline's tick ...)":
// a timer that waited its delay out is not late by its delay.
func TestDocLatenessIsFromTheDeadlineTick(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(1))
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		_, err := s.Schedule(uint64(i), 100*time.Millisecond, wg.Done)
		require.NoError(t, err)
	}
	wg.Wait()
	require.Eventually(t, func() bool { return s.Stats().Total.Lateness.Count() == 20 }, waitFor, pollEvery)
	st := s.Stats().Total
	assert.Less(t, st.Lateness.Max(), int64(80*time.Millisecond), "lateness counts the delay: %v", time.Duration(st.Lateness.Max()))
}

// "WithTransferCap(n) ... new timers moved from the queue into the wheel
// per tick per shard; the rest wait" and the Stats that show it: timers
// scheduled while the shard's wheel is held (here by a blocked task) wait
// in its queue.
func TestDocTransferCapShowsInStats(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(1), shardwheel.WithTransferCap(10))
	var wg sync.WaitGroup
	const n = 300
	wg.Add(n)
	release := blockShard(t, s)
	for i := range n {
		_, err := s.Schedule(uint64(i), 0, wg.Done)
		require.NoError(t, err)
	}
	assert.Equal(t, n, s.Stats().Total.Queued, "queued behind the blocked task")
	release()
	wg.Wait()
	require.Eventually(t, func() bool { return s.Stats().Total.Fired == n+1 }, waitFor, pollEvery, "the timers and the blocking task")
	st := s.Stats().Total
	assert.LessOrEqual(t, st.TransferPeak, 10)
	assert.Positive(t, st.CapHits)
	assert.Positive(t, st.QueuedPeak)
	assert.Zero(t, st.Queued)
}

// "TicksSkipped counts ticks the shard slept through because nothing was
// due (an idle shard does not wake every tick)."
func TestDocIdleShardSkipsTicks(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(1))
	done := make(chan struct{})
	_, err := s.Schedule(1, 300*time.Millisecond, func() { close(done) })
	require.NoError(t, err)
	<-done
	require.Eventually(t, func() bool { return s.Stats().Total.Fired == 1 }, waitFor, pollEvery)
	st := s.Stats().Total
	assert.GreaterOrEqual(t, st.TicksSkipped, uint64(200), "ticks %d skipped %d", st.Ticks, st.TicksSkipped)
	assert.Less(t, st.Ticks, uint64(100), "an idle shard woke every tick")
}
