package shard

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWheelLevels(t *testing.T) {
	tests := []struct{ size, levels int }{
		{2, 38}, {4, 19}, {8, 13}, {64, 7}, {512, 5}, {1 << 16, 3},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.levels, wheelLevels(tt.size), "size %d", tt.size)
		// The top level must reach past twice the longest delay, so a
		// wrapped top-level slot is never mistaken for a current one.
		span := 1.0
		for range tt.levels {
			span *= float64(tt.size)
		}
		assert.Greater(t, span, 2.0*maxDelayTicks)
	}
}

func TestLevelFor(t *testing.T) {
	h := newHarness(t) // 8 slots per level
	w := h.sh.w
	w.elapsed = 1000 // 0b1111101000
	tests := []struct {
		t     uint64
		level int
	}{
		{1001, 0}, {1007, 0}, // differ from 1000 in bits 0-2 only
		{1008, 1}, {1023, 1}, // highest differing bit 3 or 4
		{1024, 3}, {1535, 3}, // bit 10 differs: level 10/3
		{1 << 40, 12}, {1 << 62, 12}, // above the top level: clamped to it
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

	// An unresolved state's bit 40 is a delay unit, never a queue mark.
	long := newState(3, time.Duration(1<<ticksBits)+1, int64(time.Millisecond))
	assert.False(t, long.queued())
	v, inTicks := long.delay()
	assert.True(t, inTicks)
	assert.Equal(t, int64((1<<ticksBits+1+999_999)/1_000_000), v, "rounded up to whole ticks")
	assert.False(t, long.to(statusCancelled).queued())
	short := newState(3, 12345, int64(time.Millisecond))
	v, inTicks = short.delay()
	assert.False(t, inTicks)
	assert.Equal(t, int64(12345), v)
}

func TestEachTimerIsFiledAtMostOncePerLevel(t *testing.T) {
	// With an 8-slot wheel, timers up to 8^5 ticks away sit in levels 0-4.
	// However long they wait, each is filed at most once per level: the
	// cost of a tick does not depend on timers that are not yet due.
	h := newHarness(t)
	r := rand.New(rand.NewPCG(1, 2))
	const n = 500 // the harness verifies the whole wheel after each of 32K passes
	for i := range n {
		h.schedule(i, time.Duration(r.IntN(8*8*8*8*8))*testTick)
	}
	h.step(8*8*8*8*8*testTick + 2*testTick)
	require.Len(t, h.fired, n)
	// Filed once on arrival, then at most once per level below its first.
	assert.LessOrEqual(t, h.sh.Stats().Refiled, uint64(n*4), "re-files per timer above the level count")
}

func TestNextFindsEarliestSlotAcrossLevels(t *testing.T) {
	h := newHarness(t)
	w := h.sh.w
	_, ok := w.next()
	assert.False(t, ok, "empty wheel")
	// A far timer alone: next is its top-level slot start, not its tick.
	h.schedule(1, 300*testTick)
	e, ok := w.next()
	require.True(t, ok)
	assert.Equal(t, 2, e.level)
	assert.LessOrEqual(t, e.deadline, w.elapsed+300)
	// A near one takes precedence.
	h.schedule(2, 3*testTick)
	e, ok = w.next()
	require.True(t, ok)
	assert.Equal(t, 0, e.level)
	assert.Equal(t, w.elapsed+3, e.deadline)
}
