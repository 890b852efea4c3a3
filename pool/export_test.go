package pool

// Test-only views of the arena's storage.

// Allocated reports whether the block holding idx exists. HighWater can run
// ahead of block installation for a moment while a producer grows the arena.
func (a *Arena) Allocated(idx uint32) bool {
	blk, _ := a.locate(idx)
	return a.blocks[blk].Load() != nil
}

// Bytes returns the memory the arena's blocks hold now.
func (a *Arena) Bytes() int {
	n := 0
	for i := range a.blocks {
		if b := a.blocks[i].Load(); b != nil {
			per := BaseNodeBytes
			if b.tasks.Load() != nil {
				per += TaskBytes
			}
			if b.handlers.Load() != nil {
				per += HandlerBytes
			}
			n += a.blockSize(uint32(i)) * per
		}
	}
	return n
}
