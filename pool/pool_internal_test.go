package pool

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refLayout is the documented block layout, computed independently of the
// package's arithmetic: block 0 holds 2^firstBits nodes, each later block as
// many as all before it until blocks reach max(2^14, block 0), then that
// many. It returns the blocks that tile [0, MaxNodes).
func refLayout(firstBits uint) (starts, sizes []uint32) {
	maxSize := uint64(1) << max(firstBits, 14)
	total := uint64(0)
	for total < MaxNodes {
		size := uint64(1) << firstBits
		if total > 0 {
			size = min(total, maxSize)
		}
		starts = append(starts, uint32(total))
		sizes = append(sizes, uint32(size))
		total += size
	}
	return starts, sizes
}

// locate is the block of idx as the package numbers them: small blocks
// first, then big block k as len(small)+k.
func (a *Arena) locate(idx uint32) (blk, off uint32) {
	if idx < a.bigFirst {
		return a.locateSmall(idx)
	}
	small := uint32(a.bigBits-a.firstBits) + 1
	return small + uint32(a.BigBlock(idx)), idx & (a.bigFirst - 1)
}

func (a *Arena) blockSize(blk uint32) int {
	if small := uint32(a.bigBits-a.firstBits) + 1; blk >= small {
		return int(a.bigFirst)
	}
	return a.smallSize(blk)
}

// TestLocate checks the index arithmetic over the whole index space, for
// every possible first block size, without allocating any block: every index
// below MaxNodes, up to Capacity's highest, lands in a block that the
// tables can hold, at an offset within that block, and the arithmetic is a
// bijection onto the documented layout.
func TestLocate(t *testing.T) {
	for firstBits := uint(6); firstBits <= 22; firstBits++ {
		first := 1 << firstBits
		t.Run(fmt.Sprint(first), func(t *testing.T) {
			a := New(first, 1)
			require.Equal(t, firstBits, a.firstBits)
			starts, sizes := refLayout(firstBits)
			small := int(a.bigBits-a.firstBits) + 1
			require.LessOrEqual(t, small, maxSmall, "the small block array is too small")
			require.Equal(t, MaxNodes>>a.bigBits-1, len(starts)-small, "the big table covers the rest")
			require.Equal(t, uint64(MaxNodes), uint64(starts[len(starts)-1])+uint64(sizes[len(sizes)-1]),
				"the layout must end exactly at MaxNodes")

			rng := rand.New(rand.NewPCG(uint64(firstBits), 1))
			check := func(blk int, idx uint32) {
				gotBlk, off := a.locate(idx)
				if gotBlk != uint32(blk) || off != idx-starts[blk] {
					t.Fatalf("locate(%d) = (%d, %d), want (%d, %d)", idx, gotBlk, off, blk, idx-starts[blk])
				}
			}
			for blk, start := range starts {
				size := sizes[blk]
				if got := a.blockSize(uint32(blk)); got != int(size) {
					t.Fatalf("blockSize(%d) = %d, want %d", blk, got, size)
				}
				check(blk, start)
				check(blk, start+1)
				check(blk, start+size-1)
				check(blk, start+size/2)
				for range 8 {
					check(blk, start+rng.Uint32N(size))
				}
			}

			// The highest index Capacity allows maps to the last offset
			// of the last block.
			blk, off := a.locate(MaxNodes - 1)
			assert.Equal(t, len(starts)-1, int(blk))
			assert.Equal(t, uint32(a.blockSize(blk)-1), off)
			assert.False(t, a.Allocated(MaxNodes-1))
		})
	}
}

