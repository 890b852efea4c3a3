package pool

// Test-only views of the arena's storage.

// Allocated reports whether the block holding idx exists. HighWater can run
// ahead of block installation for a moment while a producer grows the arena.
func (a *Arena) Allocated(idx uint32) bool {
	if idx >= a.bigFirst {
		t := a.table(false)
		return t != nil && t[a.BigBlock(idx)].b.Load() != nil
	}
	blk, _ := a.locateSmall(idx)
	return a.small[blk].Load() != nil
}

// Bytes returns the memory the arena's blocks hold now.
func (a *Arena) Bytes() int {
	n := 0
	count := func(b *block) {
		if b == nil {
			return
		}
		per := BaseNodeBytes
		if b.tasks.Load() != nil {
			per += TaskBytes
		}
		if b.handlers.Load() != nil {
			per += HandlerBytes
		}
		n += len(b.nodes) * per
	}
	for i := range a.small {
		count(a.small[i].Load())
	}
	for i := range a.table(false) {
		count(a.table(false)[i].b.Load())
	}
	return n
}

// GrowHalf is the first half of Grow: it claims a fresh index, raising
// HighWater, and returns it with the second half, which makes its block.
// Between the two a producer growing the arena has the index and no block.
func (a *Arena) GrowHalf() (idx uint32, install func()) {
	idx = uint32(a.fresh.Add(1) - 1)
	return idx, func() { a.blockFor(idx) }
}
