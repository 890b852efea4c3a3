package shard

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Time discipline: deadlines anchored at the call, bounded passes, and
// Stats that report what users feel.

// TestDeadlineIsAnchoredAtTheCall has the worker pick a timer up long after
// the Schedule call: it still runs at its deadline's tick, not a delay
// after the worker saw it.
func TestDeadlineIsAnchoredAtTheCall(t *testing.T) {
	h := newHarness(t)
	h.pass()
	call := h.clock.Now()
	_, rej := sched(h.sh, 1, 30*testTick+testTick/2, func() { h.fired[1] = h.clock.Now() })
	require.Equal(t, Accepted, rej)
	h.clock.Advance(20 * testTick) // the worker is busy elsewhere for 20 ticks
	h.step(40 * testTick)
	require.Contains(t, h.fired, 1)
	want := call + 31*testTick // the first tick at or after call + 30.5 ticks
	assert.Equal(t, want, h.fired[1], "ran at the first tick at or after its deadline")
}

// TestLevelOneSlotOfAMillionCascadesInBoundedShares fills one level-1 slot
// with a million timers spread over its ticks: no pass re-files more than
// the slot's share of its cascade window, and every timer still runs at
// the first tick at or after its deadline.
func TestLevelOneSlotOfAMillionCascadesInBoundedShares(t *testing.T) {
	n := 1_000_000
	if testing.Short() || raceEnabled {
		n = 100_000
	}
	h := newHarness(t, func(c *Config) { c.WheelSize = 512; c.Stats = false })
	sh, w := h.sh, h.sh.h.w
	h.pass()
	width := uint64(1) << w.shift // a level-1 slot's ticks
	num := w.num(1, w.elapsed) + 3
	first := num * width
	require.Equal(t, 1, w.levelFor(first), "the slot is at level 1")
	now := h.clock.Now()
	due := make([]uint64, n)
	ran := make([]uint64, n)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range n {
		due[i] = first + r.Uint64N(width)
		delay := sh.tickTime(due[i]) - now - time.Duration(r.Int64N(int64(testTick))) // due within the tick before
		_, rej := sched(sh, uint64(i), delay, func() { ran[i] = sh.floorTick(h.clock.Now()) })
		require.Equal(t, Accepted, rej)
	}
	for passHeld(t, sh); sh.more; passHeld(t, sh) {
	}
	sh.verify()
	require.Equal(t, n, int(sh.h.w.slots[w.slotIndex(1, num)].filed), "all in the one slot")

	window := w.cascadeDeadline(1, num) - w.windowOpen(1, num)
	bound := max((n+int(window)-1)/int(window)+1, cascadeChunk)
	peak := 0
	for tick := w.elapsed + 1; tick <= first+width; tick++ {
		h.clock.Advance(testTick)
		require.True(t, passHeld(t, sh))
		peak = max(peak, sh.work.refiled)
		require.LessOrEqual(t, sh.work.refiled, bound, "pass at tick %d re-filed more than its share", tick)
		if tick%64 == 0 {
			sh.verify()
		}
	}
	sh.verify()
	assert.Positive(t, peak)
	assert.Equal(t, uint64(n), sh.Stats().Fired)
	for i := range n {
		if ran[i] != due[i] {
			require.Equal(t, due[i], ran[i], "timer %d ran at the wrong tick", i)
		}
	}
}

// TestPassBudgetLetsDueTimersRunDuringABurst puts a burst bigger than the
// pass budget in the queue just as a filed timer comes due: the first pass
// takes in only a budget's worth, runs the due timer, and asks for another
// pass at once.
func TestPassBudgetLetsDueTimersRunDuringABurst(t *testing.T) {
	h := newHarness(t)
	h.schedule(0, 2*testTick)
	unhold := holdWheel(t, h.sh) // the burst waits in the queue
	for i := 1; i <= 3*passBudget; i++ {
		_, rej := sched(h.sh, uint64(i), time.Hour, func() {})
		require.Equal(t, Accepted, rej)
	}
	unhold()
	h.clock.Advance(2 * testTick)
	h.pass()
	assert.Contains(t, h.fired, 0, "the due timer ran in the first pass")
	assert.Equal(t, passBudget, h.sh.work.transferred)
	assert.True(t, h.sh.more, "the worker passes again at once")
	h.pass()
	h.pass()
	assert.False(t, h.sh.more)
	assert.Equal(t, 3*passBudget, int(h.sh.Stats().Scheduled)-1)
	assert.Zero(t, h.sh.Stats().Queued, "all taken in")
}

