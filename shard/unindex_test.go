package shard

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUnindexHearsOfEveryIndexedEnd checks Config.Unindex: it is called
// exactly once per ScheduleIndexed timer, with its key and Ref, however the
// timer ended (fired; cancelled while filed or while still queued; fired
// after an earlier Reset re-filed it), after the timer ended and before a
// firing timer's task runs, and never for a plain Schedule timer or one
// that CancelUnindexed stopped (its caller removed the entry itself).
func TestUnindexHearsOfEveryIndexedEnd(t *testing.T) {
	type call struct {
		key uint64
		ref Ref
	}
	heard := map[call]int{}
	var h *harness
	h = newHarness(t, func(c *Config) {
		c.Unindex = func(key uint64, r Ref) {
			assert.False(t, h.sh.Pending(r), "key %d: Unindex is called after the timer ended", key)
			heard[call{key, r}]++
		}
	})
	refs := map[uint64]Ref{}
	heardBeforeTask := map[uint64]int{}
	indexed := func(key uint64, d time.Duration) Ref {
		r, rej := schedIndexed(h.sh, key, d, func() { heardBeforeTask[key] = heard[call{key, refs[key]}] })
		require.Equal(t, Accepted, rej)
		refs[key] = r
		return r
	}

	indexed(1, 0)
	plain, rej := sched(h.sh, 2, 0, func() {})
	require.Equal(t, Accepted, rej)
	h.pass()
	require.True(t, h.sh.Cancel(indexed(3, time.Hour)),
		"cancelled before the shard goroutine took it off its queue")
	filed := indexed(4, time.Hour)
	h.pass()
	require.True(t, h.sh.Cancel(filed), "cancelled in the wheel")
	earlier := indexed(5, time.Hour)
	h.pass()
	require.True(t, h.sh.Reset(earlier, 0, 0), "an earlier deadline queues the node for attention")
	unindexed := indexed(6, time.Hour)
	h.pass()
	require.True(t, h.sh.CancelUnindexed(unindexed))
	require.False(t, h.sh.CancelUnindexed(unindexed), "once")
	h.step(3 * testTick)

	for _, key := range []uint64{1, 3, 4, 5} {
		assert.Equal(t, 1, heard[call{key, refs[key]}], "key %d", key)
	}
	assert.Equal(t, map[uint64]int{1: 1, 5: 1}, heardBeforeTask, "firing timers are unindexed before their task runs")
	assert.Zero(t, heard[call{2, plain}], "a plain timer is never reported")
	assert.Zero(t, heard[call{6, unindexed}], "nor one CancelUnindexed stopped")
	assert.Len(t, heard, 4)
	assert.Zero(t, h.pending())
}

// TestUnindexHearsOfAnIndexedSeriesEnd: an indexed series is not
// reported while it runs, period after period, but once when a Cancel
// ends it, and never when CancelUnindexed does.
func TestUnindexHearsOfAnIndexedSeriesEnd(t *testing.T) {
	heard := map[Ref]int{}
	h := newHarness(t, func(c *Config) {
		c.Unindex = func(_ uint64, r Ref) { heard[r]++ }
	})
	var runs atomic.Int32
	series := func(key uint64) Ref {
		r, rej := h.sh.Schedule(&Request{Key: key, Now: h.sh.clock.Now(), Task: Task{Func: func() { runs.Add(1) }},
			Period: testTick, Indexed: true})
		require.Equal(t, Accepted, rej)
		return r
	}
	cancelled, unindexed := series(1), series(2)
	h.step(5 * testTick)
	require.Eventually(t, func() bool { return runs.Load() >= 4 }, waitFor, time.Millisecond, "the series run")
	assert.Empty(t, heard, "a live series is not reported")
	require.True(t, h.sh.Cancel(cancelled))
	require.True(t, h.sh.CancelUnindexed(unindexed))
	h.step(3 * testTick)
	assert.Equal(t, map[Ref]int{cancelled: 1}, heard)
}
