package shard

import (
	"math"
	"runtime"
	"runtime/trace"

	"github.com/shardwheel/shardwheel/internal/stress"
)

// The shard goroutine's loop. Everything in this file, expire.go and the
// parts of stats.go it names runs on the shard goroutine only.

func (sh *Shard) run() {
	defer sh.exit()
	sh.g.Store(goroutineToken())
	sh.wrote(lineFixed) // after g: the goroutine is known as itself
	if sh.cfg.Pin != nil {
		// Never unlocked: the thread's CPU mask was changed, and an
		// unlocked thread would go back to the scheduler's pool with it.
		runtime.LockOSThread()
		if err := sh.cfg.Pin(); err != nil && sh.cfg.OnPinError != nil {
			sh.cfg.OnPinError(err)
		}
	}
	for !sh.closed.Load() {
		stress.Point()
		if !sh.holdForPass() {
			// A producer holds the wheel for a moment; its release
			// wakes us (ownWanted).
			select {
			case <-sh.wake:
			case <-sh.done:
			}
			sh.wakeups++
			continue
		}
		sh.pass()
		sh.release()
		if sh.more {
			// A scheduling point between back-to-back passes: the P
			// then runs the timers due on it, other shards' wake-ups
			// among them, instead of waiting up to 10ms for Go to
			// preempt this goroutine.
			runtime.Gosched()
			continue
		}
		sh.sleep()
	}
}

// exit ends the shard goroutine: its runners end once they have run what it
// handed them (every hand-off is flushed by then), and Exited is closed
// with the last of them.
func (sh *Shard) exit() {
	sh.wrote(lineFixed)
	sh.g.Store(0) // the runtime may give the token to another goroutine
	close(sh.ownerExited)
	sh.goroutineEnded()
}

// goroutineEnded counts out the shard goroutine or a runner's goroutine as
// it returns for good, and closes exited with the last. Any of them.
func (sh *Shard) goroutineEnded() {
	if sh.goroutines.Add(-1) == 0 {
		sh.alarm.Stop()
		close(sh.exited)
	}
}

// passBudget bounds the new timers one pass takes from the queue (tasks
// that are due always run): at 30-100ns a node, well under a millisecond,
// so timers that come due while a burst is being taken in run on time.
// Cascades are bounded by their own shares (cascadeAhead), not by this
// budget: they have deadlines, and a sustained burst must not starve them
// into one big move.
const passBudget = 8192

// pass does one round of work, holding the wheel: attention, transfer,
// expiry, cascades, a share of the sweep. While the execution tracer runs,
// the pass is a region of the trace (passes.go); otherwise that costs one
// atomic load.
func (sh *Shard) pass() {
	if trace.IsEnabled() {
		sh.tracedPass()
		return
	}
	sh.passBody()
}

// passBody is pass's work.
func (sh *Shard) passBody() {
	w := sh.h.w
	now := sh.clock.Now()
	target := sh.floorTick(now)
	if debug && target < w.elapsed {
		panic("shardwheel: the clock went backwards")
	}
	sh.recordTick(now, target)
	sh.h.tick = target
	if w.count == 0 && target > w.elapsed+1 {
		// Nothing is filed, so nothing can be skipped: catch elapsed up
		// with the clock before filing, so that deadlines unwrap against
		// a current tick even after the shard was parked for long. One
		// tick short of target, so that a timer already due is filed at
		// target and runs in this pass, as it would have while ticking.
		w.setElapsed(target - 1)
	}
	sh.work, sh.full = passWork{}, false
	sh.h.counts[cWakeups] = sh.wakeups
	sh.collectReturned()
	sh.unindexEnded()
	sh.processAttention(math.MaxInt)
	sh.more = sh.transfer(passBudget)
	sh.advance(target)
	sh.watchRunner(now)
	sh.cascadeAhead()
	sweep, sort := sh.passStep(target)
	sh.sweepHeld(sweep)
	sh.sortShare(sort)
	sh.reviewReserve(target)
	sh.countAborts()
	sh.trimRuns()
	sh.recordPass(now)
	sh.publish()
	sh.recordRecent(now)
	if debug {
		sh.verify()
	}
	sh.plan()
}

