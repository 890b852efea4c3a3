package shard

import (
	"context"
	"sync/atomic"

	"github.com/shardwheel/shardwheel/internal/stress"
)

// Runs in flight, and the cancel that waits for them.
//
// A Cancel that returns false cannot say whether the task is still
// running. CancelWait can, because every run is published while it is in
// flight, by its run word (runWordOf: the node's index and the low bits of
// the timer's generation, never 0), in the run table (runTable): the shard
// goroutine publishes the word there before the CAS that fires the timer
// (publishRun; withdrawn if the CAS fails) and hands the run, an execRun,
// to a runner (runner.go), which frees the slot when the task has returned,
// on whatever goroutine ran it. A reader looks at one bucket of the table,
// whatever the runs in flight; the execRuns are pooled, so a run costs no
// allocation in steady state where the goroutine token is cheap
// (cheapGoroutineToken), and a burst's are given back once it is over
// (trimRuns).
//
// A waiter that saw the timer end (its Cancel failed, or, for a periodic
// timer, succeeded) looks for the word in the run table. Since the word is
// stored before the CAS that fired the timer, a waiter that finds it
// nowhere knows that the task has returned or never started; one that
// finds it waits until it is gone. A one-shot timer fires once and a
// cancelled series runs no more, so the word, once gone, never comes back.
//
// Each run also records the token of the goroutine running the task
// (gtoken.go): a waiter whose token it is is that task, and returns at once
// instead of waiting for itself.
//
// Timers that nobody waits for pay the publication (a pooled execRun and a
// slot of the table per run) and, at a run's end, one load of waiters: only
// when it is not zero is the channel notify points to, which the first
// waiter made, closed. Waiters never spin: they park on that channel,
// re-checking after each close, and on their context.

// runWordOf returns the run word of the timer r names: never 0, since
// r's node index is not. A routed timer runs on another shard than its
// node's (cross.go): the word names the node's shard, so that no other
// timer's run there matches it. The generation's low 26 bits stand for it,
// which a node repeats only after 2^26 lives.
func runWordOf(r Ref) uint64 {
	return uint64(r.idx)<<38 | uint64(r.shard&(1<<12-1))<<26 | r.gen&(1<<26-1)
}

// wakeWaiters wakes every goroutine parked in WaitRun, if there is any, to
// look again. Any goroutine; never blocks.
func (sh *Shard) wakeWaiters() {
	if sh.waiters.Load() == 0 {
		return
	}
	sh.wrote(lineRuns)
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
		sh.wrote(lineRuns)
		if sh.notify.CompareAndSwap(nil, &ch) {
			return ch
		}
	}
}

// execRun is one run of a timer's task: the shard goroutine fills it and
// hands it to a runner (runner.go), which runs the task (call) and then
// finishes the run (finish), or passes its method value do to Config.Run,
// which does both from whatever goroutine the executor runs it on.
//
// Field ownership: do and sh are immutable. The rest is written by the
// shard goroutine before it hands the run (the runner's tail, and the
// executor's own synchronization, order the run after it) and read by the
// run and by the shard goroutine (runner.leave); nobody else writes it
// until the run hands the execRun back by pushing it on sh.runFree, whose
// CAS orders the shard goroutine's next use after the run's last. The
// shard goroutine drops the task's closure when it takes it back
// (collectRuns), so that a run never writes what leave may read.
type execRun struct {
	sh   *Shard
	do   func() // the execRun's exec, made once
	task Task
	key  uint64
	// keyed says whether the timer's key orders its runs (a routed
	// timer's: runner.go); tick is its deadline tick, for its lateness.
	keyed bool
	tick  uint64
	idx   uint32
	gen   uint64
	// series is set for a periodic timer's run: the run re-files the
	// series when its task has returned (rearm).
	series bool
	// tab and slot are where the run is published (runTable) until its
	// task has returned; tab stays set until the shard goroutine takes
	// the execRun back (collectRuns). g is the token of the goroutine
	// running the task (gtoken.go), stored by it as the task starts, 0
	// before.
	tab  *runTable
	slot int
	g    atomic.Uintptr
	// on is the runner the run was last handed to (push), for a waiter
	// that is that runner's goroutine: the run starts only after it.
	on   atomic.Pointer[runner]
	next *execRun // runFree's and runPool.spare's link
}

// cancelled reports whether a series' run was cancelled while it was
// handed out: its node no longer running in the generation the run began,
// and not claimed by Stop either (Drain leaves a run handed out to run, as
// the series' last, and does not return the series).
func (r *execRun) cancelled() bool {
	s, mine := load(r.sh.arena.Node(r.idx), r.gen)
	return !mine || (s.status() != statusRunning && s.status() != statusStopped)
}

// call runs the task: its closure, or its handler with its key.
func (r *execRun) call() {
	if f := r.task.Func; f != nil {
		f()
	} else {
		r.sh.cfg.Handlers.Func(r.task.Handler)(r.key)
	}
}

