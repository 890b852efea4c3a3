package shardwheel_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
)

// TestSelfRearmingKeyedTimerIsNotLost has an indexed timer's task re-arm its
// own key while the ScheduleKey that made it may still be indexing it (the
// shard runs the task at once, on a P the caller gave up): the re-armed
// timer must stay indexed and pending. With one P and a shard a tick behind,
// the caller yields between queueing the timer and indexing it unless
// indexing happens first.
func TestSelfRearmingKeyedTimerIsNotLost(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	s := newScheduler(t, shardwheel.WithShards(1))
	const k = 5
	for i := range 1000 {
		probe, err := s.Schedule(1, 0, noop)
		require.NoError(t, err)
		// Hold the only P until just before the tick after next: the
		// shard falls a tick behind.
		for g := probe.Deadline(); time.Until(g.Add(2*time.Millisecond)) > 3*time.Microsecond; {
		}
		rearmed := make(chan shardwheel.Timeout, 1)
		_, err = s.ScheduleKey(k, 0, func() {
			next, err := s.ScheduleKey(k, time.Hour, noop)
			if err == nil {
				rearmed <- next
			}
		})
		require.NoError(t, err)
		next := <-rearmed
		require.True(t, next.Pending(), "iteration %d: the re-armed timer was cancelled", i)
		got, ok := s.Lookup(k)
		require.True(t, ok, "iteration %d: the key lost its timer", i)
		assert.Equal(t, next, got)
		require.True(t, s.CancelKey(k))
	}
}
