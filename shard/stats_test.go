package shard

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStatsCountEveryOutcome(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.TransferCap = 4 })
	var refs []Ref
	unhold := holdWheel(t, h.sh) // they wait in the queue
	for i := range 10 {
		r, rej := sched(h.sh, uint64(i), 3*testTick, func() { h.fired[i] = h.clock.Now() })
		require.Equal(t, Accepted, rej)
		refs = append(refs, r)
	}
	unhold()
	st := h.sh.statsNow()
	assert.Equal(t, uint64(10), st.Scheduled)
	assert.Equal(t, 10, st.Queued, "nothing taken yet")

	h.pass() // takes 4: the cap
	st = h.sh.statsNow()
	assert.Equal(t, 6, st.Queued)
	assert.Equal(t, 10, st.Resident)
	assert.Equal(t, 4, st.TransferLast)
	assert.Equal(t, uint64(1), st.CapHits)
	assert.Equal(t, 10, st.QueuedPeak)

	require.True(t, h.sh.Cancel(refs[0]))                 // in the wheel
	require.True(t, h.sh.Cancel(refs[9]))                 // still in its queue
	require.True(t, h.sh.Reset(refs[1], 0, 600*testTick)) // later, across levels
	unhold = holdWheel(t, h.sh)
	_, rej := sched(h.sh, 99, 0, func() { panic("x") }) // panics when run; queued
	require.Equal(t, Accepted, rej)
	unhold()
	h.step(10 * testTick)

	st = h.sh.statsNow()
	assert.Equal(t, uint64(8), st.Fired, "7 timers and the panicking one")
	assert.Equal(t, uint64(2), st.Cancelled)
	assert.Equal(t, uint64(1), st.Reset)
	assert.Equal(t, uint64(1), st.Panics)
	assert.Equal(t, 1, st.Resident, "the reset timer")
	assert.Zero(t, st.Queued)
	assert.Equal(t, 4, st.TransferPeak)
	assert.GreaterOrEqual(t, st.Refiled, uint64(1), "the reset timer was found at its old slot")
	assert.Equal(t, uint64(10), st.Ticks)
	assert.Equal(t, st.Fired, st.Lateness.Count(), "every fired timer is in the lateness histogram")
	// The harness runs each tick on time; the panicking timer, due at once,
	// waited two ticks in its queue behind the transfer cap, and Stats say
	// so (measured from its own deadline tick).
	assert.Equal(t, 2*testTick, time.Duration(st.Lateness.Max()))
	assert.Equal(t, st.Fired, st.TaskTime.Count(), "every task is timed")

	h.sh.Close()
	h.sh.Drain(func(Ref, uint64, time.Duration, Task) bool { return true })
	assert.Equal(t, uint64(1), h.sh.statsNow().Stopped)
}

func TestStatsTickLagAndSkippedTicks(t *testing.T) {
	h := newHarness(t)
	h.schedule(1, 50*testTick)
	// The shard goroutine plans to sleep until the timer's slot or its cascade
	// window: emulate it waking 3ms after that.
	start := h.sh.h.w.elapsed
	wake, park, _ := h.sh.planHeld()
	require.True(t, park)
	require.LessOrEqual(t, wake, start+50)
	h.clock.Advance(time.Duration(wake-start)*testTick + 3*testTick)
	h.pass()
	st := h.sh.statsNow()
	assert.Equal(t, uint64(1), st.Ticks)
	assert.Greater(t, wake-start, uint64(10), "a far timer lets the shard goroutine sleep")
	assert.Equal(t, wake-start+2, st.TicksSkipped, "an idle shard does not process empty ticks")
	require.Equal(t, uint64(1), st.TickLag.Count())
	assert.InDelta(t, float64(3*testTick), float64(st.TickLag.Max()), float64(testTick))
}

func TestStatsOffRecordsNoDistributions(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Stats = false })
	for i := range 40 {
		h.schedule(i, testTick)
	}
	h.step(3 * testTick)
	st := h.sh.statsNow()
	assert.Equal(t, uint64(40), st.Fired, "counters are always kept")
	assert.Zero(t, st.Lateness.Count())
	assert.Zero(t, st.TaskTime.Count())
	assert.Zero(t, st.TickLag.Count())
}

