package shard

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/shardwheel/shardwheel/internal/hist"
	"github.com/shardwheel/shardwheel/internal/stress"
)

// Runners: where tasks run.
//
// The shard goroutine never runs a task. It fires a due timer (the run
// published first: cancelwait.go) and hands the run to the shard's current
// runner, a goroutine that starts the runs it is handed one at a time, in
// the order they were handed: the wheel's deadline order, so the tasks of
// one key run one at a time, in deadline order. With an executor
// (Config.Run) the runner hands each run to it instead of running it.
//
// A runner's queue is a ring of runs (execRun), written only by the shard
// goroutine, which publishes how many it has handed (tail) once per list
// of due timers; the runner claims them one at a time by CAS on its word:
//
//	word = claimed<<runShift | runLeft | runIdle
//
//	who        move                   when
//	runner     claimed → claimed+1    a run is handed and not claimed (clears runIdle)
//	runner     set runIdle            nothing to claim: it parks on wake after
//	goroutine  clear runIdle          it handed a run to a parked runner: sends on wake
//	goroutine  set runLeft            the runner's task held up runs for BlockedAfter
//
// (goroutine: the shard goroutine.)
//
// Once runLeft is set nobody claims again: the runs the runner had not
// claimed are the shard goroutine's, which wrote them and now splits them
// (leave): the blocked task's key's runs stay with the runner (kept,
// written before the CAS that sets runLeft, read by the runner after it
// sees it), in order, to run after the blocked one; every other run goes to
// a new current runner, in order. While the blocked task runs, its key's
// later timers are held back, pending, out of the wheel (held.go), and go
// back to the due-now slot when the runner has run its kept runs and
// returned (collectReturned). A runner that was only preempted costs one
// runner start.
//
// The ring: the shard goroutine writes run number i into slot i&mask only
// once the runner has claimed run number i-cap+1 (it reads slot i-1's run
// before it claims run i, so only the latest claimed run may be unread),
// and grows the ring instead, copying the runs from the latest claimed on
// into a new one, which it publishes before the tail that names its new
// runs: a runner that claimed run i reads the ring after loading a tail
// above i, so it finds run i in whichever ring it loads.
//
// Blocked runners are noticed by the shard goroutine, in its pass: it
// looks at the current runner's word while runs wait behind its task; if
// the word is the same as at a look at least BlockedAfter earlier, the
// task has run that long (or its goroutine waited that long for a CPU:
// nothing here tells the two apart) and the runner is left behind it, if
// fewer than Config.MaxBlocked runners are (Config.Blocked counts them for
// all the shards of a Scheduler); else OnRefused hears of it and the runs
// wait. plan wakes the goroutine for the next look while runs wait.
//
// A panic in a task is recovered by its runner and reported (report); a
// runtime.Goexit ends the runner's goroutine after the run finishes, and a
// new goroutine takes up the runner where it was. Neither touches the
// wheel. A runner's goroutine counts in Shard.goroutines; the current
// runner ends when the shard goroutine has exited and its queue is empty,
// a runner left behind once it has run its kept runs.

// ErrGoexit is the value the panic handler receives for a task that called
// runtime.Goexit instead of returning.
var ErrGoexit = errors.New("shardwheel: task called runtime.Goexit")

// Bits of runner.word.
const (
	runIdle  = 1 << 0
	runLeft  = 1 << 1
	runShift = 2
	// runRingMin is a new runner's ring: a burst grows it.
	runRingMin = 256
	// runBacklog bounds the runs the current runner has not started:
	// the due timers beyond wait in the wheel (runList), so that a
	// runner that falls behind (a blocked task, with WithBlockedAfter 0
	// or at MaxBlocked) holds at most this many run records (about 10
	// MiB).
	runBacklog = 1 << 16
)

// runRing is a runner's queue of runs: run number i in e[i&mask].
type runRing struct {
	e    []*execRun
	mask uint64
}

