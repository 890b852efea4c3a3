package shard

import (
	"sync/atomic"
	"time"
)

// Stopping. Close and Drain are called by the goroutine that stops the
// scheduler (possibly a task on some worker); Exited, Quiet and Claimed by
// any goroutine.

// Close stops the worker at its next safe point and makes Schedule fail with
// Closed. It does not wait: see Exited. Idempotent.
func (sh *Shard) Close() {
	if sh.closed.CompareAndSwap(false, true) {
		close(sh.done)
	}
}

// Exited returns a channel that is closed when the worker has returned.
// The worker itself must not wait on it (see IsWorker).
func (sh *Shard) Exited() <-chan struct{} { return sh.exited }

// Quiet reports, after Close, whether the worker will touch no timer node
// again, so that Drain may run while it is still alive: true when it is
// running a task (a task never returns into the wheel of a closed shard:
// the worker checks closed after every task and abandons its pass) or has
// exited. When it returns false, the channel it returns is closed as soon
// as the worker starts a task (see runTask); the worker's exit closes
// Exited. The handshake: the worker stores inTask before it loads closed,
// and Close stored closed before Quiet loads inTask, so either Quiet sees
// the task or the worker sees closed and closes the channel.
func (sh *Shard) Quiet() (bool, <-chan struct{}) {
	if sh.inTask.Load() {
		return true, nil
	}
	select {
	case <-sh.exited:
		return true, nil
	default:
		return false, sh.quiet
	}
}

// IsWorker reports whether the goroutine with id gid (see GoroutineID) is
// this shard's worker, as a task run inline is.
func (sh *Shard) IsWorker(gid uint64) bool { return sh.gid.Load() == gid }

// Drain claims every timer that is still pending, after Close, and calls
// emit with each one's reference, key and due time (a clock reading; for
// a timer the worker had not picked up yet, the earliest it could have
// run). A claimed timer is cancelled: it never runs and its handle reports
// not pending, but it keeps its task for Claimed. Timers that lose the race
// to a concurrent Cancel or to the worker are not emitted. Drain must run
// only once, when the worker has exited or is quiet (see Quiet).
func (sh *Shard) Drain(emit func(r Ref, key uint64, due time.Duration)) {
	now := sh.clock.Now()
	hw := sh.arena.HighWater()
	claimed := make([]atomic.Uint64, (hw+63)/64)
	sh.drained.Store(&claimed)
	for idx := uint32(1); idx < hw; idx++ {
		n := sh.arena.Find(idx)
		if n == nil {
			continue // a producer is installing the block: it will see closed
		}
		for {
			s := state(n.State.Load())
			if !s.live() {
				break
			}
			gen := n.Gen.Load()
			if gen == 0 {
				break // a fresh node a producer is still taking (Get bumps Gen first)
			}
			if !s.tagOK(gen) {
				// A new life whose state is not stored yet. Its
				// producer will see closed and undo it. (A live
				// timer cannot be recycled under Drain: only a
				// worker, which has exited or is quiet, and the
				// Cancel that ended a timer free nodes.) Not
				// waiting for that producer keeps Drain from
				// spinning on another goroutine's progress.
				break
			}
			// Success means the state did not change since it was
			// loaded, so gen belongs to the claimed timer; and the
			// CAS orders us after the producer's writes of Key and
			// the task, which nobody writes again: the node is
			// cancelled and never freed, since its worker has
			// exited or is quiet and will exit without touching it.
			if ok, _ := cancel(n, s, 0); ok {
				sh.release()
				sh.stopped.Add(1)
				claimed[idx/64].Or(1 << (idx % 64)) // after the CAS: see Claimed
				emit(makeRef(idx, gen), n.Key, sh.due(s, now))
				break
			}
		}
	}
}

// Unclaim forgets that Drain claimed the timer r, so that Claimed reports
// nil for it from now on: its claimant has handed the task elsewhere.
func (sh *Shard) Unclaim(r Ref) {
	idx, _ := r.split()
	if p := sh.drained.Load(); p != nil && int(idx/64) < len(*p) {
		(*p)[idx/64].And(^(uint64(1) << (idx % 64)))
	}
}

// Claimed returns the task of the timer r if Drain claimed it (from the
// moment it did), and nil otherwise. A set bit is read after Drain's CAS
// on the node (the Or follows it), so the task the producer wrote before
// publishing the node is visible; a claimed node is never freed, so its
// generation still names the claimed timer and no stale handle matches.
func (sh *Shard) Claimed(r Ref) func() {
	p := sh.drained.Load()
	idx, gen := r.split()
	if p == nil || int(idx/64) >= len(*p) || (*p)[idx/64].Load()&(1<<(idx%64)) == 0 {
		return nil
	}
	if n := sh.arena.Find(idx); n == nil || n.Gen.Load() != gen {
		return nil
	}
	return sh.task(idx)
}

// task returns the task of the node at idx as a func(): its closure, or a
// call of its handler with its key. The caller must own the node's task
// (see pool.Arena.Task).
func (sh *Shard) task(idx uint32) func() {
	task, h := sh.arena.Task(idx)
	if task != nil || h == 0 {
		return task
	}
	fn, key := sh.cfg.Handlers.Func(h), sh.arena.Node(idx).Key
	return func() { fn(key) }
}
