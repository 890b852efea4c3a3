package ring

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel/internal/pad"
	"github.com/shardwheel/shardwheel/pool"
)

// TestQueueLayout checks the false-sharing padding: the producers' head has
// a cache line of its own, the consumer's backlog another, and the struct
// fills whole lines so that neighbouring allocations share neither.
func TestQueueLayout(t *testing.T) {
	const line = pad.CacheLineSize
	var q Queue
	size := unsafe.Sizeof(q)
	assert.Zero(t, size%line, "sizeof(Queue) = %d, not a multiple of %d", size, line)
	assert.Equal(t, 2*uintptr(line), size, "two lines: producers', consumer's")
	head, first, last := unsafe.Offsetof(q.head), unsafe.Offsetof(q.first), unsafe.Offsetof(q.last)
	assert.Zero(t, head/line, "head opens the producers' line")
	assert.Equal(t, uintptr(1), first/line, "first is on the consumer's line")
	assert.Equal(t, uintptr(1), (last+unsafe.Sizeof(q.last)-1)/line, "last is on the consumer's line")
	assert.Equal(t, uintptr(64), uintptr(pad.CacheLineSize))
}

func newArena(t *testing.T, n int) (*pool.Arena, []uint32) {
	t.Helper()
	a := pool.New(64, 1)
	idxs := make([]uint32, n)
	for i := range idxs {
		idx, _, _, ok := a.Get(0)
		require.True(t, ok)
		a.Node(idx).Key = uint64(100 + i)
		idxs[i] = idx
	}
	return a, idxs
}

// TestUnpushNeverTakesALaterLife builds, step by step, the ABA case Unpush
// guards against: a node pushed, taken by the consumer, freed, reused (its
// generation bumped) and pushed again, so that the same index is on top. A
// stale Unpush for the first life must fail whether it reads the head before
// or after all that; the current life's Unpush succeeds.
func TestUnpushNeverTakesALaterLife(t *testing.T) {
	a, n := newArena(t, 2)
	var q Queue
	x, other := n[0], n[1]
	node := a.Node(x)
	gen1 := node.Gen.Load()

	q.Push(other, a.Node(other))
	q.Push(x, node)
	h := q.head.Load() // a stale Unpush of life 1 read the head here

	got, ok := q.TryPop(a) // the consumer takes both
	require.True(t, ok)
	require.Equal(t, other, got)
	got, ok = q.TryPop(a)
	require.True(t, ok)
	require.Equal(t, x, got)
	// x is freed and reused (Get bumps Gen), then pushed on top again.
	var c pool.Chain
	a.Add(&c, x)
	a.PutChain(0, &c)
	idx, gen2, _, ok := a.Get(0)
	require.True(t, ok)
	require.Equal(t, x, idx)
	require.Equal(t, gen1+1, gen2)
	q.Push(x, node)
	require.Equal(t, x, top(q.head.Load()), "the same index is on top again")

	assert.False(t, q.Unpush(x, node, gen1), "a stale Unpush reading the head now sees a later generation")
	assert.False(t, q.head.CompareAndSwap(h, 0), "a stale Unpush that read the head before fails its CAS: the tag moved")
	assert.True(t, q.Unpush(x, node, gen2), "the current life takes its node back")
	assert.True(t, q.Empty())
}