// runner is a goroutine that runs the runs its shard hands it (see the top
// of this file).
//
// Field ownership: word as its table says; tail and ring are stored by the
// shard goroutine, read by the runner; kept and rec are written by the
// shard goroutine before the CAS that sets runLeft and read by the runner
// after it; gid and token by the runner's goroutine as it starts, read by
// anyone; lateness, taskTime and tasks by the runner (Stats reads the
// histograms); the rest is the shard goroutine's.
type runner struct {
	sh   *Shard
	word atomic.Uint64
	tail atomic.Uint64
	ring atomic.Pointer[runRing]
	wake chan struct{} // capacity 1: the shard goroutine sends, the runner receives
	kept []*execRun
	rec  *blockedRun

	gid   atomic.Uint64  // for IsShardGoroutine: a task that calls Stop
	token uintptr        // the runner's goroutine token (gtoken.go), for CancelWait
	all   *runner        // Shard.runners' link, set before it is published
	next  *runner        // Shard.returned's and Shard.spare's link
	late  hist.Histogram // lateness of the tasks it started
	took  hist.Histogram // the time each task took
	// now is the clock reading at the end of the last run, which is the
	// start of the next while the runner goes straight on (fresh): one
	// clock read a task times both.
	now   time.Duration
	fresh bool

	// The shard goroutine's: the runs handed and not yet published in
	// tail (handed), and its last look at word (looked at lookAt).
	handed   uint64
	lookWord uint64
	lookAt   time.Duration
	looked   bool
}

// newRunner returns a runner for the shard goroutine to hand runs to: a
// spare one, or a new one, which Stats readers then find (runners).
func (sh *Shard) newRunner() *runner {
	r := sh.spare
	if r != nil {
		sh.spare, r.next = r.next, nil
		return r
	}
	r = &runner{sh: sh, wake: make(chan struct{}, 1)}
	r.ring.Store(&runRing{e: make([]*execRun, runRingMin), mask: runRingMin - 1})
	for {
		head := sh.runners.Load()
		r.all = head
		if sh.runners.CompareAndSwap(head, r) {
			return r
		}
	}
}

// assertGoroutine panics, with the verify tag, when code documented as the
// shard goroutine's runs on another goroutine. Before Start (tests that
// play the shard goroutine) g is 0, and so it is after the goroutine ends.
func (sh *Shard) assertGoroutine() {
	if g := sh.g.Load(); debug && g != 0 && g != goroutineToken() {
		panic("shardwheel: shard-goroutine code called by another goroutine")
	}
}

// verifyRunners checks the runners' invariants, for verify: the current
// runner has been handed (tail) every run the shard goroutine wrote, has
// claimed no more, and is not left; every held key is the key of a blocked
// run of its own, and the runners left are within MaxBlocked. The shard
// goroutine, between passes.
func (sh *Shard) verifyRunners() {
	if r := sh.runner; r != nil {
		w := r.word.Load()
		if t := r.tail.Load(); t != r.handed || w>>runShift > t || w&runLeft != 0 {
			panic(fmt.Sprintf("shardwheel: runner: handed %d, tail %d, word %#x", r.handed, t, w))
		}
	}
	for key := range sh.heldKeys {
		if !slices.ContainsFunc(sh.blocked, func(b *blockedRun) bool { return b.keyed && b.key == key }) {
			panic(fmt.Sprintf("shardwheel: runner: key %d held with no blocked run of its own", key))
		}
	}
	if sh.cfg.BlockedAfter > 0 && len(sh.blocked) > sh.cfg.MaxBlocked {
		panic(fmt.Sprintf("shardwheel: runner: %d runners left, MaxBlocked %d", len(sh.blocked), sh.cfg.MaxBlocked))
	}
}

// makeRoom reports whether the current runner has fewer than runBacklog
// runs it has not started, and sets room to how many more it may be
// handed; when it has not, it publishes the runs handed so far. The shard
// goroutine.
func (sh *Shard) makeRoom() bool {
	sh.assertGoroutine()
	r := sh.runner
	if r == nil {
		sh.room = runBacklog
		return true
	}
	sh.room = runBacklog - int(r.handed-r.word.Load()>>runShift)
	if sh.room <= 0 {
		sh.flushRuns()
		return false
	}
	return true
}

