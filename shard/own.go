package shard

import (
	"math"
	"sync/atomic"

	"github.com/shardwheel/shardwheel/internal/stress"
)

// Holding the wheel.
//
// The wheel, and everything in holder, belongs to one goroutine at a time:
// the holder, which took the owner word own with one CAS. Nobody ever
// waits for it. A producer that finds the wheel held pushes its timer on
// the queue (or its earlier Reset on the attention stack) and returns; the
// holder takes those in before it lets go (release). So Schedule, Cancel
// and Reset are lock-free: each does its own work on the wheel, or leaves
// it where the goroutine holding the wheel is bound to find it.
//
// Two kinds of goroutines hold it. Producers file their own timers, take
// back a timer cancelled at once, and pay the sweep its share; they hold
// the wheel pinned to their P (procPin), so that the runtime cannot preempt
// them in the middle, for a few hundred nanoseconds, and never call
// anything that may block. The shard goroutine holds it, unpinned, for its
// passes: it hands due tasks to the runner (it runs none) and calls
// Config.Unindex, which takes a lock of the key index. (holder.goroutine
// tells the two apart: a pinned holder leaves the index's work to the
// shard goroutine; see freeNode.)
//
// The handshake with the queue, step by step:
//
//  1. A producer pushes its node, then tries to take own.
//  2. A holder, letting go, stores own (Swap), then looks at the queue.
//
// Go's atomics are sequentially consistent, so one of them sees the other:
// either the producer takes the wheel and files its node itself, or the
// holder finds the push and takes the wheel again to file it. The same
// holds for the attention stack.
//
// The shard goroutine, when it finds the wheel held, sets ownWanted; the
// holder's Swap returns the bit, and the holder wakes it (signal).
//
// The rest of own is what the last holder left there at release, so that
// anyone can read it with one load. Its high half is the index of the node
// the last holder filed: a Cancel that finds its node there was probably
// called right after the Schedule, and takes the node straight back
// (takeBack), at the price of one load for every other Cancel. Bits 2-31
// are the low 30 bits of the holders' count of timers filed at once
// (holder.counts[cScheduled]), which Stats thus reads exactly without an
// atomic operation per Schedule (see scheduledNow).

const (
	ownHeld   = 1 << iota // a goroutine holds the wheel
	ownWanted             // the shard goroutine waits for it

	ownCountShift = 2
	ownCountBits  = 30
	ownCountMask  = 1<<ownCountBits - 1
	ownIdxShift   = 32
)

// ownWord returns what the holder leaves in own when it lets go. Holder
// only.
func (sh *Shard) ownWord() uint64 {
	sh.assertHolder()
	return uint64(sh.h.lastFiled)<<ownIdxShift | sh.h.counts[cScheduled]&ownCountMask<<ownCountShift
}

// releaseRounds bounds how often release takes in what arrived while it
// held the wheel before it leaves the rest to the shard goroutine: a
// producer's call must end even while others keep pushing.
const releaseRounds = 3

// takeInBudget bounds the queued timers a producer files for others in one
// hold: a few microseconds of its call at most.
const takeInBudget = 256

// tryHold makes the caller the holder if nobody holds the wheel: one load
// and at most one CAS, never a wait. A producer must be pinned (procPin)
// while it holds. The holder's tick is the last pass's (see holder.tick).
func (sh *Shard) tryHold() bool {
	if !sh.tryHoldAt(0) {
		return false
	}
	sh.h.tick = sh.lastTick // written under the hold
	return true
}

// tryHoldAt is tryHold for a caller that knows the clock's tick: its
// Schedule's.
func (sh *Shard) tryHoldAt(tick uint64) bool {
	o := sh.own.Load()
	stress.Point()
	if o&ownHeld != 0 {
		return false
	}
	sh.wrote(lineOwner)
	if !sh.own.CompareAndSwap(o, o|ownHeld) {
		return false
	}
	sh.h.goroutine, sh.h.tick = false, tick
	sh.heldBy()
	return true
}

// heldBy records, with the verify tag, that the calling goroutine holds
// the wheel now. Holder.
func (sh *Shard) heldBy() {
	if debug {
		sh.h.by.Store(goroutineToken())
	}
	sh.wrote(lineHolder)
}

// letGoBy records, with the verify tag, that nobody holds the wheel: the
// holder, before the Swap that lets go.
func (sh *Shard) letGoBy() {
	if debug {
		sh.h.by.Store(0)
	}
}

// assertHolder panics, with the verify tag, unless the calling goroutine
// holds the wheel: the check behind every "Holder only" of this package.
// Without the tag it compiles to nothing.
func (sh *Shard) assertHolder() {
	if debug && sh.h.by.Load() != goroutineToken() {
		panic("shardwheel: holder-only code called by a goroutine that does not hold the wheel")
	}
}

// holdForPass takes the wheel for the shard goroutine, or marks it wanted
// and reports false: the holder's release then wakes the goroutine.
func (sh *Shard) holdForPass() bool {
	for {
		o := sh.own.Load()
		stress.Point()
		sh.wrote(lineOwner)
		switch {
		case o&ownHeld == 0:
			if sh.own.CompareAndSwap(o, o&^ownWanted|ownHeld) {
				sh.h.goroutine = true
				sh.heldBy()
				return true
			}
		case o&ownWanted != 0 || sh.own.CompareAndSwap(o, o|ownWanted):
			return false
		}
	}
}

