package shard

import (
	"context"
	"sync/atomic"
)

// Runs in flight, and the cancel that waits for them.
//
// A Cancel that returns false cannot say whether the task is still
// running. CancelWait can, because every run is published while it is in
// flight, in one of two places, by its run word (runWordOf: the node's
// index and the low bits of the timer's generation, never 0):
//
//   - runWord, for the run the shard goroutine makes itself: it stores the
//     word before the CAS that fires the timer (fire, begin) and 0 once the
//     task, or the executor's run call, has returned. It replaces the flag
//     Quiet used to read (a task in progress), so it costs no more than
//     that flag did.
//   - an execRun, for a task handed to the executor (WithExecutor): the
//     shard goroutine stores the word in the execRun before it hands the
//     run over, and only then replaces runWord's with runHandedOver, which
//     keeps Quiet seeing a goroutine busy inside the executor's run call
//     but matches no timer: a waiter waits for the task, which clears the
//     execRun's word when it has returned, on whatever goroutine the
//     executor used, and not for the run call. The execRuns are pooled:
//     a run costs no allocation in steady state where the goroutine
//     token is cheap (CheapGoroutineToken), and sh.runs lists every
//     execRun ever made, for waiters to scan.
//
// A waiter that saw the timer end (its Cancel failed, or, for a periodic
// timer, succeeded) looks for the word in runWord, then in the execRuns.
// Since the word is stored before the CAS that fired the timer, and moves
// from runWord to an execRun with no gap (the execRun's store comes first), a waiter that finds it nowhere
// knows that the task has returned or never started; one that finds it
// waits until it is gone. A one-shot timer fires once and a cancelled
// series runs no more, so the word, once gone, never comes back.
//
// Each run also records the token of the goroutine running the task
// (gtoken.go; the shard goroutine's own, g, for runWord): a waiter whose
// token it is is that task, and returns at once instead of waiting for
// itself.
//
// Timers that nobody waits for pay the publication (inline, the run word
// replaces a flag the shard goroutine stored as often; with an executor,
// a pooled execRun per run) and, at a run's end, one load of waiters: only
// when it is not zero is the channel notify points to, which the first
// waiter made, closed. Waiters never spin: they park on that
// channel, re-checking after each close, and on their context.

// runWordOf returns the run word of the timer r names: never 0, since
// r's node index is not. A routed timer runs on another shard than its
// node's (cross.go): the word names the node's shard, so that no other
// timer's run there matches it. The generation's low 26 bits stand for it,
// which a node repeats only after 2^26 lives.
func runWordOf(r Ref) uint64 {
	return uint64(r.idx)<<38 | uint64(r.shard&(1<<12-1))<<26 | r.gen&(1<<26-1)
}

// runHandedOver is runWord while the shard goroutine is inside the
// executor's run call: not 0, so that Quiet sees it busy, and no run word
// (those are at least 1<<38, since a node index is never 0).
const runHandedOver = 1

// beginRun publishes that the shard goroutine is about to fire the timer
// whose run word is word. Shard goroutine, before the CAS that fires it.
func (sh *Shard) beginRun(word uint64) { sh.runWord.Store(word) }

// endRun withdraws beginRun's word once the run has returned (or the CAS
// that would have fired it failed), wakes waiters, and reports whether the
// shard is still open: after Close the shard goroutine must abandon its
// pass, since Quiet may have let Drain start while the word was set.
// Shard goroutine.
func (sh *Shard) endRun() bool {
	sh.runWord.Store(0)
	sh.wakeWaiters()
	return !sh.closed.Load()
}

// wakeWaiters wakes every goroutine parked in WaitRun, if there is any, to
// look again. Any goroutine; never blocks.
func (sh *Shard) wakeWaiters() {
	if sh.waiters.Load() == 0 {
		return
	}
	if p := sh.notify.Swap(nil); p != nil {
		close(*p)
	}
}

// waitChan returns the channel the next wakeWaiters closes, making it if
// there is none. Waiters only.
func (sh *Shard) waitChan() <-chan struct{} {
	for {
		if p := sh.notify.Load(); p != nil {
			return *p
		}
		ch := make(chan struct{})
		if sh.notify.CompareAndSwap(nil, &ch) {
			return ch
		}
	}
}

// execRun is one task handed to the executor: the shard goroutine fills it
// and passes its method value do to Config.Run; do runs the task and then
// finishes the run (finish), from whatever goroutine the executor runs it
// on.
//
// Field ownership: do and sh are immutable. word and g are atomics that
// waiters read. The rest is written by the shard goroutine before it calls
// Config.Run, which hands the execRun to the executor (the executor's own
// synchronization orders the run after it), and read by the run; the run
// hands the execRun back by pushing it on sh.runFree, whose CAS orders the
// shard goroutine's next use after the run's last.
type execRun struct {
	sh   *Shard
	do   func()        // the execRun's exec, made once
	word atomic.Uint64 // the run word of the timer in flight; 0 when idle
	g    atomic.Uintptr
	task Task
	key  uint64
	idx  uint32
	gen  uint64
	// series is set for a periodic timer's run: the run re-files the
	// series when its task has returned (rearmAsync).
	series bool
	next   *execRun // runFree's and runSpare's link
}

