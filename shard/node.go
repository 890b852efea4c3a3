package shard

import (
	"github.com/shardwheel/shardwheel/internal/stress"
	"github.com/shardwheel/shardwheel/pool"
)

// A node's life, from the holder's side: take it (takeFree, or the arena's
// Get), start its life (startLife), file it (file), and free it once its
// timer has ended and it is in no list (releaseNode, freeNode).

// A producer that does not hold the wheel takes its node from its lane of
// the arena's shared lists and counts it in the lane's demand; when the
// lane runs dry (its Get stole from another lane or grew the arena), it
// marks the shard starved, and holders then move nodes of their own free
// list to the lane, as many as it took since it was last fed, at most
// shareMax per hold, which bounds the work of a pass, and in chains of at
// least shareMin, so that a lane fed once serves many Schedules. A producer
// that schedules in bursts while the wheel is held (a task's, or another
// P's), or that crosses routed timers to this shard, thus finds the
// previous burst's nodes where it looks.
const (
	shareMin = 1024
	shareMax = 1 << 16
)

// startLife begins the next life of node n, which its caller has taken
// from a free list and nobody else can reach, with the state of status and
// deadline tick t plus flags, and returns its generation. The generation
// is the node's Epoch and the 20-bit tag of its state: the tag counts
// lives, and Epoch counts the times the tag went round, stored before the
// state, so that a reader who loads the state and then Epoch (see load)
// never pairs a new tag with an old Epoch. Generation 0 is no life: a
// fresh node's state is 0, and its first life has tag 1.
func startLife(n *pool.Node, status, t uint64, flags state) uint64 {
	tag := (n.State.Load()>>tagShift + 1) & tagMask
	epoch := n.Epoch.Load()
	if tag == 0 {
		epoch++
		n.Epoch.Store(epoch)
	}
	stress.Point()
	n.State.Store(uint64(makeState(tag, status, t) | flags))
	return epoch<<tagBits | tag
}

// load returns the state of the timer whose generation is gen, and false
// if the node has moved on to another life. The state is loaded before
// Epoch (see startLife).
func load(n *pool.Node, gen uint64) (state, bool) {
	s := state(n.State.Load())
	stress.Point()
	return s, s.tagOK(gen) && n.Epoch.Load() == gen>>tagBits
}

// genOf returns the generation of the life whose state is s.
func genOf(n *pool.Node, s state) uint64 {
	return n.Epoch.Load()<<tagBits | uint64(s)>>tagShift
}

// file links node idx (n), due at tick t, into the wheel: at t (in a
// coarse slot for a timer with slack that may go there: slack.go), or in
// the due-now slot if t has passed. Holder only.
func (sh *Shard) file(idx uint32, n *pool.Node, t uint64) {
	sh.assertHolder()
	w := sh.h.w
	if t > w.elapsed {
		if !sh.fileSlack(idx, n, t) {
			w.insertNode(idx, n, t)
		}
	} else {
		w.insertDue(idx)
	}
}

// tickOf returns the deadline tick of a live state, unwrapped against the
// wheel's elapsed tick. Holder only.
func (sh *Shard) tickOf(s state) uint64 {
	sh.assertHolder()
	sh.catchUp()
	return unwrapTicks(s.ticks38(), sh.h.w.elapsed)
}

// catchUp moves an empty wheel's elapsed tick up to the holder's tick
// (holder.tick: its call's clock reading, or the last pass's), so that
// deadlines unwrap against a current tick even after the shard slept for
// long. One tick short, so that a timer due now is filed at the current
// tick and runs at the next pass. With nothing filed, nothing
// is skipped. A producer holding the wheel; the shard goroutine catches up
// at the start of its pass, to the tick the pass processes.
func (sh *Shard) catchUp() {
	w := sh.h.w
	if w.count != 0 || sh.h.goroutine {
		return
	}
	// The holder's tick, not a clock read: a Schedule's is its own call's
	// reading (a second read cost a cancel-at-once pair 15%).
	if target := sh.h.tick; target > w.elapsed+1 {
		w.setElapsed(target - 1)
	}
}