// queuedBehind reports whether the run has not started and is queued on
// the runner whose goroutine's token is me: a waiter that is that goroutine
// would wait for itself.
func (r *execRun) queuedBehind(me uintptr) bool {
	if r.g.Load() != 0 {
		return false
	}
	on := r.on.Load()
	return on != nil && on.token.Load() == me
}

// exec is the run an executor (Config.Run) gets: it runs the task and
// finishes the run, even if the task panics (the panic goes on to the
// executor's run call, which the runner recovers: it is recovered here
// only to finish the run first, and raised again with its value) or calls
// runtime.Goexit (reported here, while the run is still published, as the
// runner reports a panic; the run finishes in a deferred call, which a
// panic handler's own Goexit runs too). recover returns nil for a Goexit,
// and for a nil panic only under GODEBUG=panicnil=1, which is then taken
// for one.
func (r *execRun) exec() {
	r.g.Store(goroutineToken())
	returned := false
	defer func() {
		if returned {
			r.finish()
			return
		}
		if v := recover(); v != nil {
			r.finish()
			panic(v)
		}
		defer r.finish()
		r.sh.report(ErrGoexit)
	}()
	r.call()
	returned = true
}

// countAborts counts in Panics the tasks whose panic or Goexit was reported
// since the last pass (aborts). The shard goroutine, in its pass.
func (sh *Shard) countAborts() {
	if sh.aborts.Load() != 0 {
		sh.wrote(lineExecutor)
		sh.h.counts[cPanics] += sh.aborts.Swap(0)
	}
}

// finish ends a run whose task has returned: a periodic timer's series is
// filed again (or freed, if it ended meanwhile), the run's slot is freed
// and waiters hear of the end, and the execRun goes back to the shard.
// After the push r belongs to the shard goroutine again.
func (r *execRun) finish() {
	sh := r.sh
	if r.series {
		sh.rearm(r.idx)
	}
	r.g.Store(0) // before the word: a run the word no longer names names no goroutine
	r.on.Store(nil)
	stress.Point()
	r.tab.words[r.slot].Store(0)
	sh.wakeWaiters()
	r.giveBack()
}

// giveBack pushes r on its shard's runFree, after which r belongs to the
// shard goroutine again. Whatever goroutine finished the run.
func (r *execRun) giveBack() {
	sh := r.sh
	sh.wrote(lineExecutor)
	for {
		head := sh.runFree.Load()
		r.next = head
		if sh.runFree.CompareAndSwap(head, r) {
			return
		}
	}
}

// openRun publishes the run word of the timer r in the run table and
// returns the execRun that will carry its run, before the CAS that fires
// the timer: from then on a waiter finds the run in flight until the run
// has returned, or until dropRun withdraws it, if that CAS failed. The
// shard goroutine.
func (sh *Shard) openRun(r Ref) *execRun {
	sh.assertGoroutine()
	x := sh.takeRun() // its on is nil: finish cleared it
	sh.publishRun(x, runWordOf(r))
	stress.Point()
	return x
}

// dropRun withdraws the run openRun published, whose timer a Cancel, Reset
// or Stop took first, and keeps its execRun. The shard goroutine.
func (sh *Shard) dropRun(x *execRun) {
	sh.assertGoroutine()
	sh.wrote(lineExecutor)
	x.tab.words[x.slot].Store(0)
	x.tab.live--
	if x.tab.live == 0 {
		sh.pruneRuns()
	}
	x.tab, x.next, sh.runs.spare = nil, sh.runs.spare, x
	sh.runs.idle++
	sh.wakeWaiters()
}

// inFlight reports whether a run of the timer whose run word is word is in
// flight, and whether the calling goroutine is the one running its task:
// a load of two buckets per run table.
func (sh *Shard) inFlight(word uint64, me uintptr) (running, self bool) {
	for t := sh.runTab.Load(); t != nil; t = t.older.Load() {
		a, b := t.bucketsOf(word)
		foundA, selfA := t.has(a, word, me)
		foundB, selfB := false, false
		if b != a {
			foundB, selfB = t.has(b, word, me)
		}
		running = running || foundA || foundB
		self = self || selfA || selfB
	}
	return running, self
}

// WaitRun waits until no run of the timer r is in flight, and returns nil,
// or ctx.Err() if ctx is done first. Called from inside that timer's own
// task it returns nil at once: the task cannot wait for itself; so it does
// from a task of the runner that has the run queued behind it, which starts
// it only after that task returns. It never blocks the shard goroutine,
// and parks rather than spins.
func (sh *Shard) WaitRun(ctx context.Context, r Ref) error {
	word, me := runWordOf(r), goroutineToken()
	running, self := sh.inFlight(word, me)
	if !running || self {
		return nil
	}
	sh.wrote(lineRuns)
	sh.waiters.Add(1)
	defer sh.waiters.Add(-1)
	for {
		// The channel is taken before the check: a run that ends after
		// the check closes it (its end loads waiters, which we raised
		// first), one that ended before is seen ended.
		ch := sh.waitChan()
		stress.Point()
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
