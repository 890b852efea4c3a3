package pool_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel/pool"
)

// fillBig hands out indices until the arena holds its first big block
// whole, and returns that block's number and first index.
func fillBig(t *testing.T, a *pool.Arena) (k int, first uint32) {
	t.Helper()
	size := uint32(1) << a.BigBits()
	for a.HighWater() < 2*size {
		get(t, a, 0)
	}
	return a.BigBlock(size), size
}

// A big block whose nodes are all parked is released: its memory goes,
// Find finds nothing there, and made again its nodes start above every
// Epoch they had, so no handle from before can match a later life.
func TestParkReleaseRecreate(t *testing.T) {
	a := pool.New(64, 1)
	k, first := fillBig(t, a)
	size := uint32(1) << a.BigBits()
	require.Equal(t, 0, k)
	require.Equal(t, first, a.BigStart(k))
	before, _ := a.Footprint()
	a.Node(first + 5).Epoch.Store(41) // a node whose tag went round 41 times

	for i := range size - 1 {
		require.False(t, a.Park(first+i), "node %d of %d parked: not full yet", i+1, size)
	}
	head, tail, n := a.Unpark(k)
	require.Equal(t, int(size-1), n)
	assert.Equal(t, first+size-2, head, "parked lists are LIFO")
	assert.Equal(t, first, tail)
	for idx := head; idx != 0; idx = a.Node(idx).Next {
		require.True(t, idx >= first && idx < first+size)
		if idx == tail {
			break
		}
	}
	// Park them all again, and the last one.
	for i := range size - 1 {
		a.Park(first + i)
	}
	require.True(t, a.Park(first+size-1), "every node parked")
	a.Release(k)
	assert.True(t, a.Released(k))
	assert.Nil(t, a.Find(first+5), "a released block holds no node")
	after, released := a.Footprint()
	assert.Equal(t, before-uint64(size), after)
	assert.Equal(t, uint64(size), released)
	_, _, n = a.Unpark(k)
	assert.Zero(t, n, "a released block has nothing to unpark")

	require.True(t, a.Recreate(k))
	assert.False(t, a.Recreate(k), "made once")
	assert.False(t, a.Released(k))
	for i := range size {
		assert.Equal(t, uint64(42), a.Node(first+i).Epoch.Load(), "node %d starts above every Epoch its block had", i)
	}
	head, tail, n = a.Unpark(k)
	assert.Equal(t, int(size), n, "made again with every node parked")
	count := 0
	for idx := head; ; idx = a.Node(idx).Next {
		count++
		if idx == tail {
			break
		}
	}
	assert.Equal(t, int(size), count)
	again, _ := a.Footprint()
	assert.Equal(t, before, again)
}

// Release refuses a block that still has a node out.
func TestReleaseNeedsEveryNodeParked(t *testing.T) {
	a := pool.New(64, 1)
	k, first := fillBig(t, a)
	a.Park(first)
	assert.Panics(t, func() { a.Release(k) })
	assert.Panics(t, func() { a.Release(k + 1) }, "a block never made")
}

// Small blocks are never released: BigBlock says so.
func TestSmallBlocksAreNotBig(t *testing.T) {
	a := pool.New(1024, 1)
	assert.Equal(t, -1, a.BigBlock(1))
	assert.Equal(t, -1, a.BigBlock(1<<a.BigBits()-1))
	assert.Equal(t, 0, a.BigBlock(1<<a.BigBits()))
	assert.Equal(t, uint(14), a.BigBits())
	assert.Equal(t, uint(22), pool.New(pool.MaxFirst, 1).BigBits(), "a first block above 2^14 sets the big block size")
}

// LimitCapacity bounds the indices handed out.
func TestLimitCapacity(t *testing.T) {
	a := pool.New(64, 1)
	a.LimitCapacity(100)
	for i := 1; i < 100; i++ {
		get(t, a, 0)
	}
	_, _, ok := a.Get(0)
	assert.False(t, ok, "99 nodes (index 0 reserved) fill a capacity of 100")
	assert.Equal(t, uint32(100), a.HighWater())
}

// Recreate makes again only a block that was released: a block that a
// producer's Grow is making (HighWater already past its first index, its
// block not installed yet) is not released, and making it "again", every
// node parked, would hand its fresh index out twice, to the producer and
// from the parked list.
func TestRecreateMakesNoBlockAGrowIsMaking(t *testing.T) {
	a := pool.New(64, 1)
	k, first := fillBig(t, a) // block k whole
	size := uint32(1) << a.BigBits()
	for a.HighWater() < first+size {
		get(t, a, 0)
	}
	idx, install := a.GrowHalf() // the first index of block k+1, no block yet
	require.Equal(t, a.BigStart(k+1), idx)
	require.False(t, a.Allocated(idx))
	assert.False(t, a.Recreate(k+1), "block k+1 was never released")
	install()
	_, _, n := a.Unpark(k + 1)
	assert.Zero(t, n, "no node of the growing block is parked: the producer has its fresh index")
}

// The same for the first big block, while the Grow that makes it has not
// even made the arena's table of big blocks yet.
func TestRecreateBeforeTheBigTableExists(t *testing.T) {
	a := pool.New(64, 1)
	size := uint32(1) << a.BigBits()
	for a.HighWater() < size {
		get(t, a, 0)
	}
	idx, install := a.GrowHalf()
	require.Equal(t, a.BigStart(0), idx)
	assert.False(t, a.Recreate(0), "no table, no released block")
	assert.False(t, a.Released(0))
	install()
	assert.False(t, a.Released(0))
}