// releaseNode finishes with a terminal node that is no longer linked: free
// it, unless it is still on the attention stack, whose processing frees it.
// A terminal state never changes again, so s.queued() cannot become true
// after this check. Holder only.
func (sh *Shard) releaseNode(idx uint32, n *pool.Node, s state) {
	sh.assertHolder()
	if s.queued() {
		n.Prev = detached
		return
	}
	sh.freeNode(idx, n, s)
}

// inWheel reports whether a node whose Prev is prev is linked in a slot:
// not 0 (in no list of the wheel), detached (out of the wheel, on the
// attention queue or with its run) or heldOut (held back behind its key's
// blocked task: blocked.go).
func inWheel(prev uint32) bool { return prev != 0 && prev != detached && prev != heldOut }

// freeNode frees a node whose timer has ended (fired or cancelled) and
// which is in no list: onto the holder's own list (listFree). An indexed
// timer's key index hears of its end first, while the node's Key and
// generation still describe it: at once if the holder may block, else the
// node waits on h.unindex for the shard goroutine. Holder only.
func (sh *Shard) freeNode(idx uint32, n *pool.Node, s state) {
	sh.assertHolder()
	sh.freeSlot(idx, n, s, sh.arena.Slot(idx))
}

// freeSlot is freeNode for a caller that has the node's slot at hand.
func (sh *Shard) freeSlot(idx uint32, n *pool.Node, s state, slot pool.Slot) {
	n.Prev = 0
	if s.indexed() && sh.cfg.Unindex != nil {
		if !sh.h.goroutine {
			if sh.h.unindex == 0 {
				sh.signal()
			}
			n.Next, sh.h.unindex = sh.h.unindex, idx
			return
		}
		sh.cfg.Unindex(n.Key, sh.ref(idx, genOf(n, s)))
	}
	if s.status() == statusCancelled {
		sh.h.counts[cFreedCancelled]++
		slot.ClearCancelled()
	} else {
		slot.Clear()
	}
	sh.h.counts[cFreed]++
	sh.listFree(idx, slot)
}

// share feeds the lanes with a demand (see shareMin) from the holder's own
// free list. Holder only, before it lets go.
func (sh *Shard) share() {
	sh.assertHolder()
	if !sh.starved.Load() {
		return
	}
	sh.wrote(lineStarved)
	sh.starved.Store(false)
	budget := shareMax
	for i := range sh.lanes {
		l := &sh.lanes[i]
		d := l.demand.Load()
		if d == 0 {
			continue
		}
		want := int(min(max(d, shareMin), uint64(budget)))
		n := sh.spill(i, want)
		sh.h.shared += n
		l.demand.Add(-min(uint64(n), d))
		if budget -= n; n < want || budget == 0 {
			// Out of nodes or of budget: a later holder goes on.
			sh.starved.Store(true)
			return
		}
	}
}

// spill moves up to n nodes of the holder's own free list to lane's shared
// list, with one CAS, and returns how many it moved. Holder only.
func (sh *Shard) spill(lane, n int) int {
	sh.assertHolder()
	var c pool.Chain
	moved := 0
	for ; moved < n; moved++ {
		idx, _, ok := sh.takeFree()
		if !ok {
			break
		}
		sh.arena.Add(&c, idx)
	}
	sh.arena.PutChain(lane, &c)
	return moved
}

// unindexEnded frees the nodes pinned holders left on h.unindex. The
// shard goroutine, holding the wheel.
func (sh *Shard) unindexEnded() {
	for idx := sh.h.unindex; idx != 0; {
		n := sh.arena.Node(idx)
		next := n.Next
		sh.freeNode(idx, n, state(n.State.Load()))
		idx = next
	}
	sh.h.unindex = 0
}
