package shard

import (
	"sync/atomic"
	"time"

	"github.com/shardwheel/shardwheel/internal/stress"
	"github.com/shardwheel/shardwheel/pool"
)

// Stopping. Close and Drain are called by the goroutine that stops the
// scheduler (possibly a task on some shard's runner); Exited, Stopped and
// Claimed by any goroutine.

// Close stops the shard goroutine at its next safe point and makes
// Schedule fail with Closed. It does not wait: see Exited. Idempotent.
func (sh *Shard) Close() {
	sh.wrote(lineFixed)
	if sh.closed.CompareAndSwap(false, true) {
		close(sh.done)
	}
}

// Exited returns a channel that is closed when the shard goroutine and
// every runner of the shard have returned: every task the shard handed
// out has returned. A task must not wait on it (see IsShardGoroutine).
func (sh *Shard) Exited() <-chan struct{} { return sh.exited }

// Stopped returns a channel that is closed when the shard goroutine has
// returned, which it does within a pass of Close: it runs no task, so
// nothing it waits for is a task's. Drain may run from then on; tasks
// handed out before may still run, but fire no timer.
func (sh *Shard) Stopped() <-chan struct{} { return sh.ownerExited }

// IsShardGoroutine reports whether the goroutine with id gid (see
// GoroutineID) is one of the shard's runners, as the goroutine of a task
// it runs is: a task that stops the scheduler must not wait for itself.
func (sh *Shard) IsShardGoroutine(gid uint64) bool {
	for r := sh.runners.Load(); r != nil; r = r.all {
		if r.gid.Load() == gid {
			return true
		}
	}
	return false
}

// Drain claims, after Close, every timer that is still pending, wherever
// it is (in the wheel, in the queue, held back behind its key's blocked
// task), and calls keep with each one's
// reference, key, due time (a clock reading; for a timer not yet filed,
// the earliest it could run) and task. A claimed timer never runs and its
// handle reports not pending; keep says whether Claimed keeps its task for
// its claimant (true), or the claimant has handed the task elsewhere.
//
// A periodic timer whose run is handed out (running: its task started or
// not) is claimed but not passed to keep: that run, which may start after
// Drain returns, is the series' last, and a claimant that ran the task too
// would run it twice, or beside itself. Timers that lose the race to a
// concurrent Cancel, or to a Schedule that undoes itself, are not claimed.
// Drain must run once, when the shard goroutine has returned (Stopped);
// it never waits for anyone.
func (sh *Shard) Drain(keep func(r Ref, key uint64, due time.Duration, task Task) bool) {
	now := sh.clock.Now()
	hw := sh.arena.HighWater()
	claimed := make([]atomic.Uint64, (hw+63)/64)
	sh.wrote(lineRuns)
	sh.claimed.Store(&claimed)
	for idx := uint32(1); idx < hw; idx++ {
		slot, ok := sh.arena.FindSlot(idx)
		if !ok {
			continue // a producer is installing the block (it will see closed), or it was released
		}
		n := slot.Node()
		for {
			s := state(n.State.Load())
			gen := genOf(n, s)
			stress.Point()
			if !s.live() || gen == 0 {
				break // ended, or a fresh node a producer is still taking
			}
			// Success means the state did not change since it was
			// loaded, so gen belongs to the claimed timer; and the
			// CAS orders us after the producer's writes of Key, the
			// task and the flags, which nobody writes again: a
			// stopped node is never freed.
			if claim(n, s) {
				if slot.Flags()&pool.FlagProxy != 0 {
					break // no timer: it stands for one another shard's Drain claims
				}
				sh.stopped.Add(1) // before the token goes back (see Outs)
				sh.releaseToken()
				if s.status() == statusRunning {
					// A runner holds its run: not returned (see
					// Drain), and the run finds it stopped at its end.
					break
				}
				r := sh.ref(idx, gen)
				if keep(r, n.Key, sh.due(s, now), sh.arena.Task(idx)) {
					claimed[idx/64].Or(1 << (idx % 64)) // after the CAS: see Claimed
				}
				break
			}
		}
	}
}

// Claimed returns the task of the timer r if Drain claimed and kept it
// (from the moment it did), and the zero Task otherwise. A set bit is read
// after Drain's CAS on the node (the Or follows it), so the task the
// producer wrote before publishing the node is visible; a stopped node is
// never freed, so its generation still names the claimed timer and no
// stale handle matches.
func (sh *Shard) Claimed(r Ref) Task {
	p := sh.claimed.Load()
	if p == nil || int(r.idx/64) >= len(*p) || (*p)[r.idx/64].Load()&(1<<(r.idx%64)) == 0 {
		return Task{}
	}
	n := sh.arena.Find(r.idx)
	if n == nil {
		return Task{}
	}
	if s, mine := load(n, r.gen); !mine || s.status() != statusStopped {
		return Task{}
	}
	return sh.arena.Task(r.idx)
}

// Func returns a func() that runs task with key: its closure, or a call of
// its handler with key (one allocation).
func (sh *Shard) Func(task Task, key uint64) func() {
	if task.Func != nil || task.Handler == 0 {
		return task.Func
	}
	fn := sh.cfg.Handlers.Func(task.Handler)
	return func() { fn(key) }
}