// release lets go of the wheel. It feeds the arena's shared free lists if
// producers found them empty, wakes the shard goroutine if it wants the
// wheel, and takes in what producers left in the queue and on the
// attention stack meanwhile (handshake step 2), holding the wheel again for
// it, until it finds nothing, another goroutine holds the wheel (and then
// takes it in), or it has gone round releaseRounds times (and then wakes
// the shard goroutine to finish).
func (sh *Shard) release() {
	goroutine, tick := sh.h.goroutine, sh.h.tick // read while holding
	budget := takeInBudget
	if goroutine {
		budget = passBudget
	}
	if !goroutine && (sh.queue.Backlogged() || sh.attention.Backlogged()) {
		sh.takeIn(budget) // what an earlier holder left beyond its budget
	}
	for round := 0; ; round++ {
		sh.share()
		word := sh.ownWord()
		sh.wrote(lineOwner)
		sh.letGoBy()
		stress.Point()
		if sh.own.Swap(word)&ownWanted != 0 {
			sh.signal()
		}
		stress.Point()
		if !sh.queue.Waiting() && !sh.attention.Waiting() {
			return
		}
		if round == releaseRounds {
			sh.signal()
			return
		}
		if !sh.tryHold() {
			return
		}
		sh.h.goroutine, sh.h.tick = goroutine, tick
		sh.takeIn(budget)
	}
}

// holdAndTakeIn takes the wheel, if it is free, to file what its caller
// just pushed on the queue or the attention stack (handshake step 1), and
// what others left there. Never waits.
func (sh *Shard) holdAndTakeIn() {
	procPin()
	if sh.tryHold() {
		sh.takeIn(takeInBudget)
		sh.release()
	}
	procUnpin()
}

// takeIn files what producers left for the holder: earlier Resets, then new
// timers (at most budget of them). Holder only.
func (sh *Shard) takeIn(budget int) {
	sh.assertHolder()
	sh.processAttention(budget)
	sh.transfer(budget)
}

// signal wakes the shard goroutine, or makes its next sleep return at once.
// Any goroutine; never blocks.
func (sh *Shard) signal() {
	select {
	case sh.wake <- struct{}{}:
	default:
	}
}

// wakeFor makes the shard goroutine wake by tick t, the deadline of a
// timer its caller just filed, queued, or reset earlier while it waits in
// the queue, if it plans to sleep past t: it lowers sleepUntil to t and
// re-arms the goroutine's alarm for it (armAlarm), as the runtime re-arms
// its netpoller's sleep for an earlier timer. The goroutine is not woken
// now: it wakes at t and takes in (or finds filed) what is due then. Timers
// filed after it, due no earlier, do nothing: a burst of timers into a
// parked shard costs one alarm. Any goroutine; never blocks. (In the shard
// goroutine's own pass the plan is made after the filing, so lowering
// sleepUntil there changes nothing.)
func (sh *Shard) wakeFor(t uint64) {
	for {
		until := sh.sleepUntil.Load()
		if t >= until {
			return
		}
		stress.Point()
		sh.wrote(linePlan)
		if sh.sleepUntil.CompareAndSwap(until, t) {
			stress.Point()
			sh.armAlarm()
			return
		}
	}
}

// armAlarm arms the shard goroutine's alarm for the tick sleepUntil holds
// (stops it for MaxUint64: parked untimed), and returns that tick. Every
// writer of sleepUntil calls it after its write, and it arms again while
// sleepUntil changed under it, so the alarm ends armed for sleepUntil's
// last value, whichever writer's Reset the runtime applies last. A caller
// that cannot reset the alarm (a goroutine of a testing/synctest bubble,
// the shard's clock the real one: see Timer) wakes the goroutine instead,
// which arms it itself. Any goroutine; never blocks.
func (sh *Shard) armAlarm() uint64 {
	for {
		until := sh.sleepUntil.Load()
		if until == math.MaxUint64 {
			sh.alarm.Stop()
		} else if !sh.alarm.Reset(sh.tickTime(until) - sh.clock.Now()) {
			sh.signal()
			return until
		}
		stress.Point()
		if sh.sleepUntil.Load() == until {
			return until
		}
	}
}

// holder is the state the goroutine holding the wheel works with.
type holder struct {
	// by is the holding goroutine's token (gtoken.go), kept with the
	// verify tag only, for assertHolder and wrote; atomic, since wrote
	// reads it from any goroutine.
	by        atomic.Uintptr
	w         *wheel
	goroutine bool // the holder is the shard goroutine, which may block (Config.Unindex)
	// free lists (through the nodes' Next) the free nodes below limit
	// that only the holder hands out, with no atomic operation; nfree
	// counts them. Producers that do not hold the wheel take theirs from
	// the arena's shared lists, which the holder feeds when they run dry
	// (share). limit, sort, nsort, back, lowFree and reviewAt size the
	// list to what the wheel uses and give a spike's blocks back
	// (reserve.go).
	free     uint32
	nfree    int
	limit    uint32
	sort     uint32
	nsort    int
	back     uint32 // free nodes taken back from a lane, linked by their Link words
	backLane int    // the lane takeBackLane looks at first
	lowFree  int
	shared   int // nodes share moved to the arena's lanes since the last review
	// sharedBefore: the last review's interval shared nodes, so the next
	// review, which may take a lane back, is worth waking for.
	sharedBefore bool
	reviewAt     uint64
	lastFiled    uint32 // the node the last Schedule filed, published in own
	// tick is the clock's tick as the holder knows it, which the transfer
	// cap counts against: the pass's for the shard goroutine, the call's
	// for a Schedule or Reset, else the last pass's (lastTick, which the
	// shard goroutine writes holding the wheel).
	tick    uint64
	capTick uint64 // the tick whose transfer budget capUsed counts
	capUsed int
	sweep   sweeper
	// unindex lists (through the nodes' Next) ended indexed nodes a
	// pinned holder could not free: Config.Unindex may block, so the
	// shard goroutine, which holds the wheel unpinned, frees them.
	unindex uint32
	counts  [numCounters]uint64 // see stats.go
}
