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

// TestDeadlineIsAnchoredAtTheCall has the shard goroutine pick a timer up long after
// the Schedule call: it still runs at its deadline's tick, not a delay
// after the shard goroutine saw it.
func TestDeadlineIsAnchoredAtTheCall(t *testing.T) {
	h := newHarness(t)
	h.pass()
	call := h.clock.Now()
	_, rej := sched(h.sh, 1, 30*testTick+testTick/2, func() { h.fired[1] = h.clock.Now() })
	require.Equal(t, Accepted, rej)
	h.clock.Advance(20 * testTick) // the shard goroutine is busy elsewhere for 20 ticks
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
		passHeld(t, sh)
		peak = max(peak, sh.work.refiled)
		require.LessOrEqual(t, sh.work.refiled, bound, "pass at tick %d re-filed more than its share", tick)
		if tick%64 == 0 {
			sh.verify()
		}
	}
	sh.verify()
	assert.Positive(t, peak)
	assert.Equal(t, uint64(n), sh.statsNow().Fired)
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
	assert.True(t, h.sh.more, "the shard goroutine passes again at once")
	h.pass()
	h.pass()
	assert.False(t, h.sh.more)
	assert.Equal(t, 3*passBudget, int(h.sh.statsNow().Scheduled)-1)
	assert.Zero(t, h.sh.statsNow().Queued, "all taken in")
}

