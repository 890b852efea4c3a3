package shard

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A spike that is cancelled gives its blocks back while the shard is idle:
// the sweep frees the nodes, a review lowers the limit, the passes sort the
// free list, and every block above it is released. A second spike makes
// the released blocks again, at the same indices, and no handle from the
// first spike reaches a timer of the second.
func TestSpikeGivesBlocksBack(t *testing.T) {
	h := newHarness(t)
	block := uint64(1) << h.sh.arena.BigBits()
	const base = 1000
	spike := int(20 * block)
	if testing.Short() || raceEnabled {
		spike = int(6 * block)
	}
	for i := range base {
		_, rej := sched(h.sh, uint64(i), time.Hour, func() {})
		require.Equal(t, Accepted, rej)
	}
	h.pass()
	before, _ := h.sh.arena.Footprint()

	refs := make([]Ref, spike)
	for i := range refs {
		var rej Reject
		refs[i], rej = sched(h.sh, uint64(i), time.Hour, func() {})
		require.Equal(t, Accepted, rej)
	}
	peak, _ := h.sh.arena.Footprint()
	hw := h.sh.arena.HighWater()
	require.Greater(t, peak, before+uint64(spike)/2)
	for _, r := range refs {
		require.True(t, h.sh.Cancel(r))
	}

	// Idle: passes alone, a tick apart, until the spike's memory is back.
	limit := 30 * time.Second
	var after uint64
	for d := time.Duration(0); ; d += testTick {
		require.Less(t, d, limit, "the spike's blocks were not given back: %d nodes allocated, %d before", after, before)
		h.clock.Advance(testTick)
		h.pass()
		after, _ = h.sh.arena.Footprint()
		if after <= before+(reserveFloor+shedMin+1)*block && h.sh.h.sort == 0 {
			t.Logf("given back after %v idle: %d nodes allocated (peak %d, before %d)", d, after, peak, before)
			break
		}
	}
	st := h.sh.statsNow()
	assert.Equal(t, base, int(h.sh.Live()))
	assert.Positive(t, st.BlocksReleased)
	assert.Equal(t, uint64(spike+base), st.Scheduled)
	assert.Equal(t, uint64(spike), st.Cancelled)

	// Stale handles from the spike stay inert, released blocks or not.
	for _, r := range refs[:100] {
		assert.False(t, h.sh.Pending(r))
		assert.False(t, h.sh.Cancel(r))
		assert.False(t, h.sh.Reset(r, 0, time.Second))
	}

	// A second spike reuses the indices: the high-water mark stays.
	second := make([]Ref, spike)
	for i := range second {
		var rej Reject
		second[i], rej = sched(h.sh, uint64(i), time.Hour, func() {})
		require.Equal(t, Accepted, rej)
	}
	assert.LessOrEqual(t, h.sh.arena.HighWater(), hw, "the second spike made the first one's blocks again")
	assert.Positive(t, h.sh.statsNow().BlocksRemade)
	for _, r := range refs {
		require.False(t, h.sh.Pending(r), "a first-spike handle must not name a second-spike timer")
		require.False(t, h.sh.Cancel(r))
	}
	for _, r := range second {
		require.True(t, h.sh.Pending(r))
	}
	assert.Equal(t, int64(base+spike), h.sh.Live())
}

// Steady churn never lowers the limit: the free list runs low within
// every review's window, so nothing is surplus.
func TestSteadyChurnKeepsItsNodes(t *testing.T) {
	h := newHarness(t)
	ring := make([]Ref, 4096)
	n := 0
	for d := time.Duration(0); d < 3*time.Second; d += testTick {
		for range 64 {
			if r := ring[n%len(ring)]; !r.IsZero() {
				h.sh.Cancel(r)
			}
			var rej Reject
			ring[n%len(ring)], rej = sched(h.sh, uint64(n), time.Minute, func() {})
			require.Equal(t, Accepted, rej)
			n++
		}
		h.clock.Advance(testTick)
		h.pass()
	}
	assert.Equal(t, uint32(noLimit), h.sh.h.limit)
	assert.Zero(t, h.sh.statsNow().BlocksReleased)
}