// hand queues run x on the current runner, after the runs handed before
// it; flushRuns publishes it. The shard goroutine.
func (sh *Shard) hand(x *execRun) {
	sh.assertGoroutine()
	sh.room--
	r := sh.runner
	if r == nil {
		r = sh.newRunner()
		sh.runner = r
		sh.goroutines.Add(1)
		go r.loop()
	}
	sh.push(r, x)
}

// push writes x into r's ring as its next run, growing the ring when the
// runs not yet read would fill it. The shard goroutine.
func (sh *Shard) push(r *runner, x *execRun) {
	g := r.ring.Load()
	t := r.handed
	if w := r.word.Load() >> runShift; t-max(w, 1)+1 >= uint64(len(g.e)) {
		g = r.grow(g, max(w, 1)-1, t)
	}
	g.e[t&g.mask] = x
	r.handed = t + 1
}

// grow publishes a ring twice g's size holding runs from to t (exclusive)
// and returns it. The shard goroutine.
func (r *runner) grow(g *runRing, from, t uint64) *runRing {
	n := &runRing{e: make([]*execRun, 2*len(g.e)), mask: uint64(2*len(g.e) - 1)}
	for i := from; i < t; i++ {
		n.e[i&n.mask] = g.e[i&g.mask]
	}
	r.ring.Store(n)
	return n
}

