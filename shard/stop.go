package shard

// Stopping. Close and Drain are called by the goroutine that stops the
// scheduler (possibly a task on some worker); Wait by any goroutine but the
// worker itself.

// Close stops the worker at its next safe point and makes Schedule fail with
// Closed. It does not wait: see Wait. Idempotent.
func (sh *Shard) Close() {
	if sh.closed.CompareAndSwap(false, true) {
		close(sh.done)
	}
}

// Wait blocks until the worker has returned. It must not be called from the
// worker itself (see IsWorker).
func (sh *Shard) Wait() { <-sh.exited }

// IsWorker reports whether the goroutine with id gid (see GoroutineID) is
// this shard's worker, as a task run inline is.
func (sh *Shard) IsWorker(gid uint64) bool { return sh.gid.Load() == gid }

// Drain claims every timer that is still pending, after Close, and calls
// emit with each one's reference and key. A claimed timer is
// cancelled: it never runs and its handle reports not pending. Timers that
// lose the race to a concurrent Cancel or to the worker are not emitted.
func (sh *Shard) Drain(emit func(r Ref, key uint64)) {
	hw := sh.arena.HighWater()
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
				// worker frees nodes, and every worker has exited
				// or is running the task that called Stop.) Not
				// waiting for that producer keeps Drain from
				// spinning on another goroutine's progress.
				break
			}
			// Success means the state did not change since it was
			// loaded, so gen belongs to the claimed timer; and the
			// CAS orders us after the producer's write of Key, which
			// nobody writes again while the node is cancelled and not
			// freed: the worker is gone, or, when Stop runs in a
			// task, busy running that task. The task is dropped now,
			// so that a stopped scheduler does not keep closures alive.
			if ok, _ := cancel(n, s, 0); ok {
				sh.release()
				sh.stopped.Add(1)
				*sh.arena.Task(idx) = nil
				emit(makeRef(idx, gen), n.Key)
				break
			}
		}
	}
}
