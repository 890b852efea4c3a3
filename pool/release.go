package pool

import "github.com/shardwheel/shardwheel/internal/stress"

// Giving big blocks back (see the package comment). Park, Unpark, Release
// and Recreate are the parking goroutine's: one goroutine at a time, which
// package shard makes whoever holds the wheel. Readers of handles may look
// at a block while it is released: they load the block pointer once, and a
// released block's nodes all have ended lives, so every check against them
// fails.

// BigBlock returns the number of the big block holding idx, or -1 if idx
// lies in a small block.
func (a *Arena) BigBlock(idx uint32) int {
	if idx < a.bigFirst {
		return -1
	}
	return int(idx>>a.bigBits) - 1
}

// BigStart returns the first index of big block k.
func (a *Arena) BigStart(k int) uint32 { return uint32(k+1) << a.bigBits }

// Park puts idx, a free node of a big block that nobody else can reach (on
// no list, its timer ended), on its block's parked list, and reports
// whether every node of the block is now parked: the block holds no timer
// and no free node anyone else can take, and Release may give it back.
func (a *Arena) Park(idx uint32) (full bool) {
	s := a.Slot(idx)
	b := s.b
	s.Node().Next = b.parked
	b.parked = idx
	if b.parkedTail == 0 {
		b.parkedTail = idx
	}
	b.nparked++
	return b.nparked == len(b.nodes)
}

// Unpark empties big block k's parked list and returns it: its first and
// last node (linked through Node.Next, 0 after the last) and its length.
// An empty or released block returns n == 0.
func (a *Arena) Unpark(k int) (head, tail uint32, n int) {
	t := a.table(false)
	if k >= len(t) {
		return 0, 0, 0
	}
	b := t[k].b.Load()
	if b == nil || b.nparked == 0 {
		return 0, 0, 0
	}
	head, tail, n = b.parked, b.parkedTail, b.nparked
	b.parked, b.parkedTail, b.nparked = 0, 0, 0
	return head, tail, n
}

// Release gives back big block k, whose every node is parked: the table
// forgets it, and its arrays go to the garbage collector once no reader
// holds it. The Epoch its nodes will start at if it is made again is set
// first: above every Epoch they had, so that no handle from before
// matches a later life.
func (a *Arena) Release(k int) {
	e := &a.table(false)[k]
	b := e.b.Load()
	if b == nil || b.nparked != len(b.nodes) {
		panic("shardwheel: pool: releasing a block that is not parked whole")
	}
	var top uint64
	for i := range b.nodes {
		top = max(top, b.nodes[i].Epoch.Load())
	}
	e.floor.Store(top + 1)
	stress.Point()
	e.b.Store(nil)
	a.released.Add(uint64(len(b.nodes)))
}

// Released reports whether big block k was given back (and not made
// again).
func (a *Arena) Released(k int) bool {
	t := a.table(false)
	return k < len(t) && t[k].released()
}

// released reports whether the entry's block was given back and not made
// again: Release sets floor, never 0, before it forgets the block. A block
// that was never made has floor 0, and one that Grow is making has no
// block yet either: HighWater counts an index before its block exists.
func (e *bigEntry) released() bool { return e.b.Load() == nil && e.floor.Load() != 0 }

// Recreate makes big block k again after Release, with every node parked
// and starting its Epoch at the floor Release set, and reports whether it
// did: false if the block exists or was never released. Only the parking
// goroutine may call it. (A block that a producer's Grow is making must
// not be made here: its fresh indices would be handed out twice, by Grow
// and from the parked list.)
func (a *Arena) Recreate(k int) bool {
	t := a.table(false)
	if k >= len(t) || !t[k].released() {
		return false // nothing released yet: the table may not even exist
	}
	e := &t[k]
	b := newBlock(int(a.bigFirst))
	floor := e.floor.Load()
	first := a.BigStart(k)
	for i := range b.nodes {
		n := &b.nodes[i]
		n.Epoch.Store(floor)
		if i+1 < len(b.nodes) {
			n.Next = first + uint32(i) + 1
		}
	}
	b.parked, b.parkedTail, b.nparked = first, first+a.bigFirst-1, len(b.nodes)
	stress.Point()
	e.b.Store(b)
	a.made.Add(uint64(len(b.nodes)))
	return true
}

// Footprint returns the nodes the arena's blocks hold now (small blocks
// included) and the nodes of big blocks given back so far.
func (a *Arena) Footprint() (allocated, released uint64) {
	for i := range a.small {
		if a.small[i].Load() != nil {
			allocated += uint64(a.smallSize(uint32(i)))
		}
	}
	made, rel := a.made.Load(), a.released.Load()
	return allocated + made - min(rel, made), rel
}