// plan decides when the goroutine wakes next: at the next tick while work
// is in flight, else at the tick the wheel needs next for a timer still
// pending (pruneAhead frees the ended ones first: ahead.go), or at which
// housekeeping, trimRuns, a look at the runner or a review has work, parked (timed reports
// whether there is such a tick; a shard with none parks untimed). It
// publishes the tick in sleepUntil, while still holding the wheel, so that
// every timer filed after it is checked against it.
func (sh *Shard) plan() (next uint64, park, timed bool) {
	w := sh.h.w
	sh.pruneAhead()
	next = w.elapsed + 1
	t, any := w.nextWake()
	busy := sh.more || w.dueNow() || !sh.queue.Empty() || !sh.attention.Empty() || sh.h.unindex != 0
	park = !busy && (!any || t > next)
	if park && any {
		next = t
	}
	if sh.full && !sh.more {
		// The runner's backlog stopped the pass behind the clock: look
		// again at the next tick, not at once (elapsed+1 has passed).
		next, park = max(next, sh.floorTick(sh.clock.Now())+1), false
	}
	floor := uint64(math.MaxUint64) // the earliest wake planned for other than the wheel
	if park {
		if sh.housekeeping() {
			floor = sh.housekeepAt
		}
		if r := &sh.runs; r.wake {
			// A burst's execRuns to give back (trimRuns), at its tick.
			floor = min(floor, r.trimAt)
		}
		if at, ok := sh.runnerWake(); ok {
			// Runs wait behind the runner's task: look again
			// (runner.go).
			floor = min(floor, at)
		}
		if at, ok := sh.reviewDue(); ok {
			// Free nodes a review may give back (reserve.go): an idle
			// shard wakes for it, or would keep a spike's memory until
			// its next timer.
			floor = min(floor, at)
		}
		if floor != math.MaxUint64 {
			floor = max(floor, w.elapsed+1)
		}
	}
	if floor != math.MaxUint64 && (!any || floor < next) {
		next, any = floor, true
	}
	timed = !park || any
	sh.wakeTick, sh.slept, sh.timed = next, park, timed
	stress.Point()
	sh.wrote(linePlan)
	sh.plannedAt.Store(w.elapsed)
	until := uint64(math.MaxUint64)
	if sh.runsWaiting() > 0 {
		until = w.elapsed
	}
	if sh.runnerUntil.Load() != until {
		sh.runnerUntil.Store(until)
	}
	if timed {
		sh.sleepUntil.Store(next)
	} else {
		sh.sleepUntil.Store(math.MaxUint64)
	}
	return next, park, timed
}

// sleep waits until the tick sleepUntil holds, which plan set and a
// producer's wakeFor may have lowered since (a timer filed earlier), a
// signal (a producer's release that saw ownWanted, work left over, lanes
// to feed, a Stats reader), or Close. Nobody raises sleepUntil while the
// goroutine sleeps: a timer it planned for that is cancelled meanwhile
// still wakes it, as a stopped runtime timer still wakes its P, and the
// pass frees it then. So the tick sleepUntil holds on waking is the one
// the goroutine was due to wake for, against which recordTick measures
// its lag.
func (sh *Shard) sleep() {
	stress.Point()
	until := sh.armAlarm()
	if until == math.MaxUint64 || sh.tickTime(until) > sh.clock.Now() {
		select {
		case <-sh.alarm.C():
		case <-sh.wake:
		case <-sh.done:
		}
		sh.wakeups++
		until = sh.sleepUntil.Load()
	} // else due already (its alarm's value is dropped by the next Reset)
	sh.wakeTick, sh.timed = until, until != math.MaxUint64
}
