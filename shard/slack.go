package shard

import (
	"math/bits"
	"time"

	"github.com/shardwheel/shardwheel/pool"
)

// Slack: timers that may run late by up to a bound, placed where they cost
// the wheel least.
//
// A timer scheduled with slack (Request.Slack) may run at any tick in
// [lo, hi]: lo the first tick at or after its deadline, hi the last tick
// that starts at or before its deadline plus slack. The producer picks
// the tick in that range with the most trailing zero bits (slackTick), so
// that timers with slack gather on few ticks (shared wake-ups), and on the
// first tick of a higher level's slot whenever the range holds one.
//
// Such a tick is what lets the wheel skip the cascade. Besides each
// level's slots, the wheel then keeps a second ring per level >= 1, its
// coarse slots, made at the first timer with slack that lands on one: a
// coarse slot of level l holds only timers due at its first tick, and
// runs when the shard goroutine reaches that tick, like a level-0 slot.
// So a timer with slack is touched twice, filed and fired, however far
// away it was due, as in the Linux timer wheel, which gives up precision
// for this; here only the timers that ask for it do. A timer without
// slack never enters a coarse slot: its placement and its precision are
// what they were. A timer with slack whose tick is not a slot's first, or
// too far for the coarse ring of any level whose slots start on it, is
// filed like any other, at its tick.
//
// Coarse slots follow the rules of the other slots (see wheel): slot
// number N of level l is ring index N mod size, a timer is filed in it
// only if N - N_l(elapsed) < size, so the ring never wraps onto a slot
// still holding timers; they are empty once elapsed has reached their
// first tick. Their list links name their slot like the other slots',
// with indices from coarseBase on (see wheel.slots), so unlink, the sweep
// and takeBack treat them alike.

// slackTick returns the tick a timer due delay after clock reading now,
// which may run up to slack later, is filed at: within [lo, hi] (see the
// top of this file), the tick with the most trailing zero bits. Any
// goroutine.
func (sh *Shard) slackTick(now, delay, slack time.Duration) uint64 {
	delay = sh.clampDelay(delay)
	lo := sh.ceilTick(now + delay)
	hi := sh.floorTick(now + delay + min(slack, sh.maxDelay-delay))
	if hi <= lo || lo == 0 {
		return lo
	}
	// The highest bit in which lo-1 and hi differ is set in hi: hi with
	// the bits below it cleared is above lo-1, and no number in the
	// range has more trailing zeros.
	j := bits.Len64((lo-1)^hi) - 1
	return hi &^ (1<<j - 1)
}

// fileSlack files node idx (n), a timer with slack due at tick t >
// elapsed, in the coarse slot that starts at t, if there is one within a
// ring's reach, and reports whether it did. Holder only.
func (sh *Shard) fileSlack(idx uint32, n *pool.Node, t uint64) bool {
	sh.assertHolder()
	w := sh.h.w
	if t&(w.size/2-1) != 0 || sh.arena.Slot(idx).Flags()&pool.FlagSlack == 0 {
		return false
	}
	for l := 1; l < w.levels && t&(1<<(uint(l)*w.shift)-1) == 0; l++ {
		if num := w.num(l, t); num-w.num(l, w.elapsed) < w.size {
			w.makeCoarse()
			w.link(idx, n, w.coarseBase+w.slotIndex(l, num))
			return true
		}
	}
	return false
}

// makeCoarse makes the coarse slots, once: a second ring of slots per
// level, listed after the others in slots and occupied.
func (w *wheel) makeCoarse() {
	if w.coarseBase != 0 {
		return
	}
	w.coarseBase = uint32(len(w.slots))
	w.slots = append(w.slots, make([]slotList, len(w.slots))...)
	for range w.levels {
		w.occupied = append(w.occupied, make([]uint64, len(w.occupied[0])))
	}
}

// nextCoarse returns the first tick of the earliest occupied coarse slot.
func (w *wheel) nextCoarse() (uint64, bool) {
	if w.coarseBase == 0 || w.count == 0 {
		return 0, false
	}
	var next uint64
	found := false
	for l := 1; l < w.levels; l++ {
		if num, ok := w.nextOccupiedIn(w.occupied[w.levels+l], l); ok {
			if t := num << (uint(l) * w.shift); !found || t < next {
				next, found = t, true
			}
		}
	}
	return next, found
}

// runCoarse expires the coarse slots that start at tick t, which elapsed
// has just reached, as runSlot does a level-0 slot, and reports false if
// the runner's backlog filled first (the rest waits in the due-now slot).
func (sh *Shard) runCoarse(t uint64) bool {
	w := sh.h.w
	ran := true
	for l := 1; l < w.levels && t&(1<<(uint(l)*w.shift)-1) == 0; l++ {
		if si := w.coarseBase + w.slotIndex(l, w.num(l, t)); w.slots[si].head != 0 {
			ran = sh.runList(w.takeSlot(si)) && ran
		}
	}
	return ran
}