// The Scheduled figure comes from two readings of one counter (the
// published count and own's low bits) plus lane counters that Stop's undo
// takes back: whatever the interleaving, Stats never reports less than it
// reported before.
func TestStatsScheduledNeverGoesBackwards(t *testing.T) {
	t.Run("a holder published a count it has not yet left in own", func(t *testing.T) {
		h := newHarness(t)
		unhold := holdWheel(t, h.sh)
		h.sh.h.counts[cScheduled] = publishEvery // filed before this hold
		unhold()
		require.Equal(t, uint64(publishEvery), h.sh.statsNow().Scheduled)

		unhold = holdWheel(t, h.sh)
		h.sh.countFiled() // reaches 2^20: published while still held
		assert.Equal(t, uint64(publishEvery+1), h.sh.statsNow().Scheduled, "while held")
		unhold()
		assert.Equal(t, uint64(publishEvery+1), h.sh.statsNow().Scheduled, "after")
	})
	t.Run("a Schedule undone by Stop after a reader counted it", func(t *testing.T) {
		h := newHarness(t)
		ref := h.schedule(1, time.Hour)
		require.Equal(t, uint64(1), h.sh.statsNow().Scheduled)
		h.sh.Close()
		require.True(t, h.sh.undo(ref, &h.sh.lanes[0]))
		assert.Zero(t, h.sh.scheduledNow(h.sh.sumLanes()), "the exact count")
		assert.Equal(t, uint64(1), h.sh.statsNow().Scheduled, "the reported one")
	})
	t.Run("a reading that met an undo but not its push", func(t *testing.T) {
		h := newHarness(t)
		// sumLanes reads undone first, so this torn reading cannot
		// happen; were it read, it must not wrap to 2^64-1, which the
		// reported maximum would then keep for good.
		assert.Zero(t, h.sh.scheduledNow(laneSums{undone: 1}))
	})
}

// TestRecentPeaksForgetOldPasses: Stats.Recent holds the slowest pass and
// the peaks of the last minute, to the second of the shard's clock, while
// SlowestPass and the other peaks keep the highest since the start.
func TestRecentPeaksForgetOldPasses(t *testing.T) {
	var h *harness
	slow := true
	h = newHarness(t, func(c *Config) {
		c.TransferCap = 3
		// The pass that frees the first indexed timer takes 40ms on
		// this clock: Unindex runs in it, holding the wheel.
		c.Unindex = func(key uint64, _ Ref) {
			if key == 0 && slow {
				slow = false
				h.clock.Advance(40 * testTick)
			}
		}
	})
	// The harness's clock starts on a whole second: this pass starts in
	// the ring's second of that reading.
	require.Zero(t, h.clock.Now()%time.Second)
	start := h.clock.Now()
	unhold := holdWheel(t, h.sh)
	for i := range 5 {
		_, rej := schedIndexed(h.sh, uint64(i), testTick, func() {})
		require.Equal(t, Accepted, rej)
	}
	unhold()
	h.pass() // takes in 3 of 5 (the cap)
	h.clock.Advance(testTick)
	h.pass() // fires the first ones: 40ms
	st := h.sh.Stats()
	require.Equal(t, 40*testTick, st.SlowestPass.Duration)
	assert.Equal(t, st.SlowestPass, st.Recent.SlowestPass)
	assert.Equal(t, 5, st.QueuedPeak)
	assert.Equal(t, 5, st.Recent.QueuedPeak)
	assert.Equal(t, 3, st.Recent.TransferPeak)
	assert.Equal(t, 3, st.TransferPeak)
	h.runOut()
	require.Equal(t, uint64(5), h.sh.Stats().Fired)

	// Still within the window at the last moment of its sixtieth second.
	h.clock.Advance(start + RecentWindow + time.Second - testTick - h.clock.Now())
	h.pass()
	st = h.sh.Stats()
	assert.Equal(t, 40*testTick, st.Recent.SlowestPass.Duration, "started %v ago", h.clock.Now()-start)
	assert.Equal(t, 5, st.Recent.QueuedPeak)

	// A second later it is gone from Recent only.
	h.clock.Advance(testTick)
	h.pass()
	st = h.sh.Stats()
	assert.Equal(t, 40*testTick, st.SlowestPass.Duration, "since the start")
	assert.Equal(t, 5, st.QueuedPeak)
	assert.Equal(t, 3, st.TransferPeak)
	assert.Equal(t, PassWork{}, st.Recent.SlowestPass, "the passes since took no time on this clock and did no work")
	assert.Zero(t, st.Recent.QueuedPeak)
	assert.Zero(t, st.Recent.TransferPeak)
}
