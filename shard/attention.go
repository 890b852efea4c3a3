package shard

// The attention stacks and the worker's wake-up. Producers push on the stack
// of their P's lane; the worker pops everything with one Swap per lane and
// pass (a lane whose stack it finds empty costs it one load).
//
// Each stack is a Treiber stack threaded through the arena's link array
// (pool.Arena.Link), which a node uses for the free list only while it is
// free: a node on the stack is never freed before the worker has taken it
// off (see releaseNode), so the two uses never overlap. Pushes need no ABA
// tag: the only pop is the worker's Swap of the whole stack.

// pushAttention queues the timer r for the worker, on lane l's stack.
// Any goroutine.
func (sh *Shard) pushAttention(l *lane, r Ref) {
	idx, _ := r.split()
	link := sh.arena.Link(idx)
	for {
		h := l.attention.Load()
		link.Store(h)
		if l.attention.CompareAndSwap(h, idx+1) {
			break
		}
	}
	if sh.parked.Load() != 0 {
		sh.unpark()
	}
}

// unpark wakes a parked worker. Only the producer that clears the flag
// sends, so a burst of schedules costs one wake-up. Any goroutine.
func (sh *Shard) unpark() {
	if sh.parked.CompareAndSwap(1, 0) {
		select {
		case sh.wake <- struct{}{}:
		default:
		}
	}
}

// processAttention empties the attention stacks: cancelled nodes are
// unlinked and freed, nodes whose deadline moved earlier are re-filed.
// Worker only.
func (sh *Shard) processAttention() {
	for i := range sh.lanes {
		if l := &sh.lanes[i]; l.attention.Load() != 0 {
			sh.attend(l.attention.Swap(0))
		}
	}
}

// attend handles the nodes of one attention stack, h its head.
func (sh *Shard) attend(h uint32) {
	for h != 0 {
		idx := h - 1
		n := sh.arena.Node(idx)
		// Read the link before clearing queued: once the bit is clear a
		// producer may queue the node again and overwrite Link.
		h = sh.arena.Link(idx).Load()
		s := dequeue(n)
		switch {
		case n.Prev == 0:
			// Not yet transferred: the transfer still ahead of us files
			// or frees it.
		case !s.live():
			if n.Prev != detached {
				sh.w.unlink(idx)
			}
			sh.free(idx, int(idx))
		default:
			// Reset to an earlier deadline: re-file it.
			sh.w.unlink(idx)
			sh.stats.counts[cRefiled]++
			sh.work.refiled++
			sh.file(idx, s)
		}
	}
}