// exec runs the task and finishes the run, even if the task panics (the
// panic goes on to the executor, which must recover it).
func (r *execRun) exec() {
	r.g.Store(goroutineToken())
	defer r.finish()
	if f := r.task.Func; f != nil {
		f()
		return
	}
	r.sh.cfg.Handlers.Func(r.task.Handler)(r.key)
}

// finish ends a run whose task has returned: a periodic timer's series is
// filed again (or freed, if it ended meanwhile), waiters hear of the end,
// and the execRun goes back to the shard. After the push r belongs to the
// shard goroutine again.
func (r *execRun) finish() {
	sh := r.sh
	r.task = Task{} // the closure may be collected
	if r.series {
		sh.rearmAsync(r.idx, r.gen)
	}
	r.g.Store(0)
	r.word.Store(0)
	sh.wakeWaiters()
	for {
		head := sh.runFree.Load()
		r.next = head
		if sh.runFree.CompareAndSwap(head, r) {
			return
		}
	}
}

// takeRun returns an idle execRun: from the shard goroutine's spares, else
// from those that runs gave back, else a new one, which it lists in
// sh.runs. Shard goroutine.
func (sh *Shard) takeRun() *execRun {
	if sh.runSpare == nil {
		sh.runSpare = sh.runFree.Swap(nil)
	}
	if r := sh.runSpare; r != nil {
		sh.runSpare, r.next = r.next, nil
		return r
	}
	r := &execRun{sh: sh}
	r.do = r.exec
	var runs []*execRun
	if p := sh.runs.Load(); p != nil {
		runs = *p
	}
	grown := append(runs[:len(runs):len(runs)], r)
	sh.runs.Store(&grown)
	return r
}

// handOver gives the timer's task to the executor through an execRun: one
// that publishes word until the task has returned, and for a series files
// it again then. The shard goroutine, inside runTask. The execRun holds
// the word before runWord lets go of it, so it is never unpublished while
// the task may run; runWord then holds runHandedOver until Config.Run
// returns (see Quiet).
func (sh *Shard) handOver(task Task, key uint64, idx uint32, gen uint64, series bool) {
	r := sh.takeRun()
	r.task, r.key, r.idx, r.gen, r.series = task, key, idx, gen, series
	r.word.Store(sh.runWord.Load()) // beginRun published it
	sh.runWord.Store(runHandedOver)
	sh.cfg.Run(r.do)
}

// inFlight reports whether a run of the timer whose run word is word is in
// flight, and whether the calling goroutine is the one running its task.
func (sh *Shard) inFlight(word uint64, me uintptr) (running, self bool) {
	// runWord first: a run moves from it to an execRun, never back.
	if sh.runWord.Load() == word {
		running, self = true, sh.g.Load() == me
	}
	if p := sh.runs.Load(); p != nil {
		for _, r := range *p {
			if r.word.Load() == word {
				running = true
				self = self || r.g.Load() == me
			}
		}
	}
	return running, self
}

// Running reports whether the task of the timer r is running now (inline,
// or handed to the executor and not returned yet), and whether the caller
// is that task.
func (sh *Shard) Running(r Ref) (running, self bool) {
	return sh.inFlight(runWordOf(r), goroutineToken())
}

// WaitRun waits until no run of the timer r is in flight, and returns nil,
// or ctx.Err() if ctx is done first. Called from inside that timer's own
// task it returns nil at once: the task cannot wait for itself. It never
// blocks the shard goroutine, and parks rather than spins.
func (sh *Shard) WaitRun(ctx context.Context, r Ref) error {
	word, me := runWordOf(r), goroutineToken()
	running, self := sh.inFlight(word, me)
	if !running || self {
		return nil
	}
	sh.waiters.Add(1)
	defer sh.waiters.Add(-1)
	for {
		// The channel is taken before the check: a run that ends after
		// the check closes it (its end loads waiters, which we raised
		// first), one that ended before is seen ended.
		ch := sh.waitChan()
		if running, _ = sh.inFlight(word, me); !running {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			if running, _ = sh.inFlight(word, me); !running {
				return nil
			}
			return ctx.Err()
		}
	}
}

// CancelWait cancels the timer r and reports whether this call stopped it
// before its task started (for a periodic timer: whether the series was
// still live), as Cancel does; then, unless it is called from inside the
// timer's own task, it waits until no run of the timer's task is in flight
// (see WaitRun). The error is ctx.Err() if ctx was done first.
func (sh *Shard) CancelWait(ctx context.Context, r Ref) (bool, error) {
	ok := sh.Cancel(r)
	return ok, sh.WaitRun(ctx, r)
}
