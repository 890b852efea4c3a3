package shard

import (
	"math/bits"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// schedSlack schedules f delay from now with slack on sh.
func schedSlack(sh *Shard, key uint64, delay, slack time.Duration, f func()) (Ref, Reject) {
	return sh.Schedule(&Request{Key: key, Now: sh.clock.Now(), Delay: delay, Slack: slack, Task: Task{Func: f}})
}

// TestSlackTick: the chosen tick lies in [lo, hi] and has the most
// trailing zeros of any tick there; no slack (or less than a tick of it)
// is lo.
func TestSlackTick(t *testing.T) {
	h := newHarness(t)
	sh := h.sh
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		now := sh.origin + time.Duration(r.Int64N(int64(time.Hour)))
		delay := time.Duration(r.Int64N(int64(2*time.Minute))) - time.Second
		slack := time.Duration(r.Int64N(int64(time.Duration(1) << r.IntN(36))))
		got := sh.slackTick(now, delay, slack)
		lo := sh.deadlineTick(now, delay)
		hi := sh.floorTick(now + sh.clampDelay(delay) + slack)
		if hi <= lo {
			require.Equal(t, lo, got)
			continue
		}
		require.GreaterOrEqual(t, got, lo)
		require.LessOrEqual(t, got, hi)
		tz := bits.TrailingZeros64(got)
		// No tick of the range is a multiple of 2^(tz+1).
		step := uint64(1) << (tz + 1)
		require.Greater(t, (lo+step-1)/step*step, hi, "lo %d hi %d got %d", lo, hi, got)
	}
	require.Equal(t, sh.deadlineTick(sh.origin, time.Second), sh.slackTick(sh.origin, time.Second, 0))
	require.Equal(t, sh.deadlineTick(sh.origin, time.Second), sh.slackTick(sh.origin, time.Second, testTick/2))
}

// TestSlackTimerSkipsTheCascade: with slack that spans a level-2 slot's
// start, a far timer lands in a coarse slot and runs at that tick without
// a single move; the same timer without slack cascades down every level.
// The wheel has 8 slots per level (slots of 4^l ticks).
func TestSlackTimerSkipsTheCascade(t *testing.T) {
	for _, slack := range []time.Duration{0, 40 * testTick} {
		h := newHarness(t)
		start := h.clock.Now()
		var ran time.Duration
		_, rej := schedSlack(h.sh, 1, 300*testTick, slack, func() { ran = h.clock.Now() - start })
		require.Equal(t, Accepted, rej)
		h.step(400 * testTick)
		st := h.sh.statsNow()
		if slack == 0 {
			assert.Equal(t, 300*testTick, ran, "exact")
			assert.NotZero(t, st.Refiled, "cascaded")
			continue
		}
		assert.Equal(t, 320*testTick, ran, "320 = 5*64: a level-3 slot's start in [300, 340]")
		assert.Zero(t, st.Refiled, "no cascade")
		assert.NotZero(t, h.sh.h.w.coarseBase, "coarse slots made")
	}
}

// TestSlackWindows runs a random mix of exact timers and timers with slack
// and checks every outcome against its window: a timer with slack never
// runs early nor after its deadline plus slack (at the harness's pass per
// tick: in the pass of the tick at or before that bound), and an exact
// timer runs exactly at its tick, as without any timer with slack. Some
// are cancelled, some reset, some scheduled while the wheel is held.
func TestSlackWindows(t *testing.T) {
	for seed := range uint64(4) {
		h := newHarness(t)
		sweepFrom(h.sh, 64)
		r := rand.New(rand.NewPCG(seed, 99))
		type timer struct {
			ref       Ref
			lo, hi    time.Duration // may run in [lo, hi]
			exact     bool
			ran       bool
			cancelled bool
		}
		var timers []*timer
		for tick := 0; tick < 3000; tick++ {
			for range r.IntN(4) {
				now := h.clock.Now()
				// At least a tick: a timer due at the tick just passed
				// would run at the next pass, a tick after its window.
				delay := testTick + time.Duration(r.Int64N(int64(2000*testTick)))
				var slack time.Duration
				tm := &timer{exact: r.IntN(2) == 0}
				if !tm.exact {
					slack = time.Duration(r.Int64N(int64(300 * testTick)))
				}
				tm.lo = now + max(delay, 0)
				tickLo := h.sh.tickTime(h.sh.deadlineTick(now, delay))
				tm.hi = max(tickLo, h.sh.tickTime(h.sh.floorTick(now+max(delay, 0)+slack)))
				if tm.exact {
					tm.hi = tickLo
				}
				f := func() {
					require.False(t, tm.ran, "ran twice")
					tm.ran = true
					at := h.clock.Now()
					require.GreaterOrEqual(t, at, tm.lo, "early")
					require.LessOrEqual(t, at, tm.hi, "late")
					if tm.exact {
						require.Equal(t, tm.hi, at, "an exact timer runs at its tick")
					}
				}
				held := r.IntN(5) == 0
				var unhold func()
				if held {
					unhold = holdWheel(t, h.sh)
				}
				var rej Reject
				tm.ref, rej = schedSlack(h.sh, uint64(len(timers)), delay, slack, f)
				require.Equal(t, Accepted, rej)
				if held {
					unhold()
				}
				timers = append(timers, tm)
			}
			if len(timers) > 0 && r.IntN(3) == 0 {
				tm := timers[r.IntN(len(timers))]
				if !tm.ran && !tm.cancelled {
					if r.IntN(2) == 0 {
						require.True(t, h.sh.Cancel(tm.ref))
						tm.cancelled = true
					} else {
						now := h.clock.Now()
						d := testTick + time.Duration(r.Int64N(int64(500*testTick)))
						require.True(t, h.sh.Reset(tm.ref, 0, d))
						tm.exact, tm.lo, tm.hi = true, now+d, h.sh.tickTime(h.sh.deadlineTick(now, d))
					}
				}
			}
			h.step(testTick)
		}
		h.step(3000 * testTick)
		for i, tm := range timers {
			require.True(t, tm.ran || tm.cancelled, "timer %d never ran", i)
		}
		assert.NotZero(t, h.sh.h.w.coarseBase, "some timers went to coarse slots")
		assert.Zero(t, h.pending())
		assert.Zero(t, h.sh.h.w.count)
	}
}

// TestSlackTakeBackAndSweep: a coarse slot's node is taken back by a
// Cancel right after its Schedule, and swept when cancelled later.
func TestSlackTakeBackAndSweep(t *testing.T) {
	h := newHarness(t)
	sweepFrom(h.sh, 8)
	var refs []Ref
	for i := range 64 {
		r, rej := schedSlack(h.sh, uint64(i), 300*testTick, 40*testTick, func() { t.Fatal("ran") })
		require.Equal(t, Accepted, rej)
		refs = append(refs, r)
	}
	h.pass()
	require.EqualValues(t, 64, h.sh.h.w.count)
	for _, r := range refs {
		require.True(t, h.sh.Cancel(r))
	}
	for range 20 {
		h.step(testTick)
	}
	assert.Zero(t, h.sh.h.w.count, "swept")
	st := h.sh.statsNow()
	assert.EqualValues(t, 64, st.TakenBack+st.Swept)
	h.step(400 * testTick)
}
