package shard

import (
	"math"

	"github.com/shardwheel/shardwheel/internal/stress"
)

// Re-planning a parked goroutine's sleep.
//
// The shard goroutine plans to wake for the earliest timer still pending
// (plan, pruneAhead). A request timeout is cancelled long before it is
// due, so the timer it planned for is usually cancelled before the wake
// comes: the wake would find nothing to run. So a Cancel (or a Reset to a
// later deadline) of the timer at the very tick the goroutine sleeps
// until re-plans the sleep itself, if nobody holds the wheel: it frees
// the heads that have ended (or moves on those reset later), finds the
// next tick the wheel needs, and raises sleepUntil and the goroutine's
// alarm to it. The goroutine then wakes only for timers that will run
// (and its housekeeping, whose tick the plan left in h.planFloor).
//
// Handshake with producers that file earlier timers: a producer makes
// its timer visible (filed, or pushed on a queue), then loads sleepUntil
// (wakeFor) and signals if its tick is earlier. The re-plan raises
// sleepUntil by CAS while it holds the wheel, so a timer filed there is
// in the wheel it planned from; a timer pushed on a queue is taken in by
// the re-plan's release (handshake step 2, own.go), which then files it
// and calls wakeFor against the raised value. With sequentially
// consistent atomics either the producer's load sees the raise (and
// signals), or the release sees the push: no timer waits past its tick.

// replanBudget bounds the nodes a re-plan frees or moves: it runs on a
// producer's call, pinned.
const replanBudget = 64

// replanFor re-plans the goroutine's sleep if it sleeps until the tick
// whose low 38 bits are t38, the deadline of the timer a Cancel or a later
// Reset just took away (see the top of this file). Any goroutine; never
// waits.
func (sh *Shard) replanFor(t38 uint64) {
	if until := sh.sleepUntil.Load(); until == math.MaxUint64 || unwrapTicks(t38, until) != until {
		return
	}
	procPin()
	if sh.tryHold() {
		sh.replan()
		sh.release()
	}
	procUnpin()
}

// replan raises sleepUntil to the next tick the wheel needs, if the
// goroutine's last plan parked it and that tick is later. Holder only.
func (sh *Shard) replan() {
	sh.assertHolder()
	until := sh.sleepUntil.Load()
	if !sh.h.parked || until == math.MaxUint64 {
		return
	}
	budget := replanBudget
	sh.prune(&budget)
	next := sh.h.planFloor
	if t, ok := sh.h.w.nextWake(); ok {
		next = min(next, t)
	}
	if next <= until {
		return
	}
	stress.Point()
	sh.wrote(linePlan)
	if !sh.sleepUntil.CompareAndSwap(until, next) {
		return // a wakeFor lowered it: the goroutine wakes anyway
	}
	sh.armAlarm()
}
