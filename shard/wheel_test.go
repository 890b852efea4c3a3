package shard

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWheelLevels(t *testing.T) {
	assert.Equal(t, 5, wheelLevels(512), "the package comment's table")
	assert.Equal(t, wheelLevels(minWheelSize), wheelLevels(2), "sizes below the minimum use it")
	for _, size := range []int{4, 8, 16, 64, 512, 1 << 16} {
		// Level l's ring covers size * (size/2)^l ticks. The top level's
		// must reach past twice the longest delay, so that a wrapped slot
		// is never mistaken for a current one, and one level fewer must
		// not: levels are not wasted.
		levels := wheelLevels(size)
		span := func(levels int) float64 {
			s := float64(size)
			for range levels - 1 {
				s *= float64(size / 2)
			}
			return s
		}
		assert.Greater(t, span(levels), 2.0*maxDelayTicks, "size %d", size)
		assert.LessOrEqual(t, span(levels-1), 2.0*maxDelayTicks, "size %d", size)
	}
}

func TestLevelFor(t *testing.T) {
	h := newHarness(t) // 8 slots per level: level l's are 4^l ticks wide
	w := h.sh.h.w
	w.elapsed = 1000
	tests := []struct {
		t     uint64
		level int
	}{
		{1001, 0}, {1007, 0}, // fewer than 8 ticks ahead
		{1008, 1}, {1031, 1}, // slot 1031>>2 = 257 is fewer than 8 after 1000>>2 = 250
		{1032, 2}, {1119, 2}, // 1119>>4 = 69, 62 + 7
		{1120, 3},
		{1 << 40, w.levels - 1}, {1 << 62, w.levels - 1}, // beyond every ring: the top level
	}
	for _, tt := range tests {
		assert.Equal(t, tt.level, w.levelFor(tt.t), "t=%d", tt.t)
	}
}

func TestUnwrapTicks(t *testing.T) {
	const wrap = 1 << ticksBits
	tests := []struct{ full, ref uint64 }{
		{0, 0}, {5, 3}, {3, 5}, {wrap + 5, wrap - 5}, {wrap - 5, wrap + 5},
		{3*wrap + 17, 3*wrap + 17 + maxDelayTicks}, {7*wrap + maxDelayTicks, 7 * wrap},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.full, unwrapTicks(tt.full&ticksMask, tt.ref), "full=%d ref=%d", tt.full, tt.ref)
	}
}

func TestStateEncoding(t *testing.T) {
	s := makeState(0xFFFF_FFFF, statusPending, 1<<ticksBits+7)
	assert.Equal(t, uint64(statusPending), s.status())
	assert.Equal(t, uint64(7), s.ticks38(), "ticks are kept modulo 2^38")
	assert.True(t, s.tagOK(0xFFFF_FFFF))
	assert.True(t, s.tagOK(0xFFFF_FFFF&tagMask), "only the low tag bits are kept")
	assert.False(t, s.tagOK(0xFFFF_FFFE))
	assert.False(t, s.queued())
	q := s.withQueued(true)
	assert.True(t, q.queued())
	assert.True(t, q.to(statusCancelled).queued(), "a queued node stays queued when it ends")
	assert.Equal(t, uint64(statusFired), q.to(statusFired).status())

	// A new timer's state: not queued, its deadline tick kept.
	n := makeState(3, statusNew, 12345)
	assert.Equal(t, uint64(statusNew), n.status())
	assert.Equal(t, uint64(12345), n.ticks38())
	assert.False(t, n.queued())
	assert.True(t, n.live())
	for _, st := range []uint64{statusFired, statusCancelling, statusCancelled, statusStopped} {
		assert.False(t, n.to(st).live(), "status %d has ended", st)
	}
	assert.True(t, n.to(statusPending).live())
}

func TestEachTimerIsFiledAtMostOncePerLevel(t *testing.T) {
	// With an 8-slot wheel, timers up to 8^5 ticks away sit in levels 0-7.
	// However long they wait, each is filed at most once per level: the
	// cost of a tick does not depend on timers that are not yet due.
	h := newHarness(t)
	top := h.sh.h.w.levelFor(h.sh.h.w.elapsed + 8*8*8*8*8)
	require.Equal(t, 7, top)
	r := rand.New(rand.NewPCG(1, 2))
	const n = 500 // the harness verifies the whole wheel after each of 32K passes
	for i := range n {
		h.schedule(i, time.Duration(r.IntN(8*8*8*8*8))*testTick)
	}
	h.step(8*8*8*8*8*testTick + 2*testTick)
	require.Len(t, h.fired, n)
	// Filed once on arrival, then at most once per level below its first.
	assert.LessOrEqual(t, h.sh.statsNow().Refiled, uint64(n*top), "re-files per timer above the level count")
}

