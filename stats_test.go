package shardwheel_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
)

// TestStatsAccountForEveryEnd ends timers in each of the three ways and
// checks that the counters agree with what happened, per shard and in
// total.
func TestStatsAccountForEveryEnd(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(3), shardwheel.WithTick(time.Millisecond))
	const n = 300 // key%3: 0 runs at once, 1 is cancelled, 2 is left for Stop
	var ran atomic.Int64
	perShard := make([]uint64, s.Shards())
	for k := range uint64(n) {
		delay, task := time.Hour, noop
		if k%3 == 0 {
			delay, task = 0, func() { ran.Add(1) }
		}
		tm, err := s.Schedule(k, delay, task)
		require.NoError(t, err)
		perShard[s.ShardOf(k)]++
		if k%3 == 1 {
			require.True(t, tm.Cancel())
		}
	}
	st := s.Stats()
	assert.EqualValues(t, n, st.Total.Scheduled)
	for i, sh := range st.Shards {
		assert.Equal(t, perShard[i], sh.Scheduled, "shard %d", i)
	}

	// The worker publishes its counters once per pass; wait until the
	// cancelled timers are freed and the short ones have run.
	require.Eventually(t, func() bool {
		st := s.Stats()
		return ran.Load() == n/3 && st.Total.Fired >= n/3 && st.Total.Cancelled >= n/3 &&
			st.Total.Resident <= n/3 && st.Pending == n/3
	}, waitFor, pollEvery)
	st = s.Stats()
	assert.EqualValues(t, n/3, st.Total.Fired)
	assert.EqualValues(t, n/3, st.Total.Cancelled)
	assert.Equal(t, n/3, st.Total.Resident, "only the timers left for Stop are held")
	assert.Equal(t, s.Pending(), st.Pending)
	assert.Zero(t, st.Total.Stopped)

	require.Len(t, s.Stop(), n/3)
	st = s.Stats()
	assert.EqualValues(t, n/3, st.Total.Stopped)
	assert.Zero(t, st.Pending)
	var fired, cancelled, stopped uint64
	for _, sh := range st.Shards {
		fired += sh.Fired
		cancelled += sh.Cancelled
		stopped += sh.Stopped
	}
	assert.Equal(t, st.Total.Fired, fired)
	assert.Equal(t, st.Total.Cancelled, cancelled)
	assert.Equal(t, st.Total.Stopped, stopped)
}
