package shard

// The attention stack: a Reset that moves a filed timer's deadline earlier
// pushes the node there (from any goroutine), and the holder takes the
// whole stack with one Swap and files each node again. The stack is
// threaded through the arena's links (pool.Arena.Link): a node on it is
// filed, so it is on no free list and not in the queue, the other users of
// its link, and it is never freed before the holder has taken it off (see
// releaseNode).

// processAttention empties the attention stack: nodes whose deadline moved
// earlier are filed again, and nodes whose timer ended meanwhile are
// unlinked and freed. Holder only.
func (sh *Shard) processAttention() {
	w := sh.h.w
	for idx := sh.attention.TakeAll(); idx != 0; {
		n := sh.arena.Node(idx)
		// Read the link before clearing queued: once the bit is clear a
		// Reset may push the node again and overwrite it.
		next := sh.arena.Link(idx).Load()
		s := dequeue(n)
		switch st := s.status(); {
		case st == statusPending:
			if n.Prev == 0 {
				badNode(idx, s, "queued for attention while not in the wheel")
			}
			w.unlink(idx)
			sh.h.counts[cRefiled]++
			t := sh.tickOf(s)
			sh.file(idx, n, t)
			if sh.h.worker {
				sh.work.refiled++
			}
			sh.wakeFor(t)
		case st == statusCancelled || st == statusFired:
			if n.Prev != detached {
				w.unlink(idx)
			}
			sh.freeNode(idx, n, s)
		default:
			// cancelling or stopped: left where it is, for a later
			// holder to meet (a stopped node is never freed).
		}
		idx = next
	}
}