// flushRuns publishes the runs handed to the current runner since the last
// flush, and wakes it if it is parked. The shard goroutine, after each
// list of due timers.
func (sh *Shard) flushRuns() {
	sh.assertGoroutine()
	r := sh.runner
	if r == nil || r.handed == r.tail.Load() {
		return
	}
	r.tail.Store(r.handed)
	stress.Point()
	if w := r.word.Load(); w&runIdle != 0 && r.word.CompareAndSwap(w, w&^runIdle) {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}

// loop is a runner's goroutine: it claims the runs handed to it and runs
// them, in order, until it is left behind (then it runs its kept runs and
// returns them) or the shard goroutine has exited with nothing left for it.
// A task's runtime.Goexit ends the goroutine: a deferred call starts
// another, which goes on from the next run.
func (r *runner) loop() {
	sh := r.sh
	r.gid.Store(GoroutineID())
	r.token = goroutineToken()
	ended := false
	defer func() {
		if !ended {
			go r.loop() // a task's runtime.Goexit ended this goroutine
		}
	}()
	for {
		w := r.word.Load()
		if w&runLeft != 0 {
			r.runKept()
			ended = true
			r.giveBack()
			return
		}
		c := w >> runShift
		if c < r.tail.Load() {
			if r.word.CompareAndSwap(w, (c+1)<<runShift) {
				g := r.ring.Load()
				r.run(g.e[c&g.mask])
			}
			continue
		}
		select {
		case <-sh.ownerExited:
			// The shard goroutine's last flush came before it closed
			// ownerExited: a tail loaded now holds every run.
			if c >= r.tail.Load() {
				ended = true
				sh.goroutineEnded()
				return
			}
			continue
		default:
		}
		if w&runIdle == 0 {
			r.word.CompareAndSwap(w, w|runIdle) // then look again before parking
			continue
		}
		r.fresh = false
		select {
		case <-r.wake:
		case <-sh.ownerExited:
		}
	}
}

// runKept runs, in order, the runs the shard goroutine left with r behind
// its blocked task, once that task has returned (see the top of this
// file). The runner's goroutine.
func (r *runner) runKept() {
	r.rec.ran.Store(int64(max(r.sh.clock.Now()-r.rec.since, time.Nanosecond)))
	r.rec.done.Store(true)
	for i, x := range r.kept {
		r.kept[i] = nil
		r.run(x)
	}
	r.kept = r.kept[:0]
}

// giveBack ends a runner left behind, once its kept runs are done: it
// hands it back to the shard goroutine (returned), which lets the blocked
// key's held timers go and keeps the runner as a spare. The runner's
// goroutine, its last steps.
func (r *runner) giveBack() {
	sh := r.sh
	sh.cfg.Blocked.Add(-1)
	for {
		head := sh.returned.Load()
		r.next = head
		if sh.returned.CompareAndSwap(head, r) {
			break
		}
	}
	sh.signal()
	sh.goroutineEnded()
}

// run starts run x: its task, or, with an executor, the executor's run
// call with it. With Stats, it records the task's lateness (from its
// deadline tick to its start) and its time, one clock read a task (see
// now; a task that ends its goroutine is not timed). A panic is recovered
// and reported; a runtime.Goexit (the task's, or the panic handler's)
// finishes the run and goes on through loop. The runner's goroutine.
func (r *runner) run(x *execRun) {
	sh := r.sh
	var start time.Duration
	if sh.cfg.Stats {
		if !r.fresh {
			r.now = sh.clock.Now()
		}
		start = r.now
		r.late.Record(int64(start - sh.tickTime(x.tick)))
		r.fresh = false // a Goexit skips the end: the next run reads the clock
	}
	if sh.cfg.Run != nil {
		// The run reports and finishes itself (exec); here only a
		// panic or Goexit of the executor's own.
		if v := call(func() { sh.cfg.Run(x.do) }); v != nil {
			sh.report(v)
		}
		r.ended(start)
		return
	}
	x.g.Store(r.token)
	returned, reporting := false, false
	defer func() {
		if !returned { // a Goexit: the task's, or the panic handler's
			defer x.finish() // run by the handler's own Goexit too
			if !reporting {
				sh.report(ErrGoexit)
			}
		}
	}()
	if v := call(x.call); v != nil {
		reporting = true
		sh.report(v)
		reporting = false
	}
	returned = true
	x.finish()
	r.ended(start)
}

// ended records, with Stats, the time of the run that started at clock
// reading start, whose end starts the next (see now). The runner's
// goroutine.
func (r *runner) ended(start time.Duration) {
	if sh := r.sh; sh.cfg.Stats {
		r.now, r.fresh = sh.clock.Now(), true
		r.took.Record(int64(r.now - start))
	}
}

// call calls f and returns the value of its panic, or nil if it returned.
// A nil panic reports a *runtime.PanicNilError, which recover returns for
// it, or, where GODEBUG=panicnil=1 makes recover return nil, one made
// here. A Goexit never returns from call.
func call(f func()) (panicked any) {
	returned := false
	defer func() {
		if !returned {
			if panicked = recover(); panicked == nil {
				panicked = new(runtime.PanicNilError)
			}
		}
	}()
	f()
	returned = true
	return nil
}

// watchRunner looks at the current runner while runs wait behind its task,
// and leaves it behind a task that has run BlockedAfter (see the top of
// this file). The shard goroutine, in its pass, after its hand-offs.
func (sh *Shard) watchRunner(now time.Duration) {
	sh.assertGoroutine()
	r := sh.runner
	if r == nil || sh.cfg.BlockedAfter <= 0 {
		return
	}
	w := r.word.Load()
	if w&runIdle != 0 || w>>runShift == 0 || w>>runShift == r.handed {
		// Parked, not started (its goroutine waits for a CPU: no task
		// holds the runs up), or nothing waits behind its task.
		r.looked = false
		return
	}
	if !r.looked || w != r.lookWord {
		r.looked, r.lookWord, r.lookAt = true, w, now
		return
	}
	if now-r.lookAt >= sh.cfg.BlockedAfter {
		sh.leave(r, w, now)
	}
}

// runnerWake returns the tick at which the shard goroutine looks at its
// runner next, if runs wait behind its task. The shard goroutine.
func (sh *Shard) runnerWake() (uint64, bool) {
	r := sh.runner
	if r == nil || !r.looked || sh.cfg.BlockedAfter <= 0 {
		return 0, false
	}
	return sh.ceilTick(r.lookAt + sh.cfg.BlockedAfter), true
}

// leave leaves runner r, whose word the shard goroutine saw at w twice
// BlockedAfter apart, behind its task: its key's waiting runs stay with it,
// the rest go to a new current runner (see the top of this file), and the
// key's later timers are held back until r returns. Refused while
// MaxBlocked runners are left (OnRefused hears of it: one look in
// BlockedAfter). The shard goroutine.
func (sh *Shard) leave(r *runner, w uint64, now time.Duration) {
	sh.assertGoroutine()
	b := sh.cfg.Blocked
	if b.Add(1) > int64(sh.cfg.MaxBlocked) {
		b.Add(-1)
		sh.refused.Add(1)
		r.lookAt = now
		if sh.cfg.OnRefused != nil {
			sh.cfg.OnRefused()
		}
		return
	}
	g := r.ring.Load()
	c := w >> runShift
	cur := g.e[(c-1)&g.mask] // the run in progress: claimed, and its ring slot not written since
	moved := sh.moved[:0]
	for i := c; i < r.handed; i++ {
		x := g.e[i&g.mask]
		if cur.keyed && x.keyed && x.key == cur.key {
			r.kept = append(r.kept, x)
		} else {
			moved = append(moved, x)
		}
	}
	r.rec = &blockedRun{key: cur.key, keyed: cur.keyed, fn: sh.taskCode(cur.task), gid: r.gid.Load(), since: r.lookAt}
	stress.Point()
	if !r.word.CompareAndSwap(w, w|runLeft) {
		b.Add(-1) // it went on meanwhile
		clear(r.kept)
		r.kept, r.rec = r.kept[:0], nil
		sh.moved = moved[:0]
		return
	}
	sh.blocked = append(sh.blocked, r.rec)
	sh.publishBlocked()
	if cur.keyed {
		sh.holdKey(cur.key)
	}
	sh.h.counts[cBlockedRuns]++
	sh.runner, sh.room = nil, 0 // room is the new runner's: makeRoom counts it again
	for i, x := range moved {
		sh.hand(x)
		moved[i] = nil
	}
	sh.moved = moved[:0]
	sh.flushRuns()
}

// collectReturned takes back the runners left behind that have run their
// kept runs: it lets their keys' held timers go, forgets their records,
// and keeps the runners as spares. The shard goroutine, in its pass.
func (sh *Shard) collectReturned() {
	sh.assertGoroutine()
	if sh.returned.Load() == nil {
		return
	}
	for r := sh.returned.Swap(nil); r != nil; {
		next, rec := r.next, r.rec
		if ran := time.Duration(rec.ran.Load()); ran > sh.longest.Ran {
			sh.longest = rec.task()
			sh.longest.Ran = ran
		}
		if rec.keyed {
			sh.releaseKey(rec.key)
		}
		for i, b := range sh.blocked {
			if b == rec {
				sh.blocked = append(sh.blocked[:i], sh.blocked[i+1:]...)
				break
			}
		}
		r.rec, r.looked, r.handed = nil, false, 0
		r.tail.Store(0)
		r.word.Store(0)
		r.next, sh.spare = sh.spare, r
		r = next
	}
	sh.publishBlocked()
}

// report counts v, the value of a task's panic or ErrGoexit, in Panics (by
// aborts: countAborts adds it up in the shard goroutine's next pass, which
// it wakes for) and hands it to the panic handler. A handler that calls
// runtime.Goexit ends the goroutine as a task's Goexit would. The goroutine
// that ran the task.
func (sh *Shard) report(v any) {
	sh.wrote(lineExecutor)
	sh.aborts.Add(1)
	sh.signal()
	reportPanic(sh.cfg.OnPanic, v)
}

// reportPanic hands v to the panic handler. A handler that panics itself
// must not kill the runner either: its panic is recovered and dropped, as
// there is nobody left to report it to. A handler's runtime.Goexit cannot
// be stopped: the callers see it.
func reportPanic(onPanic func(any), v any) {
	defer func() { _ = recover() }()
	onPanic(v)
}
