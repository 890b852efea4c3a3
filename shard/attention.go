package shard

import (
	"github.com/shardwheel/shardwheel/internal/stress"
	"github.com/shardwheel/shardwheel/pool"
)

// The attention queue: nodes the holder must look at, which any goroutine
// pushes: a Reset that moves a filed timer's deadline earlier, a periodic
// timer whose executor's run returned, a routed timer handed back by the
// shard that ran it, and, on the shard a routed timer crosses to, its proxy
// (cross.go), on its first crossing and after a Reset. Unlike the queue of
// new timers, no transfer cap holds it back: every entry is a timer filed
// already, and a proxy's key order must not wait behind other keys' new
// timers. The queue is threaded through the arena's links
// (pool.Arena.Link): a node on it is filed or out of the wheel, so it is on
// no free list and not in the queue of new timers, the other users of its
// link, and it is never freed before the holder has taken it off (see
// releaseNode). A node is pushed once until the holder pops it: the queued
// bit of its state (of its timer's, for a proxy) says it is on its way, and
// a new proxy is pushed by its crossing alone.

// processAttention takes in up to budget nodes of the attention queue:
// nodes whose deadline moved earlier are filed again, proxies filed or
// freed, and nodes whose timer ended meanwhile unlinked and freed. A
// producer that leaves nodes waiting wakes the shard goroutine to finish.
// Holder only.
func (sh *Shard) processAttention(budget int) {
	sh.assertHolder()
	if sh.attention.Empty() {
		return
	}
	sh.wrote(lineAttention) // TryPop takes the pushers' stack
	sh.wrote(lineBacklog)
	for range budget {
		idx, ok := sh.attention.TryPop(sh.arena)
		if !ok {
			return
		}
		stress.Point()
		slot := sh.arena.Slot(idx)
		n := slot.Node()
		if slot.Flags()&pool.FlagProxy != 0 {
			sh.attendProxy(idx, n)
		} else {
			sh.attend(idx, n, dequeue(n))
		}
	}
	if !sh.h.goroutine && !sh.attention.Empty() {
		sh.signal()
	}
}

// attend handles node idx (n), just taken off the attention stack in state
// s. A node there is in the wheel, or detached: ended (releaseNode), or a
// periodic timer its executor's run pushed (periodic.go's rearm),
// pending at its next grid point, or ended while it ran. Holder only.
func (sh *Shard) attend(idx uint32, n *pool.Node, s state) {
	sh.assertHolder()
	if n.Prev == heldOut {
		return // held back behind its key's blocked task: met as it is let go
	}
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
				if ns, t = sh.seriesFileTick(rec, s); ns != s && !n.State.CompareAndSwap(uint64(s), uint64(ns)) {
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
func (sh *Shard) seriesOf(idx uint32) *pool.Series {
	sh.assertHolder()
	return sh.arena.Slot(idx).FindSeries()
}
