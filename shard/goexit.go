package shard

import "errors"

// A task that calls runtime.Goexit.
//
// runtime.Goexit (t.FailNow and t.SkipNow call it, from a test's timer)
// ends the goroutine that calls it after running its deferred calls, and
// nothing can stop it: recover returns nil. Inline, that goroutine is the
// shard goroutine, in the middle of a pass, holding the wheel. So the
// shard goroutine is replaced, and the pass it was making is left in a
// state its successor takes up:
//
//  1. runTask runs the task under a deferred call that sees a Goexit: the
//     task neither returned nor panicked (callTask recovers panics, so a
//     deferred call that sees neither is reached only by a Goexit). That
//     call counts and reports it, as a panic with ErrGoexit, and ends the
//     run (endRun). If the shard was closed meanwhile, the goroutine ends
//     as one whose task closed the shard does: it abandons the pass,
//     holding the wheel, and touches no node again, since Stop may be
//     draining it (see Quiet). Otherwise (goexitResume) runTask's callers
//     put back what they were doing, in their own deferred calls, as the
//     Goexit unwinds them:
//  2. expireSeries files an inline series again (step, rearm), as its run
//     returning would have;
//  3. runList puts the nodes of its list it has not reached yet, and the
//     coarse slots of the same tick that advance had not run yet, in the
//     due-now slot (requeueDue): the next pass runs them first, as this
//     one would have. Cascades and later ticks need nothing: the next
//     pass goes on from the wheel's elapsed tick;
//  4. run's deferred call, the goroutine's last, lets go of the wheel and
//     starts the successor instead of closing exited.
//
// The successor is a new shard goroutine from the top of run: it stores
// its goroutine id (IsShardGoroutine, which Stop uses) and token (g, which
// CancelWait uses), locks its own thread and pins it (Config.Pin: the old
// thread ends with its locked goroutine), and makes a pass at once. It
// starts after every deferred call of its predecessor has returned, so
// the shard goroutine's fields pass from one to the other as from one
// pass to the next, and Quiet's handshake holds: between the two there is
// no run word, and the successor checks closed before its first pass. A
// Goexit costs a goroutine start and a pass, never a timer.
//
// A panic handler that calls runtime.Goexit (t.Fatal in a test's handler)
// ends the goroutine it reports on in the same way: on the shard goroutine,
// the successor takes over, the abort counted and reported once (report);
// on an executor's goroutine, the run finishes all the same (goexited).
//
// Through an executor, a task's Goexit ends the executor's goroutine, not
// the shard's (unless the executor runs the task inside its run call, on
// the shard goroutine, which is the case above): the run's own deferred
// call sees it, reports it, and finishes the run as a return would; the
// shard goroutine, woken, counts it in its pass (countAborts).

// ErrGoexit is the value the panic handler receives for a task that called
// runtime.Goexit instead of returning.
var ErrGoexit = errors.New("shardwheel: task called runtime.Goexit")

// Values of Shard.goexit: what a task's Goexit asks of the frames it
// unwinds.
const (
	goexitNone    = iota // no Goexit in progress
	goexitResume         // put the pass's work back, and start a successor
	goexitAbandon        // the shard is closed: leave everything as it is
)

// taskExited handles a Goexit of the task runTask ran (or of the
// executor's run call) on the shard goroutine, in runTask's deferred call:
// it counts and reports it while the run word still names the task, as a
// panic is, then ends the run and tells the frames below what to do. The
// Goexit may be the panic handler's, called for the task's panic or for
// its Goexit (reporting): the abort is counted and reported once, and the
// run ends all the same, in a deferred call that a second Goexit runs too.
// The shard goroutine, holding the wheel.
func (sh *Shard) taskExited(reporting bool) {
	defer func() {
		if sh.endRun() {
			sh.goexit = goexitResume
		} else {
			sh.goexit = goexitAbandon
		}
	}()
	if !reporting { // else the handler ended the goroutine: the panic is reported
		sh.report(ErrGoexit)
	}
}

// report counts v, the value of a task's panic or ErrGoexit, in Panics (by
// aborts: countAborts adds it up at the pass's end) and hands it to the
// panic handler. A handler that calls runtime.Goexit ends the goroutine as
// a task's Goexit would: runTask, whose reporting is then set, sees it.
// The goroutine that ran the task.
func (sh *Shard) report(v any) {
	sh.aborts.Add(1)
	reportPanic(sh.cfg.OnPanic, v)
}

// requeueDue files in the due-now slot the rest of a list that runList
// was walking (rest, its next node, or 0), and the nodes of the coarse
// slots that start at the elapsed tick, which advance runs after that
// tick's level-0 slot: a Goexit left them unrun. Holder.
func (sh *Shard) requeueDue(rest uint32) {
	sh.assertHolder()
	w := sh.h.w
	move := func(idx uint32) {
		for idx != 0 {
			next := w.detach(sh.arena.Node(idx))
			w.insertDue(idx)
			idx = next
		}
	}
	move(rest)
	if w.coarseBase == 0 {
		return
	}
	t := w.elapsed
	for l := 1; l < w.levels && t&(1<<(uint(l)*w.shift)-1) == 0; l++ {
		if si := w.coarseBase + w.slotIndex(l, w.num(l, t)); w.slots[si].head != 0 {
			move(w.takeSlot(si))
		}
	}
}

// runEnded is the shard goroutine's last deferred call (l its life): it
// ends the shard (ownerExited, and exited with the last of its
// goroutines), or, when a task's Goexit ends the goroutine with the shard
// open, lets go of the wheel and starts the successor (see the top of this
// file). It clears g first: the runtime may give the ending goroutine's
// token to another goroutine, which must not pass for the shard goroutine.
// A goroutine a takeover retired (takeover.go) does nothing here: the
// shard has another goroutine.
func (sh *Shard) runEnded(l *life) {
	if l.retired.Load() {
		return
	}
	sh.wrote(lineFixed)
	sh.g.Store(0)
	if sh.goexit != goexitResume {
		if sh.watchdog != nil {
			sh.watchOn.Store(false)
			sh.watchdog.Stop()
		}
		close(sh.ownerExited)
		sh.goroutineEnded()
		return
	}
	sh.goexit = goexitNone
	sh.release()
	go sh.run()
}