// When the wheel needs more nodes than lie below a lowered limit, the
// limit rises a block at a time and takes the parked nodes back.
func TestLimitRisesWithDemand(t *testing.T) {
	h := newHarness(t)
	block := int(1) << h.sh.arena.BigBits()
	refs := make([]Ref, 8*block)
	for i := range refs {
		refs[i], _ = sched(h.sh, uint64(i), time.Hour, func() {})
	}
	for _, r := range refs {
		h.sh.Cancel(r)
	}
	for d := time.Duration(0); h.sh.h.limit == noLimit; d += testTick {
		require.Less(t, d, 30*time.Second, "no review lowered the limit")
		h.clock.Advance(testTick)
		h.pass()
	}
	lowered := h.sh.h.limit
	hw := h.sh.arena.HighWater()
	for i := range refs { // as many again: below the limit there is not room
		var rej Reject
		refs[i], rej = sched(h.sh, uint64(i), time.Hour, func() {})
		require.Equal(t, Accepted, rej)
	}
	assert.Greater(t, h.sh.h.limit, lowered)
	assert.LessOrEqual(t, h.sh.arena.HighWater(), hw, "no growth while parked or released nodes lie above the limit")
	assert.Equal(t, int64(len(refs)), h.sh.Live())
}

// An idle shard gives a cancelled spike's memory back by itself: nobody
// schedules, cancels or reads its Stats after the spike, and its goroutine
// still sweeps, reviews and releases (it plans a wake for the review while
// it keeps enough free nodes for one to shed).
func TestIdleShardGivesTheSpikeBack(t *testing.T) {
	sh, err := New(Config{Tick: testTick, WheelSize: 64, TransferCap: 1 << 20, Lanes: 1, OnPanic: func(any) {}})
	require.NoError(t, err)
	sh.Start()
	t.Cleanup(func() { sh.Close(); <-sh.Exited() })
	block := uint64(1) << sh.arena.BigBits()
	n := int(12 * block)
	refs := make([]Ref, n)
	for i := range refs {
		var rej Reject
		refs[i], rej = sched(sh, uint64(i), time.Hour, func() {})
		require.Equal(t, Accepted, rej)
	}
	peak, _ := sh.arena.Footprint()
	for _, r := range refs {
		require.True(t, sh.Cancel(r))
	}
	var allocated uint64
	if !assert.Eventually(t, func() bool {
		allocated, _ = sh.arena.Footprint() // read off the arena: no Stats call to wake the shard
		return allocated <= (reserveFloor+shedMin+1)*block
	}, 30*time.Second, 10*time.Millisecond) {
		t.Fatalf("an idle shard kept its spike: %d nodes at the peak, %d after 30s", peak, allocated)
	}
}

// A sweep steps over the blocks a spike gave back: after a spike was
// cancelled and released, a sweep visits only the blocks still made, so one
// step of sweepStep visits covers a few live timers however far the
// arena's high-water mark lies, and its pace (visits per filed timer)
// follows those blocks, not the mark.
func TestSweepStepsOverReleasedBlocks(t *testing.T) {
	h := newHarness(t)
	block := uint64(1) << h.sh.arena.BigBits()
	refs := scheduleSpike(t, h.sh, int(8*block))
	for _, r := range refs {
		require.True(t, h.sh.Cancel(r))
	}
	for d := time.Duration(0); ; d += testTick {
		require.Less(t, d, 30*time.Second, "the spike's blocks were not given back")
		h.clock.Advance(testTick)
		h.pass()
		if _, released := h.sh.arena.Footprint(); released >= 5*block && h.sh.h.sort == 0 && h.sh.h.sweep.next == 0 {
			break
		}
	}
	hw := uint64(h.sh.arena.HighWater())
	require.Greater(t, hw, 8*block-block/2, "the mark stays where the spike left it")

	// A few timers, cancelled, and a sweep of them.
	few := make([]Ref, 64)
	for i := range few {
		var rej Reject
		few[i], rej = sched(h.sh, uint64(i), time.Hour, func() {})
		require.Equal(t, Accepted, rej)
	}
	h.pass()
	for _, r := range few[:32] {
		require.True(t, h.sh.Cancel(r))
	}
	require.True(t, h.sh.holdForPass())
	allocated, _ := h.sh.arena.Footprint()
	assert.Equal(t, min(allocated, hw), h.sh.sweptNodes())
	h.sh.startSweep()
	span := max(h.sh.h.w.count/3, h.sh.h.sweep.min)
	assert.Equal(t, max(sweepPerFiled, (int(min(allocated, hw))+span-1)/span), h.sh.h.sweep.rate)
	steps := 0
	for h.sh.h.sweep.next != 0 {
		h.sh.sweep(sweepStep)
		steps++
	}
	h.sh.release()
	assert.LessOrEqual(t, steps, int(allocated/sweepStep)+1, "the sweep walked the released blocks")
	assert.Zero(t, h.sh.statsNow().HeldCancelled)
}