// TestIdlePauseIsNotTickLag parks a shard with nothing to do for two
// seconds, then schedules a timer: the pass that takes it in records no
// tick lag, and the timer's own tick, reached on time, records none worth
// mentioning.
func TestIdlePauseIsNotTickLag(t *testing.T) {
	h := newHarness(t)
	h.pass()
	_, park, timed := h.sh.plan()
	require.True(t, park)
	require.False(t, timed, "nothing due: parked untimed")
	h.clock.Advance(2 * time.Second)
	_, rej := sched(h.sh, 1, 50*testTick, func() { h.fired[1] = h.clock.Now() })
	require.Equal(t, Accepted, rej)
	h.pass() // woken by the Schedule
	assert.Zero(t, h.sh.Stats().TickLag.Count(), "a parked shard is not late")
	wake, _, timed := h.sh.plan()
	require.True(t, timed)
	h.clock.Advance(h.sh.tickTime(wake) - h.clock.Now())
	h.pass()
	lag := h.sh.Stats().TickLag
	require.Equal(t, uint64(1), lag.Count())
	assert.Zero(t, lag.Max(), "woken exactly at its tick")
}

// TestLatenessIsMeasuredFromTheDeadlineTick runs a timer three ticks late:
// Stats.Lateness says so, against the tick its requested deadline rounds
// up to.
func TestLatenessIsMeasuredFromTheDeadlineTick(t *testing.T) {
	h := newHarness(t)
	for id := range 3 {
		h.schedule(id, 5*testTick) // one pass each, which takes it in
	}
	h.clock.Advance(8 * testTick) // the worker reaches tick 5 three ticks late
	h.pass()
	require.Len(t, h.fired, 3)
	st := h.sh.Stats()
	require.Equal(t, uint64(3), st.Lateness.Count())
	assert.Equal(t, int64(3*testTick), st.Lateness.Max())
	assert.Equal(t, PassWork{Fired: 3}, st.SlowestPass, "the busiest pass and what it did")
}

// TestForcedCascadeEmptiesTheSlotWhateverFiledSays has a slot whose filed
// count is short of its length, as 2^32 inserts would leave it were it not
// saturating: the cascade at its deadline still empties it.
func TestForcedCascadeEmptiesTheSlotWhateverFiledSays(t *testing.T) {
	h := newHarness(t)
	h.pass()
	w := h.sh.h.w
	num := w.num(1, w.elapsed) + 4
	for id := range 2 {
		h.schedule(id, h.sh.tickTime(num<<w.shift)-h.clock.Now())
	}
	si := w.slotIndex(1, num)
	require.NotZero(t, w.slots[si].head)
	w.slots[si].filed = 1
	h.clock.Advance(20 * testTick) // past the slot's cascade deadline in one pass
	h.pass()
	assert.Zero(t, w.slots[si].head)
	assert.Len(t, h.fired, 2)
}

// TestFootprintCountsTheWheelNewBuilds: sizes below the minimum get the
// minimum's wheel, and Footprint says so.
func TestFootprintCountsTheWheelNewBuilds(t *testing.T) {
	a, err := New(Config{Tick: 1, WheelSize: 2, TransferCap: 1, OnPanic: func(any) {}})
	require.NoError(t, err)
	b, err := New(Config{Tick: 1, WheelSize: minWheelSize, TransferCap: 1, OnPanic: func(any) {}})
	require.NoError(t, err)
	require.Len(t, a.h.w.slots, len(b.h.w.slots))
	assert.Equal(t, Footprint(minWheelSize, 2), Footprint(2, 2))
}
