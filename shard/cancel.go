package shard

import (
	"math"
	"time"

	"github.com/shardwheel/shardwheel/internal/stress"
	"github.com/shardwheel/shardwheel/pool"
)

// Cancel and Reset: what any goroutine calls to end a timer or move its
// deadline, lock-free (see producer.go for Schedule).

// Cancel stops the timer r from running and reports whether this call did
// so. It is lock-free and O(1): one CAS to cancelling, the task dropped so
// that the garbage collector may take it, a second CAS to cancelled. The
// node stays where it is until a holder meets it (see freeNode), unless
// Cancel takes it straight back.
func (sh *Shard) Cancel(r Ref) bool { return sh.cancelRef(r, 0) }

// CancelUnindexed is Cancel for an indexed timer whose index entry the
// caller has removed itself: if it cancels the timer, Config.Unindex does
// not hear of it.
func (sh *Shard) CancelUnindexed(r Ref) bool { return sh.cancelRef(r, indexedBit) }

// cancelRef is Cancel, clearing the state bits drop in the same CAS.
func (sh *Shard) cancelRef(r Ref, drop state) bool {
	slot, n, ok := sh.find(r)
	if !ok {
		return false
	}
	p := procPin()
	li := p & sh.laneMask
	// own's line is this P's when the shard is: another P's Cancel does
	// not read it.
	if sh.isLocal(p) && uint32(sh.own.Load()>>ownIdxShift) == r.idx {
		if done, ok := sh.takeBack(r, slot, n, drop); done {
			if ok {
				sh.cancelled(li)
			}
			procUnpin()
			return ok
		}
	}
	procUnpin()
	for {
		s, mine := load(n, r.gen)
		if !mine || !s.live() {
			return false
		}
		if cs, ok, queue := cancel(n, s, drop); ok {
			stress.Point()
			if s.status() != statusRunning {
				// A running series' task belongs to its run, which the
				// Cancel does not stop: the holder that frees the node
				// drops it (freeNode).
				slot.DropFunc()
			}
			endCancel(n, cs)
			sh.cancelled(li)
			stress.Point()
			switch {
			case queue && s.status() == statusHanded:
				sh.cancelHanded(r.idx, n)
			case queue:
				sh.wrote(lineAttention)
				sh.attention.Push(r.idx, slot.Link())
				sh.holdAndTakeIn()
			}
			return true
		}
	}
}

// cancelled counts a Cancel that returned true, on lane li, and gives its
// timer's token back. A Cancel leaves its node in the wheel, and wakes no
// one: but a shard goroutine asleep for long would not sweep the nodes of
// timers cancelled en masse before their slots come round, hours away
// maybe, so every cancelCheck-th Cancel of a lane wakes it to look (see
// sweepHeld). At most one signal per cancelCheck Cancels.
func (sh *Shard) cancelled(li int) {
	l := &sh.lanes[li]
	if n := l.cancels.Add(1); n%cancelCheck == 0 && sh.sleepsLong() {
		sh.signal()
	}
	if sh.cfg.Limited {
		sh.giveBack(l)
	}
}

// sleepsLong reports whether the shard goroutine plans to sleep for
// longer than sweepCheck from its last pass. Any goroutine.
func (sh *Shard) sleepsLong() bool {
	until := sh.sleepUntil.Load()
	return until != math.MaxUint64 && until > sh.plannedAt.Load()+sh.sweepCheck
}

// takeBack cancels the timer r, whose node (n) the last holder filed, by
// holding the wheel: so it goes straight from pending to cancelled (no
// holder can free it meanwhile: it is one) and out of the wheel, and its
// node to the holder's free list, hot in this core's cache, where the
// next Schedule takes it again. A Cancel right after its Schedule (a
// request answered at once) so costs the wheel nothing later. done is
// false if it could not hold the wheel, or the timer is not a plain filed
// one: the caller then cancels as usual; ok is Cancel's answer. Pinned.
func (sh *Shard) takeBack(r Ref, slot pool.Slot, n *pool.Node, drop state) (done, ok bool) {
	if !sh.tryHold() {
		return false, false
	}
	defer sh.release()
	for {
		s, mine := load(n, r.gen)
		if !mine || !s.live() {
			return true, false
		}
		ns := s.to(statusCancelled) &^ drop
		if s.status() != statusPending || s.queued() || ns.indexed() || !inWheel(n.Prev) {
			return false, false // the usual way
		}
		if n.State.CompareAndSwap(uint64(s), uint64(ns)) {
			sh.h.w.unlinkNode(r.idx, n)
			slot.DropFunc() // the Cancel's part (freeSlot leaves a cancelled timer's task alone)
			sh.freeSlot(r.idx, n, ns, slot)
			sh.h.counts[cTakenBack]++
			return true, true
		}
	}
}

// Reset moves the timer r's deadline to delay from now and reports whether
// it was still pending. A later deadline costs one CAS: the holder finds
// the node in its old slot and moves it on. An earlier one also pushes the
// node on the attention stack, for the holder to file again.
//
// For a periodic timer it restarts the series' grid from now with period
// delay (see resetSeries).
//
// key is the timer's Request.Key: a timer with a key that has crossed to
// its key's shard (cross.go) is found there by it. (The node's own Key is
// the holder's to read: another life may be writing it.)
func (sh *Shard) Reset(r Ref, key uint64, delay time.Duration) bool {
	slot, n, ok := sh.find(r)
	if !ok {
		return false
	}
	if rec := slot.FindSeries(); rec != nil {
		// r's record, or r has ended (the node has moved on to a
		// periodic life since): resetSeries finds out.
		return sh.resetSeries(r, n, rec, delay)
	}
	t := sh.deadlineTick(sh.clock.Now(), delay)
	for {
		s, mine := load(n, r.gen)
		if !mine || !s.live() {
			return false
		}
		if s.status() == statusHanded {
			if done, ok := sh.resetHanded(sh.routeOf(key), r, n, s, t); done {
				sh.lanes[CurrentP()&sh.laneMask].resets.Add(1)
				return ok
			}
			continue
		}
		if ok, queue := reset(n, s, t); ok {
			sh.lanes[CurrentP()&sh.laneMask].resets.Add(1)
			stress.Point()
			sh.noticeReset(r.idx, s, t, queue)
			return true
		}
	}
}

// noticeReset makes sure the timer on node idx runs at tick t, where a
// Reset from state s has just moved its deadline: a filed timer now due
// earlier (queue) goes on the attention stack for the holder to file
// again; one still in the queue (statusNew) is filed at t when it is taken
// in, which the shard goroutine, asleep until a later tick, would not do
// before then: wakeFor wakes it. Never waits.
func (sh *Shard) noticeReset(idx uint32, s state, t uint64, queue bool) {
	switch {
	case queue:
		sh.wrote(lineAttention)
		sh.attention.Push(idx, sh.arena.Link(idx))
		sh.holdAndTakeIn()
	case s.status() == statusNew:
		sh.wakeFor(t)
	}
}
