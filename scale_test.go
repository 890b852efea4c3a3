//go:build !race

// The scale test needs several GB under the race detector and minutes of
// its time, so it runs only in plain builds; CI runs it in a separate step
// (see .ci/run). The race-enabled suite covers the same paths at small
// scale (TestStressExactlyOnce, TestChurnSoak).

package shardwheel_test

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
)

// TestScale holds 5M timers across all shards and expires 1M of them within
// one second, twice: every expiring timer runs exactly once and never
// early, Pending returns to zero, and the heap returns to its baseline
// (pooled nodes are reused, not leaked).
func TestScale(t *testing.T) {
	if testing.Short() {
		t.Skip("scale test: 5M timers")
	}
	const resident, expiring = 5_000_000, 1_000_000
	s := newScheduler(t, shardwheel.WithTick(time.Millisecond))
	epoch := time.Now()
	handles := make([]shardwheel.Timer, resident)
	due := make([]int64, expiring) // ns since epoch
	runs := make([]atomic.Int32, expiring)
	var early, ran atomic.Int64

	var heap [2]uint64
	for cycle := range 2 {
		for i := range handles {
			tm, err := s.AfterFunc(time.Hour+time.Duration(i)*time.Microsecond, noop, shardwheel.ByKey(uint64(i)))
			require.NoError(t, err)
			handles[i] = tm
		}
		require.Equal(t, resident, s.Pending())
		ran.Store(0)
		for i := range expiring {
			delay := time.Duration(i) * time.Second / expiring // spread over 1s
			due[i] = int64(time.Since(epoch) + delay)
			_, err := s.AfterFunc(delay, func() {
				if now := int64(time.Since(epoch)); now < due[i] {
					early.Add(1)
				}
				runs[i].Add(1)
				ran.Add(1)
			}, shardwheel.ByKey(uint64(i)))
			require.NoError(t, err)
		}
		require.Eventually(t, func() bool { return ran.Load() == expiring }, time.Minute, 10*time.Millisecond)
		for i := range handles {
			require.True(t, handles[i].Cancel())
		}
		require.Zero(t, s.Pending())
		for i := range runs {
			require.EqualValues(t, 1, runs[i].Swap(0), "timer %d in cycle %d", i, cycle)
		}
		require.Zero(t, early.Load(), "timers ran early")
		// The shards sweep the cancelled nodes, nearly every node their
		// wheels hold, and leave at most a 64th of their arenas (whose
		// high water is about the timers each held at once) to their
		// slots.
		require.Eventually(t, func() bool {
			st := s.Stats().Total
			return st.Resident == st.HeldCancelled && st.HeldCancelled < (resident+expiring)/32
		}, time.Minute, pollEvery, "cycle %d: cancelled timers still held", cycle)
		if cycle == 0 {
			heap[0] = heapInUse()
		}
	}
	// The second cycle reuses the first one's nodes, or blocks given back
	// since: the heap does not grow. How much of their free space the
	// shards still hold when the sweep is done varies from run to run (by
	// up to a sixth, measured), and comes down as housekeeping gives blocks
	// back; a leak of the first cycle's nodes would not.
	assert.Eventually(t, func() bool {
		heap[1] = heapInUse()
		return float64(heap[1]) <= 1.05*float64(heap[0])
	}, time.Minute, 100*time.Millisecond, "heap after cycle 1: %d, after cycle 2: %d", heap[0], heap[1])
	st := s.Stats()
	assert.EqualValues(t, 2*expiring, st.Total.Fired)
	assert.EqualValues(t, 2*resident, st.Total.Cancelled)
	assert.Equal(t, st.Total.HeldCancelled, st.Total.Resident, "no live timer left")
	runtime.KeepAlive(handles)
}