// TestIdlePauseIsNotTickLag parks a shard with nothing to do for two
// seconds, then schedules a timer: the pass that takes it in records no
// tick lag, and the timer's own tick, reached on time, records none worth
// mentioning.
func TestIdlePauseIsNotTickLag(t *testing.T) {
	h := newHarness(t)
	h.pass()
	_, park, timed := h.sh.planHeld()
	require.True(t, park)
	require.False(t, timed, "nothing due: parked untimed")
	h.clock.Advance(2 * time.Second)
	_, rej := sched(h.sh, 1, 50*testTick, func() { h.fired[1] = h.clock.Now() })
	require.Equal(t, Accepted, rej)
	h.pass() // woken by the Schedule
	assert.Zero(t, h.sh.statsNow().TickLag.Count(), "a parked shard is not late")
	wake, _, timed := h.sh.planHeld()
	require.True(t, timed)
	h.clock.Advance(h.sh.tickTime(wake) - h.clock.Now())
	h.pass()
	lag := h.sh.statsNow().TickLag
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
	h.clock.Advance(8 * testTick) // the shard goroutine reaches tick 5 three ticks late
	h.pass()
	require.Len(t, h.fired, 3)
	st := h.sh.statsNow()
	require.Equal(t, uint64(3), st.Lateness.Count())
	assert.Equal(t, int64(3*testTick), st.Lateness.Max())
	assert.Equal(t, PassWork{Fired: 3, End: h.clock.Now()}, st.SlowestPass, "the busiest pass and what it did")
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

// TestResetsAndCancelsDuringAPartialCascade fills one level-2 slot of
// an 8-slot wheel with more than cascadeChunk timers, so that it moves down
// in shares, and resets (earlier, later, across levels) and cancels timers
// both moved and not yet moved while it is half done. Stepping every tick,
// each timer runs at exactly its tick, and no pass moves more than two
// chunks (one per level whose window is open) plus the timers reset later,
// which their old slots re-file.
func TestResetsAndCancelsDuringAPartialCascade(t *testing.T) {
	h := newHarness(t)
	sh, w := h.sh, h.sh.h.w
	r := rand.New(rand.NewPCG(3, 4))
	e := newTickExpect(h)
	h.pass()
	num, first, width := farLevelTwoSlot(w)
	require.Equal(t, 2, w.levelFor(first))
	require.Equal(t, 2, w.levelFor(first+width-1))
	const n = 4000
	for id := range n {
		e.scheduleAt(id, first+r.Uint64N(width), r)
	}
	h.pass()
	si := w.slotIndex(2, num)
	require.Equal(t, n, int(w.slots[si].filed))
	cancelled := map[int]bool{}
	acted, later := false, 0
	for w.elapsed < first+width+200 {
		h.clock.Advance(testTick)
		h.pass()
		if !acted && w.slots[si].head != 0 && int(w.slots[si].filed) < n {
			acted = true // half moved: some timers are in level 1, some still here
			for range 600 {
				id := r.IntN(n)
				if _, ran := e.ran[id]; ran || cancelled[id] {
					continue
				}
				switch r.IntN(4) {
				case 0:
					require.True(t, sh.Cancel(e.refs[id]))
					cancelled[id] = true
					delete(e.want, id)
				case 1: // earlier, maybe already due
					e.resetTo(id, w.elapsed+r.Uint64N(e.want[id]-w.elapsed+1), r)
				case 2: // later, within the slot or beyond
					e.resetTo(id, e.want[id]+r.Uint64N(2*width), r)
					later++
				default: // much later: back to a higher level
					e.resetTo(id, e.want[id]+r.Uint64N(1<<9), r)
					later++
				}
			}
		}
		assert.LessOrEqual(t, sh.work.refiled, 2*cascadeChunk+later, "pass to tick %d", w.elapsed)
		for id, got := range e.ran {
			require.Equal(t, e.want[id], got, "timer %d ran at the wrong tick", id)
		}
	}
	require.True(t, acted, "the slot was never seen half moved")
	for w.count > 0 || sh.queue.Waiting() {
		h.clock.Advance(testTick)
		h.pass()
	}
	for id, want := range e.want {
		require.Equal(t, want, e.ran[id], "timer %d", id)
	}
	for id := range cancelled {
		require.NotContains(t, e.ran, id)
	}
	require.Zero(t, h.pending())
}

// TestCascadesAndTransfersShareThePassBudget has cascadeAhead move more than the
// pass budget in one pass: the transfer takes nothing in that pass but asks
// for another at once, which takes the waiting timers in at the same tick.
func TestCascadesAndTransfersShareThePassBudget(t *testing.T) {
	h := newHarness(t)
	sh, w := h.sh, h.sh.h.w
	r := rand.New(rand.NewPCG(5, 6))
	e := newTickExpect(h)
	h.pass()
	num, first, width := farLevelTwoSlot(w)
	const n = 9000
	for id := range n {
		e.scheduleAt(id, first+r.Uint64N(width), r)
	}
	for h.pass(); sh.more; h.pass() {
	}
	open, deadline := w.windowOpen(2, num), w.cascadeDeadline(2, num)
	h.clock.Advance(sh.tickTime(open) - h.clock.Now())
	h.pass() // the window opens: elapsed enters the slot before
	require.Equal(t, open, w.elapsed)
	unhold := holdWheel(t, sh) // the new timers wait in the queue
	for id := n; id < n+100; id++ {
		e.scheduleAt(id, w.elapsed+2, r)
	}
	unhold()
	h.clock.Advance(sh.tickTime(deadline-1) - h.clock.Now())
	h.pass()
	// Transfers and cascades do not starve each other: the pass takes the
	// new timers in and moves the rest of the slot, its share of the
	// window it slept through.
	assert.Equal(t, 100, sh.work.transferred)
	assert.Zero(t, w.slots[w.slotIndex(2, num)].head, "the slot moved down before its deadline")
	assert.False(t, sh.more)
	for w.count > 0 {
		h.clock.Advance(testTick)
		h.pass()
	}
	for id := range n {
		require.Equal(t, e.want[id], e.ran[id], "timer %d", id)
	}
	for id := n; id < n+100; id++ {
		require.Contains(t, e.ran, id) // never early: checked by the task
	}
}

// TestTransferCapAboveThePassBudget takes a burst in with a cap per
// tick above the pass budget: a budget's worth, then the rest of the cap in
// the pass at once after it, then nothing more until the next tick.
func TestTransferCapAboveThePassBudget(t *testing.T) {
	const capPerTick = passBudget + 1000
	h := newHarness(t, func(c *Config) { c.TransferCap = capPerTick })
	sh := h.sh
	h.pass()
	ran := 0
	total := 2*capPerTick + 5
	unhold := holdWheel(t, sh) // the burst waits in the queue
	for i := range total {
		_, rej := sched(sh, uint64(i), 0, func() { ran++ })
		require.Equal(t, Accepted, rej)
	}
	unhold()
	type step struct {
		advance     bool
		transferred int
		more        bool
	}
	for i, s := range []step{
		{true, passBudget, true}, {false, 1000, false}, {false, 0, false},
		{true, passBudget, true}, {false, 1000, false},
		{true, 5, false}, {true, 0, false},
	} {
		if s.advance {
			h.clock.Advance(testTick)
		}
		h.pass()
		assert.Equal(t, s.transferred, sh.work.transferred, "pass %d", i)
		assert.Equal(t, s.more, sh.more, "pass %d", i)
	}
	assert.Equal(t, total, ran)
	assert.Equal(t, uint64(2), sh.statsNow().CapHits)
}
