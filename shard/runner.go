package shard

import (
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
//	word = claimed<<runShift | runWoken | runLeft | runIdle
//
//	who        move                   when
//	runner     claimed → claimed+1    a run is handed and not claimed (clears runIdle, runWoken)
//	runner     set runIdle            nothing to claim: it parks on wake after
//	goroutine  runIdle → runWoken     it handed a run to a parked runner: sends on wake
//	runner     set runWoken           a task's runtime.Goexit ended its goroutine: another goes on
//	goroutine  set runLeft            the runner's task held up runs for BlockedAfter
//
// (goroutine: the shard goroutine.) runWoken says that the runner ran
// every run it claimed and has not claimed since it was woken (or since a
// new goroutine took it up): runs wait for its goroutine to get a CPU, not
// behind a task, so watchRunner does not leave it. It looks again a
// BlockedAfter later all the same (runnerWake): the runner claims without
// telling anybody, and the task it starts may block.
//
// Once runLeft is set nobody claims again: the runs the runner had not
// claimed are the shard goroutine's, which wrote them and now splits them
// (leave): the blocked task's key's runs stay with the runner (kept,
// written before the CAS that sets runLeft, read by the runner after it
// sees it), in order, to run after the blocked one; every other run goes to
// a new current runner, in order. While the blocked task runs, its key's
// later timers are held back, pending, out of the wheel (blocked.go), and go
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
// A panic in a task is recovered by its runner and reported (report); a
// runtime.Goexit ends the runner's goroutine after the run finishes, and a
// new goroutine takes up the runner where it was. Neither touches the
// wheel. A runner's goroutine counts in Shard.goroutines; the current
// runner ends when the shard goroutine has exited and its queue is empty,
// a runner left behind once it has run its kept runs.

// Bits of runner.word.
const (
	runIdle  = 1 << 0
	runLeft  = 1 << 1
	runWoken = 1 << 2
	runShift = 3
	// runRingMin is a new runner's ring: a burst grows it.
	runRingMin = 256
	// runBacklog bounds the runs the current runner has not started:
	// the due timers beyond wait in the wheel (runList), so that a
	// runner that falls behind (a blocked task, with WithBlockedAfter 0
	// or at MaxBlocked) holds at most this many run records (about 16
	// MiB at the 230-250 B a run of BenchmarkExecutorBurst).
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
// after it; gid and token by the runner's goroutine as it starts (token
// cleared as it ends), read by anyone; late, took, now, fresh and keptAt
// by the runner (Stats reads the histograms); the rest is the shard
// goroutine's.
type runner struct {
	sh   *Shard
	word atomic.Uint64
	tail atomic.Uint64
	ring atomic.Pointer[runRing]
	wake chan struct{} // capacity 1: the shard goroutine sends, the runner receives
	kept []*execRun
	rec  *blockedRun
	// keptAt is the next kept run to start (runKept): a kept run's
	// Goexit restarts the goroutine there. The runner's.
	keptAt int

	gid   atomic.Uint64  // for IsShardGoroutine: a task that calls Stop
	token atomic.Uintptr // the runner's goroutine token (gtoken.go), for CancelWait; 0 once it ends
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
	r = &runner{sh: sh, wake: make(chan struct{}, 1), all: sh.runners.Load()}
	r.ring.Store(&runRing{e: make([]*execRun, runRingMin), mask: runRingMin - 1})
	sh.runners.Store(r) // the shard goroutine is the list's only writer
	return r
}

// assertGoroutine panics, with the verify tag, when code documented as the
// shard goroutine's runs on another goroutine. Before Start (tests that
// play the shard goroutine) g is 0, and so it is after the goroutine ends.
func (sh *Shard) assertGoroutine() {
	if g := sh.g.Load(); debug && g != 0 && g != goroutineToken() {
		panic("shardwheel: shard-goroutine code called by another goroutine")
	}
}

// makeRoom reports whether the current runner has fewer than runBacklog
// runs it has not started, and sets room to how many more it may be
// handed; when it has not, it publishes the runs handed so far. The shard
// goroutine.
func (sh *Shard) makeRoom() bool {
	sh.assertGoroutine()
	sh.room = runBacklog - int(sh.runsWaiting())
	if sh.room <= 0 {
		sh.flushRuns()
		return false
	}
	return true
}

// runsWaiting returns how many runs handed to the current runner it has
// not started. The shard goroutine.
func (sh *Shard) runsWaiting() uint64 {
	if r := sh.runner; r != nil {
		return r.handed - r.word.Load()>>runShift
	}
	return 0
}

// runnerMoving reports whether the current runner needs a CPU for the runs
// it has not started: it has started one since the last call, or it is
// woken and waiting for its goroutine to be scheduled. A runner whose task
// has held it since the last call (blocked, or busy on a CPU of its own)
// is not moving. The shard goroutine, once a pass (passStep).
func (sh *Shard) runnerMoving() bool {
	r := sh.runner
	if r == nil {
		return false
	}
	w := r.word.Load()
	moved := r != sh.lookRunner || w>>runShift != sh.lookClaimed || w&runWoken != 0
	sh.lookRunner, sh.lookClaimed = r, w>>runShift
	return moved
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
	x.on.Store(r)
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
	if w := r.word.Load(); w&runIdle != 0 && r.word.CompareAndSwap(w, w&^runIdle|runWoken) {
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
	r.token.Store(goroutineToken())
	ended := false
	defer func() {
		if !ended {
			// A task's runtime.Goexit ended this goroutine, after its
			// run finished: another takes the runner up.
			r.token.Store(0) // the runtime may give this goroutine's g to another
			r.word.Or(runWoken)
			go r.loop()
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
				r.token.Store(0)
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
