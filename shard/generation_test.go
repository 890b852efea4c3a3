package shard

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// setLife makes the free node idx look as if it had lived up to the life
// with the given epoch and tag: the next life gets tag+1 (and epoch+1 when
// the tag wraps). A test hook standing in for millions of lives.
func setLife(sh *Shard, idx uint32, epoch, tag uint64) {
	n := sh.arena.Node(idx)
	n.State.Store(uint64(makeState(tag, statusCancelled, 0)))
	n.Epoch.Store(epoch)
}

// oneNode returns a harness on one P (so that every Cancel takes its timer
// back and the next Schedule reuses the node) and the node its timers use.
func oneNode(t *testing.T) (*harness, uint32) {
	prev := runtime.GOMAXPROCS(1)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	h := newHarness(t)
	r := h.schedule(0, time.Hour)
	require.True(t, h.sh.Cancel(r))
	require.EqualValues(t, 1, h.sh.statsNow().TakenBack, "taken back: the next timer reuses the node")
	return h, r.idx
}

// TestGenerationsNeverRepeat drives one node across its state tag's wrap:
// each life's generation is the last one's plus one, the epoch moves on
// when the tag goes round, and a handle of a life 2^21 lives back, with the
// same index and tag as a live timer, is inert and leaves that timer alone.
func TestGenerationsNeverRepeat(t *testing.T) {
	h, idx := oneNode(t)
	const epoch = 7
	setLife(h.sh, idx, epoch, tagMask-2)
	var prev Ref
	for life := range 5 { // tags mask-1, mask, 0, 1, 2
		r := h.schedule(life, time.Hour)
		require.Equal(t, idx, r.idx)
		if life > 0 {
			assert.Equal(t, prev.gen+1, r.gen, "life %d: one more than the last", life)
		}
		assert.Equal(t, uint64(epoch)+uint64(life+tagMask-1)/(tagMask+1), r.gen>>tagBits, "life %d's epoch", life)
		assert.NotZero(t, r.gen)
		require.True(t, h.sh.Cancel(r))
		prev = r
	}

	// A handle kept for 2^21 lives: the same index and tag as the timer
	// now live on the node, another generation.
	old := h.schedule(100, time.Hour)
	require.True(t, h.sh.Cancel(old))
	setLife(h.sh, idx, old.gen>>tagBits+1, old.gen&tagMask-1) // 2^21-1 lives later
	live := h.schedule(101, time.Hour)
	require.Equal(t, old.idx, live.idx)
	require.Equal(t, old.gen&tagMask, live.gen&tagMask, "the tag the state word holds repeats")
	require.Equal(t, old.gen+1<<tagBits, live.gen, "the generation does not")
	assert.False(t, h.sh.Pending(old), "a stale handle is inert")
	assert.False(t, h.sh.Cancel(old))
	assert.False(t, h.sh.Reset(old, 0, time.Minute))
	_, ok := h.sh.Deadline(old)
	assert.False(t, ok)
	assert.True(t, h.sh.Pending(live), "the live timer is untouched")
	d, ok := h.sh.Deadline(live)
	require.True(t, ok)
	assert.Greater(t, d, h.clock.Now()+59*time.Minute)
}

// TestStopClaimsEveryGeneration: Stop claims a live timer whatever its
// generation, tag 0 of a later epoch included, and returns it with its
// task; only a node that never lived (generation 0) is not a timer.
func TestStopClaimsEveryGeneration(t *testing.T) {
	for _, tag := range []uint64{tagMask, tagMask - 1, 0, 1} {
		h, idx := oneNode(t)
		setLife(h.sh, idx, 3, tag)
		r := h.schedule(1, time.Hour)
		require.Equal(t, idx, r.idx)
		require.Equal(t, (tag+1)&tagMask, r.gen&tagMask)
		h.sh.Close()
		var got []Ref
		h.sh.Drain(func(r Ref, _ uint64, _ time.Duration, task Task) bool {
			got = append(got, r)
			assert.NotNil(t, task.Func)
			return true
		})
		assert.Equal(t, []Ref{r}, got, "after tag %#x", tag)
		assert.False(t, h.sh.Pending(r))
		assert.Zero(t, h.sh.Live(), "nothing left pending")
		assert.NotNil(t, h.sh.Claimed(r).Func)
	}
	h := newHarness(t)
	_, rej := sched(h.sh, 1, time.Hour, func() {})
	require.Equal(t, Accepted, rej) // allocates a block of nodes that never lived
	h.sh.Close()
	n := 0
	h.sh.Drain(func(Ref, uint64, time.Duration, Task) bool { n++; return true })
	assert.Equal(t, 1, n, "nodes that never lived are not timers")
}
