package shard

import (
	"math"

	"github.com/shardwheel/shardwheel/internal/stress"
	"github.com/shardwheel/shardwheel/pool"
)

// The holder's free nodes, and giving a spike's memory back.
//
// Freed nodes go on the holder's own free list (h.free, through Node.Next),
// which Schedules on the wheel's P pop with no atomic operation: the node
// a sweep step or a take-back just freed is the next one handed out, hot in
// this core's cache.
//
// A spike (millions of timers scheduled at once, then cancelled) grows the
// arena, and its nodes come back to that list: kept, they would hold the
// spike's memory, and their task slots the collector's time, for the life
// of the process. So the list is sized to what the wheel uses. Once a
// review, at most every second, finds that the list never fell below
// reserve plus a big block's worth of nodes since the last one, the
// holder lowers h.limit, a big-block boundary, to shed that surplus from
// the top of the arena: a free node at or above the limit is parked on its
// block (pool.Arena.Park) instead of listed, and a block whose every node
// is parked is released to the garbage collector. Allocation thus drains
// the high blocks: their live timers end in their own time, and nobody
// takes their nodes again. The list the limit was lowered under moves to
// h.sort, which Schedules pop from when the list runs dry and the shard
// goroutine's passes sort a share at a time (sortShare), so an idle shard
// gives the memory back too. When the wheel needs more nodes than lie below
// the limit, the limit rises a block at a time (raiseLimit), taking the
// block's parked nodes back, or making a released block again.
//
// Nodes the holders fed to the arena's lanes (share) are out of the list's
// reach: a burst pushed through the queue leaves its count in its lane's
// demand, and the lane is fed its freed nodes. A review in an interval in
// which no lane needed feeding takes one lane's stock back (takeBackLane)
// into h.back, sorted like h.sort. And cancelled nodes too few for a sweep
// to be due would pin the blocks above the limit for their timers' whole
// delay: a shedding shard sweeps them when nothing is being filed
// (sweepToShed).
//
// Bound: the reserve a review keeps is max(reserveFloor big blocks, an
// eighth of the wheel's timers, twice what producers that did not hold
// the wheel took from the arena's lanes in the last interval). After the
// reviews that follow a spike, a shard holds the blocks its live timers
// occupy, plus free nodes of at most the reserve, what it used at once
// since the previous review, and shedMin big blocks, rounded up to a big
// block; the spike's blocks go back as their nodes are freed (a cancelled
// timer's by the sweep within seconds, a pending one's when it ends).
// Stats show the arena's allocated and released nodes
// (ShardStats.NodesAllocated and NodesReleased).

// noLimit is h.limit while nothing is being shed: above every index.
const noLimit = math.MaxUint32

// reserveFloor is the fewest free nodes a review leaves the holder, in big
// blocks: shedding a block the next burst takes again costs more than
// keeping it.
const reserveFloor = 1

// shedMin is the least surplus, in big blocks, a review sheds: less is
// noise in what the wheel uses from one second to the next.
const shedMin = 1

// takeFree pops a free node of the holder's below h.limit, from its list
// or from h.sort and h.back (popUnsorted), raising the limit if all are
// dry and the arena holds parked or released nodes above it. It reports false when the holder has
// no free node: the caller then takes one from the arena. Holder only.
func (sh *Shard) takeFree() (uint32, pool.Slot, bool) {
	sh.assertHolder()
	h := &sh.h
	for {
		if idx := h.free; idx != 0 {
			s := sh.arena.Slot(idx)
			h.free = s.Node().Next
			h.nfree--
			h.lowFree = min(h.lowFree, h.nfree)
			if idx < h.limit {
				return idx, s, true
			}
			sh.park(idx)
			continue
		}
		if idx, s, ok := sh.popUnsorted(); ok {
			if idx < h.limit {
				return idx, s, true
			}
			sh.park(idx)
			continue
		}
		if !sh.raiseLimit() {
			return 0, pool.Slot{}, false
		}
	}
}

// listFree puts node idx (its slot s), freed and cleared, on the holder's
// list, or parks it if it lies at or above h.limit. Holder only.
func (sh *Shard) listFree(idx uint32, s pool.Slot) {
	sh.assertHolder()
	h := &sh.h
	if idx >= h.limit {
		sh.park(idx)
		return
	}
	s.Node().Next, h.free = h.free, idx
	h.nfree++
}

// park parks free node idx on its block and releases the block once every
// node of it is parked. Holder only.
func (sh *Shard) park(idx uint32) {
	sh.assertHolder()
	if sh.arena.Park(idx) {
		sh.arena.Release(sh.arena.BigBlock(idx))
		sh.h.counts[cBlocksReleased]++
	}
}