func TestNextWakeCoversDueSlotsAndCascadeWindows(t *testing.T) {
	h := newHarness(t) // 8 slots per level: level l's are 4^l ticks wide
	w := h.sh.h.w
	_, ok := w.nextWake()
	assert.False(t, ok, "empty wheel")
	// A far timer alone: the shard goroutine must wake when its slot's cascade
	// window opens, well before it is due, to move it down in time.
	h.schedule(1, 300*testTick)
	due := w.elapsed + 300
	_, ok = w.nextDue()
	assert.False(t, ok, "nothing in level 0")
	c, ok := w.nextCascade()
	require.True(t, ok)
	assert.Equal(t, 3, c.level)
	assert.Equal(t, due>>(3*w.shift), c.num)
	wake, ok := w.nextWake()
	require.True(t, ok)
	assert.Equal(t, w.windowOpen(c.level, c.num), wake)
	assert.Less(t, wake, due)
	// A near one takes precedence.
	h.schedule(2, 3*testTick)
	wake, ok = w.nextWake()
	require.True(t, ok)
	assert.Equal(t, w.elapsed+3, wake)
	next, ok := w.nextDue()
	require.True(t, ok)
	assert.Equal(t, w.elapsed+3, next)
}

// TestParkedShardWokenAcrossLevels parks a shard holding timers at
// every level of an 8-slot wheel and wakes it once after a jump of many
// ticks, including whole level ranges and their edges: the one pass runs
// exactly the timers due by then, and the rest run at their ticks with the
// shard goroutine sleeping as plan says.
func TestParkedShardWokenAcrossLevels(t *testing.T) {
	var jumps []uint64
	for p := uint64(1); p < 1<<22; p *= 4 {
		jumps = append(jumps, p-1, p, p+1, 2*p-1, 2*p, 2*p+1, 3*p)
	}
	for _, jump := range jumps {
		t.Run(fmt.Sprint(jump), func(t *testing.T) {
			h := newHarness(t)
			sh := h.sh
			r := rand.New(rand.NewPCG(jump, 7))
			e := newTickExpect(h)
			h.clock.Advance(time.Duration(r.Int64N(1 << 40))) // anywhere on the grid
			h.pass()
			id := 0
			for p := uint64(1); p < 1<<24; p *= 2 {
				for _, d := range []uint64{p - 1, p, p + 1, p + r.Uint64N(p)} {
					e.scheduleAt(id, sh.h.w.elapsed+max(d, 1), r)
					id++
				}
			}
			h.pass()
			_, _, timed := sh.planHeld()
			require.True(t, timed)
			h.clock.Advance(time.Duration(jump) * testTick)
			h.pass()
			reached := sh.h.w.elapsed
			for id, want := range e.want {
				_, ran := e.ran[id]
				require.Equal(t, want <= reached, ran, "timer %d due at %d, pass to %d", id, want, reached)
			}
			for {
				next, _, timed := sh.planHeld()
				if !timed {
					break
				}
				h.clock.Advance(sh.tickTime(next) - h.clock.Now() + time.Duration(r.Int64N(int64(testTick))))
				h.pass()
			}
			require.Len(t, e.ran, len(e.want))
			for id, want := range e.want {
				require.Equal(t, want, e.ran[id], "timer %d ran at the wrong tick", id)
			}
			require.Zero(t, h.pending())
		})
	}
}

// TestDeadlinesAcrossTheTickFieldWrap runs timers whose deadlines straddle a multiple
// of 2^38 ticks, where the state word's tick field wraps, with a reset
// later and one earlier across the wrap and a timer at MaxDelay.
func TestDeadlinesAcrossTheTickFieldWrap(t *testing.T) {
	h := newHarness(t)
	sh := h.sh
	r := rand.New(rand.NewPCG(8, 9))
	e := newTickExpect(h)
	const wrap = 1 << ticksBits
	h.clock.Advance(time.Duration(wrap-60) * testTick) // nothing filed: elapsed follows
	h.pass()
	require.Equal(t, uint64(wrap-60), sh.h.w.elapsed)
	for id := range 100 {
		e.scheduleAt(id, sh.h.w.elapsed+1+uint64(id), r)
	}
	e.scheduleAt(100, sh.h.w.elapsed+maxDelayTicks-2, r)
	h.pass()
	e.resetTo(10, wrap+500, r) // later, across the wrap
	e.resetTo(90, wrap-40, r)  // earlier, back before it
	for sh.h.w.elapsed < wrap+600 {
		h.clock.Advance(testTick)
		h.pass()
	}
	for id := range 100 {
		require.Equal(t, e.want[id], e.ran[id], "timer %d", id)
	}
	require.NotContains(t, e.ran, 100)
	for {
		next, _, timed := sh.planHeld()
		if !timed {
			break
		}
		h.clock.Advance(sh.tickTime(next) - h.clock.Now())
		h.pass()
	}
	require.Equal(t, e.want[100], e.ran[100], "the MaxDelay timer, at its tick")
	require.Zero(t, h.pending())
}