// TestCapacity exhausts the index space without allocating it: it moves the
// high-water mark to the last index, so only the last block gets allocated.
func TestCapacity(t *testing.T) {
	a := New(64, 2)
	a.fresh.Store(MaxNodes - 1) // as if Capacity-1 nodes had been handed out

	idx, _, ok := a.Get(0)
	require.True(t, ok, "the last index is still available")
	assert.Equal(t, uint32(MaxNodes-1), idx)
	assert.Equal(t, uint32(MaxNodes), a.HighWater())
	assert.Equal(t, (1<<minBigBits)*BaseNodeBytes, a.Bytes(), "only the last block exists")
	assert.Same(t, a.Node(idx), a.Find(idx))
	a.Node(idx).Key = 42

	for range 3 {
		_, _, ok = a.Get(1)
		assert.False(t, ok, "Get must fail once Capacity nodes are out")
		assert.Equal(t, uint32(MaxNodes), a.HighWater())
		assert.Equal(t, uint64(MaxNodes), a.fresh.Load(), "the counter must not creep toward overflow")
	}
	assert.Nil(t, a.Find(MaxNodes))

	// A freed node can still be had.
	var c Chain
	a.Add(&c, idx)
	a.PutChain(1, &c)
	got, _, ok := a.Get(0)
	require.True(t, ok)
	assert.Equal(t, idx, got)
	assert.Equal(t, uint64(42), a.Node(got).Key)
	_, _, ok = a.Get(0)
	assert.False(t, ok)
}

// TestFindBeforeBlockInstalled covers the moment between a producer's FAA
// of the high-water mark and its installing the new block: the index is below
// HighWater but has no storage yet.
func TestFindBeforeBlockInstalled(t *testing.T) {
	a := New(64, 1)
	idx, _, ok := a.Get(0) // installs block 0
	require.True(t, ok)
	for range 62 {
		_, _, ok = a.Get(0)
		require.True(t, ok)
	}
	require.Equal(t, uint32(64), a.HighWater(), "indices 1..63 handed out: block 0 is full")
	require.False(t, a.Allocated(64))

	n := a.fresh.Add(1) - 1 // a grow that has not called blockFor yet
	require.Equal(t, uint64(64), n)
	assert.Equal(t, uint32(65), a.HighWater())
	assert.False(t, a.Allocated(64))
	assert.Nil(t, a.Find(64), "no storage yet: Find must not dereference")
	assert.NotNil(t, a.Find(idx))

	a.blockFor(64)
	assert.True(t, a.Allocated(64))
	assert.Same(t, a.Node(64), a.Find(64))
	assert.Equal(t, 2*64*BaseNodeBytes, a.Bytes())
	// Another producer in the same block finds it installed.
	a.blockFor(127)
	assert.Equal(t, 2*64*BaseNodeBytes, a.Bytes())
}

// TestHeadTagDefeatsABA pins the mechanism TestPopRaceABA probes by chance:
// after a node is popped and pushed back, the list head names the same top
// node but is a different word, so a pop that loaded the old head (and the
// old top's old link) fails its CAS instead of installing a stale next.
func TestHeadTagDefeatsABA(t *testing.T) {
	a := New(64, 1)
	var c Chain
	for range 3 {
		idx, _, ok := a.Get(0)
		require.True(t, ok)
		a.Add(&c, idx)
	}
	a.PutChain(0, &c)
	l := &a.lanes[0]

	for range 5 {
		h0 := l.head.Load()
		top := uint32(h0 >> 32)
		staleNext := a.Link(top).Load()

		// Another goroutine pops top and the node below it, then the
		// owner pushes top back alone: top's link now differs.
		x, _, ok := a.Get(0)
		require.True(t, ok)
		require.Equal(t, top, x)
		y, _, ok := a.Get(0)
		require.True(t, ok)
		a.Add(&c, x)
		a.PutChain(0, &c)

		h1 := l.head.Load()
		require.Equal(t, top, uint32(h1>>32), "same top node: the ABA shape")
		require.NotEqual(t, staleNext, a.Link(top).Load())
		assert.NotEqual(t, h0, h1, "the head word must change, or a stale CAS would succeed")
		assert.False(t, l.head.CompareAndSwap(h0, uint64(staleNext)<<32), "a stale pop's CAS must fail")

		a.Add(&c, y)
		a.PutChain(0, &c)
	}
}

// TestFindBeforeTableMade covers the moment between the first big index's
// FAA of the high-water mark and the making of the big block table.
func TestFindBeforeTableMade(t *testing.T) {
	a := New(64, 1)
	a.fresh.Store(uint64(a.bigFirst) + 1) // as if a producer had taken bigFirst and not made the table yet
	assert.Nil(t, a.Find(a.bigFirst))
	s, n := a.Span(a.bigFirst)
	assert.False(t, s.Installed())
	assert.Equal(t, int(a.bigFirst), n)
}
