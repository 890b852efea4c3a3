package shard

import (
	"math"
	"runtime"
	"time"
)

// The worker's loop. Everything in this file, transfer.go, attention.go's
// processAttention, expire.go and wheel.go runs on the worker goroutine only.

func (sh *Shard) run() {
	defer close(sh.exited)
	// Counters of the pass a task abandoned by calling Stop are published
	// too, so that Stats add up after Stop.
	defer sh.stats.publish()
	sh.gid.Store(GoroutineID())
	if sh.cfg.Pin != nil {
		// Never unlocked: the thread's CPU mask was changed, and an
		// unlocked thread would go back to the scheduler's pool with it.
		runtime.LockOSThread()
		if err := sh.cfg.Pin(); err != nil && sh.cfg.OnPinError != nil {
			sh.cfg.OnPinError(err)
		}
	}
	timer := sh.clock.NewTimer()
	defer timer.Stop()
	for !sh.closed.Load() {
		if !sh.pass() {
			return
		}
		if !sh.more {
			sh.sleep(timer)
		} else {
			// A scheduling point between back-to-back passes: the P
			// then runs the timers due on it, other shards' wake-ups
			// among them, instead of waiting up to 10ms for Go to
			// preempt this goroutine.
			runtime.Gosched()
		}
	}
}

// passBudget bounds the new timers one pass takes in (tasks that are due
// always run): at 30-100ns a node, well under a millisecond, so timers
// that come due while a burst is being taken in run on time. Cascades are
// bounded by their own shares (cascadeAhead), not by this budget: they have
// deadlines, and a sustained burst must not starve them into one big move.
const passBudget = 8192

// pass does one round of work: attention, transfer, expiry, cascades. It
// returns false if a task closed the shard, in which case it abandons the
// round: Drain has claimed every live node, and the wheel is never used
// again.
func (sh *Shard) pass() bool {
	now := sh.clock.Now()
	target := sh.floorTick(now)
	if debug && target < sh.w.elapsed {
		panic("shardwheel: the clock went backwards")
	}
	sh.recordTick(now, target)
	if sh.w.count == 0 && target > sh.w.elapsed+1 {
		// Nothing is filed, so nothing can be skipped: catch elapsed up
		// with the clock before filing, so that deadlines unwrap against
		// a current tick even after the shard was parked for long. One
		// tick short of target, so that a timer already due is filed at
		// target and runs in this pass, as it would have while ticking.
		sh.w.elapsed = target - 1
	}
	sh.work = passWork{}
	sh.processAttention()
	sh.more = sh.transfer(target, passBudget)
	ok := sh.advance(target, now)
	if ok {
		sh.cascadeAhead()
	}
	for i := range sh.freed {
		sh.arena.PutChain(i, &sh.freed[i])
	}
	sh.stats.counts[cResident] = uint64(sh.w.count)
	sh.recordPass(now)
	sh.stats.publish()
	if debug && ok {
		sh.verify()
	}
	// Unless sleep plans otherwise, the next tick is the one due next.
	sh.wakeTick, sh.slept, sh.timed = sh.w.elapsed+1, false, true
	sh.dueTick.Store(sh.wakeTick)
	return ok
}

// plan decides when the worker wakes next: at the next tick while work is
// in flight, else at the tick the wheel needs next, parked (timed reports
// whether there is such a tick; a shard with no timers parks untimed).
func (sh *Shard) plan() (next uint64, park, timed bool) {
	next = sh.w.elapsed + 1
	t, any := sh.w.nextWake()
	park = !sh.busy() && (!any || t > next)
	if park && any {
		next = t
	}
	timed = !park || any
	sh.wakeTick, sh.slept, sh.timed = next, park, timed
	if timed {
		sh.dueTick.Store(next)
	} else {
		sh.dueTick.Store(math.MaxUint64)
	}
	return next, park, timed
}

// busy reports whether producers have left work for the next pass: new
// timers in a queue or nodes on an attention stack.
func (sh *Shard) busy() bool {
	for i := range sh.lanes {
		if sh.lanes[i].attention.Load() != 0 {
			return true
		}
	}
	return !sh.queuesEmpty()
}

// queuesEmpty reports whether every lane's incoming queue is empty, with no
// push in progress.
func (sh *Shard) queuesEmpty() bool {
	for i := range sh.lanes {
		if !sh.lanes[i].queue.Empty() {
			return false
		}
	}
	return true
}

// sleep waits until the planned tick, a producer's signal, or Close. When
// parked it publishes the flag that makes producers wake it.
func (sh *Shard) sleep(timer Timer) {
	next, park, timed := sh.plan()
	if park {
		sh.parked.Store(1)
		// Re-check after publishing parked: a producer that pushed
		// before it could see the flag is visible here, and one that
		// pushes later will see the flag and wake us.
		if sh.busy() {
			sh.parked.Store(0)
			return
		}
	}
	var fire <-chan time.Time
	if timed {
		d := sh.tickTime(next) - sh.clock.Now()
		if d <= 0 {
			sh.parked.Store(0)
			return
		}
		timer.Reset(d)
		fire = timer.C()
	}
	select {
	case <-fire:
	case <-sh.wake:
	case <-sh.done:
	}
	sh.parked.Store(0)
}