// A spike that producers pushed on the queue while the wheel was held
// leaves its count in their lane's demand, and holders feed the lane with
// its freed nodes: once no lane needs feeding, a review takes the lane's
// stock back and the blocks go as a spike's do, instead of waiting in the
// lane for takers that never come.
func TestLaneStockOfAQueuedSpikeComesBack(t *testing.T) {
	h := newHarness(t)
	block := uint64(1) << h.sh.arena.BigBits()
	unhold := holdWheel(t, h.sh)
	refs := scheduleSpike(t, h.sh, int(8*block))
	unhold()
	for h.sh.statsNow().Queued > 0 {
		h.step(testTick)
	}
	for _, r := range refs {
		require.True(t, h.sh.Cancel(r))
	}
	peak, _ := h.sh.arena.Footprint()
	var allocated uint64
	for d := time.Duration(0); ; d += testTick {
		require.Less(t, d, 30*time.Second, "the spike's blocks were not given back: %d nodes allocated, %d at the peak", allocated, peak)
		h.step(testTick)
		allocated, _ = h.sh.arena.Footprint()
		if allocated <= (reserveFloor+shedMin+1)*block {
			t.Logf("given back after %v: %d nodes allocated (peak %d)", d, allocated, peak)
			break
		}
	}
}

// A few cancelled timers left in blocks being given back, too few for a
// sweep to be due, would pin those blocks until their slots come round (an
// hour here): a shard that is shedding sweeps them when nothing is filed.
func TestFewCancelledNodesDoNotPinBlocks(t *testing.T) {
	h := newHarness(t)
	block := uint64(1) << h.sh.arena.BigBits()
	refs := scheduleSpike(t, h.sh, int(8*block))
	// Keep one timer in each block of the spike, cancel the rest, and let
	// the shard shed what it can: the kept timers pin their blocks.
	var kept []Ref
	for i, r := range refs {
		if uint64(i)%block == block/2 {
			kept = append(kept, r)
			continue
		}
		require.True(t, h.sh.Cancel(r))
	}
	h.step(5 * time.Second)
	pinned, _ := h.sh.arena.Footprint()
	require.Greater(t, pinned, 6*block, "the kept timers pin their blocks")
	for _, r := range kept {
		require.True(t, h.sh.Cancel(r))
	}
	var allocated uint64
	for d := time.Duration(0); ; d += testTick {
		require.Less(t, d, 30*time.Second, "%d cancelled timers pinned their blocks: %d nodes allocated", len(kept), allocated)
		h.step(testTick)
		allocated, _ = h.sh.arena.Footprint()
		if allocated <= (reserveFloor+shedMin+1)*block {
			break
		}
	}
	assert.Zero(t, h.sh.statsNow().HeldCancelled)
}

// scheduleSpike schedules n timers due in an hour on sh and returns their
// handles.
func scheduleSpike(t *testing.T, sh *Shard, n int) []Ref {
	t.Helper()
	refs := make([]Ref, n)
	for i := range refs {
		var rej Reject
		refs[i], rej = sched(sh, uint64(i), time.Hour, func() {})
		require.Equal(t, Accepted, rej)
	}
	return refs
}