// raiseLimit moves h.limit up past the next block that has parked nodes
// (making it again if it was released) and lists them, and reports
// whether it found any. Holder only.
func (sh *Shard) raiseLimit() bool {
	sh.assertHolder()
	h := &sh.h
	stress.Point() // producers may be growing the arena meanwhile
	hw := sh.arena.HighWater()
	for h.limit < hw {
		k := sh.arena.BigBlock(h.limit)
		h.limit += 1 << sh.arena.BigBits()
		if h.limit >= hw {
			h.limit = noLimit
		}
		if sh.arena.Recreate(k) {
			sh.h.counts[cBlocksRemade]++
		}
		if head, tail, n := sh.arena.Unpark(k); n > 0 {
			sh.arena.Node(tail).Next = h.free
			h.free = head
			h.nfree += n
			return true
		}
	}
	h.limit = noLimit
	return false
}

// reviewReserve lowers h.limit when the holder's free list never fell
// below its reserve plus two big blocks since the last review, a second's
// worth of ticks ago at least (see the file comment). The shard goroutine,
// holding the wheel, at tick.
func (sh *Shard) reviewReserve(tick uint64) {
	h := &sh.h
	if tick < h.reviewAt || h.sort != 0 || h.back != 0 {
		return
	}
	h.reviewAt = tick + sh.sweepCheck
	low, shared := h.lowFree, h.shared
	h.lowFree, h.shared, h.sharedBefore = h.nfree, 0, shared > 0
	if shared == 0 {
		sh.takeBackLane()
	}
	block := 1 << sh.arena.BigBits()
	// What producers that do not hold the wheel took from the lanes in
	// the last interval (a shard whose routed timers cross to it feeds
	// their proxies that way) is needed again in the next.
	surplus := low - max(reserveFloor*block, h.w.count/8, 2*shared)
	if surplus < shedMin*block {
		return
	}
	top := min(uint64(h.limit), uint64(sh.arena.HighWater()))
	bigFirst := uint64(block)
	target := max((top-min(top, uint64(surplus))+bigFirst-1)&^(bigFirst-1), bigFirst)
	if target >= top {
		return
	}
	h.limit = uint32(target)
	h.sort, h.nsort = h.free, h.nfree
	h.free, h.nfree = 0, 0
	h.lowFree = 0
}

// reviewDue returns the tick of the next review and true if a review
// might give nodes back: the holder keeps enough free nodes, or lanes were
// fed in this interval or the last (the first quiet one takes a lane back),
// or blocks above the limit wait for a sweep (sweepToShed). The shard
// goroutine wakes for it even when nothing else is due (plan). Holder
// only.
func (sh *Shard) reviewDue() (uint64, bool) {
	sh.assertHolder()
	block := 1 << sh.arena.BigBits()
	h := &sh.h
	return h.reviewAt, h.nfree >= (reserveFloor+shedMin)*block || h.shared > 0 || h.sharedBefore || sh.sweepToShed()
}

// sweepToShed reports whether blocks above the limit wait for cancelled
// nodes the wheel still holds: fewer than a sweep is due for (sweepDue),
// they would pin their blocks until their slots come round, an hour
// later for an hour's timer. The shard goroutine then sweeps them when
// nothing is being filed (sweepHeld), waking for it if idle (plan).
// Holder only.
func (sh *Shard) sweepToShed() bool {
	sh.assertHolder()
	if sh.h.limit == noLimit || sh.heldCancelled() == 0 {
		return false
	}
	// Made nodes beyond the limit's: blocks above it still made (the
	// blocks below it are all made).
	allocated, _ := sh.arena.Footprint()
	return allocated > uint64(sh.h.limit)
}

// takeBackLane takes the stock of one lane of the arena's shared lists
// back into h.back, and forgets the lane's demand, when no lane needed
// feeding in the last interval: a burst from producers that did not hold
// the wheel leaves its nodes' worth of demand, which holders then feed
// the lane with as the burst's timers end, and nodes in a lane nobody
// takes from would hold their blocks for good. One lane per review, the
// next one the next. Holder only, at a review.
func (sh *Shard) takeBackLane() {
	sh.assertHolder()
	h := &sh.h
	for range sh.lanes {
		i := h.backLane
		h.backLane = (h.backLane + 1) % len(sh.lanes)
		if head := sh.arena.TakeLane(i); head != 0 {
			h.back = head
			sh.lanes[i].demand.Store(0)
			return
		}
	}
}

// sortShare sorts up to step nodes of h.sort, then of h.back: those below
// the limit go on the free list, the others are parked. The shard
// goroutine, holding the wheel, each pass while either holds nodes (plan
// wakes it for them every housekeepEvery, with a larger step).
func (sh *Shard) sortShare(step int) {
	for range step {
		idx, s, ok := sh.popUnsorted()
		if !ok {
			return
		}
		sh.listFree(idx, s)
	}
}

// popUnsorted pops a node of h.sort, else of h.back: free nodes the limit
// has not been checked against yet. Holder only.
func (sh *Shard) popUnsorted() (uint32, pool.Slot, bool) {
	sh.assertHolder()
	h := &sh.h
	if idx := h.sort; idx != 0 {
		s := sh.arena.Slot(idx)
		h.sort = s.Node().Next
		h.nsort--
		return idx, s, true
	}
	if idx := h.back; idx != 0 {
		s := sh.arena.Slot(idx)
		h.back = s.Link().Load()
		return idx, s, true
	}
	return 0, pool.Slot{}, false
}
