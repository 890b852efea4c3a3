package shard

import (
	"github.com/shardwheel/shardwheel/internal/stress"
	"github.com/shardwheel/shardwheel/pool"
)

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
	sh.assertHolder()
	for idx := sh.attention.TakeAll(); idx != 0; {
		slot := sh.arena.Slot(idx)
		n := slot.Node()
		// Read the link before clearing queued: once the bit is clear a
		// Reset may push the node again and overwrite it.
		next := slot.Link().Load()
		stress.Point()
		if slot.Flags()&pool.FlagProxy != 0 {
			sh.attendProxy(idx, n)
		} else {
			sh.attend(idx, n, dequeue(n))
		}
		idx = next
	}
}

// attend handles node idx (n), just taken off the attention stack in state
// s. A node there is in the wheel, or detached: ended (releaseNode), or a
// periodic timer its executor's run pushed (periodic.go's rearmAsync),
// pending at its next grid point, or ended while it ran. Holder only.
func (sh *Shard) attend(idx uint32, n *pool.Node, s state) {
	sh.assertHolder()
	w := sh.h.w
	for {
		switch st := s.status(); {
		case st == statusPending:
			if n.Prev == 0 {
				badNode(idx, s, "queued for attention while not in the wheel")
			}
			var t uint64
			if rec := sh.seriesOf(idx); rec != nil {
				sh.catchUp()
				var ns state
				if ns, t = sh.seriesFileTick(rec, n, s); ns != s && !n.State.CompareAndSwap(uint64(s), uint64(ns)) {
					s = state(n.State.Load())
					continue
				}
			} else {
				t = sh.tickOf(s)
			}
			if n.Prev != detached {
				w.unlink(idx)
				sh.h.counts[cRefiled]++
				if sh.h.goroutine {
					sh.work.refiled++
				}
			}
			sh.fileOrCross(idx, n, s, t)
			if sh.h.goroutine {
				sh.work.filed++
			}
			sh.wakeFor(t)
		case st == statusCancelled || st == statusFired:
			if n.Prev != detached {
				w.unlink(idx)
			}
			sh.freeNode(idx, n, s)
		case st == statusCancelling && n.Prev == detached:
			// A periodic timer cancelled while its executor ran it,
			// whose Cancel has not finished: filed where the wheel
			// meets it cancelled.
			w.insert(idx, w.elapsed+1)
			sh.wakeFor(w.elapsed + 1)
		default:
			// cancelling in the wheel, or stopped: left where it is,
			// for a later holder to meet (a stopped node is never
			// freed). running: its executor's run pushes it again.
		}
		return
	}
}

// seriesOf returns the Series record of node idx if its timer is
// periodic, else nil. Holder only.
func (sh *Shard) seriesOf(idx uint32) *pool.Series { return sh.arena.Slot(idx).FindSeries() }
