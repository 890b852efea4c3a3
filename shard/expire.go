package shard

import (
	"math"
	"runtime"
	"time"

	"github.com/shardwheel/shardwheel/pool"
)

// Expiry: the shard goroutine, holding the wheel, runs the timers that come
// due and moves higher levels down. Everything here is the shard
// goroutine's.

// advance processes every tick up to target: it runs the level-0 slots
// that come due and, before elapsed passes a higher slot's cascade
// deadline, moves what is left of that slot down (normally nothing:
// cascadeAhead has moved it in shares). now is the clock reading the pass
// started with. It returns false if a task closed the shard.
//
// Coarse slots (slack.go) come due at their first tick, where they run
// like a level-0 slot: after that tick's level-0 slot, before a cascade
// whose deadline is that tick.
func (sh *Shard) advance(target uint64, now time.Duration) bool {
	w := sh.h.w
	now, ok := sh.runDue(now)
	if !ok {
		return false
	}
	for {
		due, okDue := w.nextDue()
		c, okC := w.nextCascade()
		cs, okCs := w.nextCoarse()
		if okC && c.deadline <= target && (!okDue || c.deadline < due) && (!okCs || c.deadline < cs) {
			w.setElapsed(c.deadline)
			sh.cascade(c.level, c.num, math.MaxInt) // all of it: filed may be short after a wrap
			continue
		}
		next, okNext := due, okDue
		if okCs && (!okDue || cs < due) {
			next, okNext = cs, true
		}
		if !okNext || next > target {
			break
		}
		w.setElapsed(next)
		var ok bool
		if okDue && due == next {
			if now, ok = sh.runSlot(due, now); !ok {
				return false
			}
		}
		if okCs && cs == next {
			if now, ok = sh.runCoarse(next, now); !ok {
				return false
			}
		}
	}
	w.setElapsed(target)
	return true
}

// runDue runs the timers filed due already (see wheel.insertDue), if any.
func (sh *Shard) runDue(now time.Duration) (time.Duration, bool) {
	if !sh.h.w.dueNow() {
		return now, true
	}
	return sh.runSlot(sh.h.w.elapsed, now)
}

// lateSample is how many tasks of one tick share a lateness sample: the
// clock is read again after that many, so that a tick with many tasks does
// not report its last ones as on time.
const lateSample = 64

// runSlot expires the nodes of level-0 slot number due (the tick elapsed
// just reached, or elapsed itself for the timers filed due) and returns
// the clock reading after their tasks. now is a reading taken before it
// started. Lateness is measured from each task's own deadline tick, one
// sample for a run of up to lateSample tasks of the same tick. The time
// its tasks held the shard, from the start of the first (see runTask) to
// the reading after the last, adds to the pass's PassWork.Tasks: two
// clock reads per list, not per task.
func (sh *Shard) runSlot(due uint64, now time.Duration) (time.Duration, bool) {
	return sh.runList(sh.h.w.take(due), now)
}

// runList expires the nodes of a list that take (or takeCoarse) removed
// from its slot, first being its first node, as runSlot describes. A task
// that calls runtime.Goexit leaves the rest of the list unrun: the
// deferred call puts it back (goexit.go).
func (sh *Shard) runList(first uint32, now time.Duration) (time.Duration, bool) {
	l := sh.curLife
	defer func() {
		if l.retired.Load() {
			return // a takeover has the wheel, and the list's rest
		}
		if sh.goexit == goexitResume {
			sh.requeueDue(sh.cur.rest)
		}
		sh.cur.ran = 0 // recorded, or dropped with an abandoned pass
	}()
	var tick, ran uint64
	record := func() {
		if ran > 0 && sh.cfg.Stats {
			sh.stats.lateness.RecordN(int64(now-sh.tickTime(tick)), ran)
			now = sh.clock.Now() // tasks took time: later ones start later
		}
		ran = 0
	}
	c := &sh.cur
	w := sh.h.w
	for idx := first; idx != 0; {
		n := sh.arena.Node(idx)
		next := w.detach(n)
		// While a task runs: the list's nodes not reached yet, and the
		// lateness not recorded yet (a takeover records them).
		c.rest, c.batch, c.ran, c.now = next, tick, ran, now
		t, fired, ok := sh.expire(idx, n)
		if !ok {
			return now, false
		}
		if fired {
			if t != tick || ran == lateSample {
				record()
				tick = t
			}
			ran++
		}
		idx = next
	}
	record()
	if sh.work.timing {
		// A task ran, so record read the clock after the last one.
		sh.work.tasks += now - sh.work.taskStart
		sh.work.timing = false
	}
	return now, true
}

// cascadeAhead moves down a share of each higher-level slot whose window
// is open, after advance has brought elapsed to the pass's target: in
// proportion to the ticks since the last pass that paced (within the
// window) out of those left before the slot's cascade deadline, and at
// least cascadeChunk nodes, so that a small slot moves in one go and the
// shard goroutine need not tick for it. Passes again within the same tick
// move nothing more.
func (sh *Shard) cascadeAhead() {
	w := sh.h.w
	e := w.elapsed
	if e == sh.pacedTick || w.count == 0 {
		sh.pacedTick = e
		return
	}
	for l := w.levels - 1; l >= 1; l-- {
		num := w.num(l, e) + 1
		sl := &w.slots[w.slotIndex(l, num)]
		if sl.head == 0 {
			continue
		}
		// advance has moved every slot whose deadline it reached.
		d := w.cascadeDeadline(l, num)
		covered := e - max(sh.pacedTick, w.windowOpen(l, num)-1)
		filed := uint64(sl.filed)
		share := filed
		if covered < d-e+1 {
			share = (filed*covered + d - e) / (d - e + covered)
		}
		share = max(share, min(filed, cascadeChunk))
		sh.cascade(l, num, int(share))
	}
	sh.pacedTick = e
}

// cascadeChunk is the least cascadeAhead moves of a slot in a pass: a few
// tens of microseconds of work.
const cascadeChunk = 1024

// cascade moves up to limit nodes of level l's slot num down the wheel,
// where their deadlines now fit, and frees those whose timer has ended.
func (sh *Shard) cascade(l int, num uint64, limit int) {
	w := sh.h.w
	si := w.slotIndex(l, num)
	moved := 0
	for ; moved < limit; moved++ {
		idx := w.popHead(si)
		if idx == 0 {
			break
		}
		n := sh.arena.Node(idx)
		s := state(n.State.Load())
		switch s.status() {
		case statusPending, statusCancelling:
			// Not file: a Reset may have made it due already, and
			// advance may be past its due-now slot. Its attention
			// entry files it again at the next pass, if it is not run
			// at the next tick first. A cancelling node is met again
			// once its Cancel has finished.
			t := max(unwrapTicks(s.ticks38(), w.elapsed), w.elapsed+1)
			if s.status() == statusPending && !s.queued() {
				if k := sh.crossing(n, s, t); k != nil && sh.cross(k, idx, n, s) {
					break
				}
			}
			w.insert(idx, t)
		case statusCancelled:
			sh.releaseNode(idx, n, s)
		case statusStopped:
			// Stop claimed it: out of the wheel, never freed.
		default:
			badNode(idx, s, "new or fired node in the wheel")
		}
	}
	sh.h.counts[cRefiled] += uint64(moved)
	sh.work.refiled += moved
	sh.work.cascaded += moved
}

// expire handles a node whose level-0 slot came due: file it again if a
// Reset moved its deadline later, else fire it. It reports whether it ran
// the task and its deadline tick, and false for ok if a task closed the
// shard.
//
// The run word (cancelwait.go) is published before the CAS that fires the
// timer and withdrawn after its task (endRun), which also reports whether
// the shard is still open.
func (sh *Shard) expire(idx uint32, n *pool.Node) (tick uint64, fired, ok bool) {
	w := sh.h.w
	for {
		s := state(n.State.Load())
		switch s.status() {
		case statusPending:
			slot := sh.arena.Slot(idx)
			if f := slot.Flags(); f&pool.FlagProxy != 0 {
				return sh.expireProxy(idx, n)
			} else if s.routed() && !s.queued() {
				// A routed timer met here (filed due, or reset earlier
				// into level 0) crosses now; the next tick tries again
				// if it cannot.
				tick = max(unwrapTicks(s.ticks38(), w.elapsed), w.elapsed)
				if k := sh.routeOf(n.Key); k != nil {
					if !sh.cross(k, idx, n, s) {
						w.insert(idx, max(tick, w.elapsed+1))
					}
					return 0, false, true
				}
			}
			if rec := slot.FindSeries(); rec != nil {
				var again bool
				if tick, fired, ok, again = sh.expireSeries(idx, n, slot, rec, s); again {
					continue
				}
				return tick, fired, ok
			}
			tick = unwrapTicks(s.ticks38(), w.elapsed)
			if tick > w.elapsed {
				sh.h.counts[cRefiled]++
				sh.work.refiled++
				w.insert(idx, tick)
				return 0, false, true
			}
			gen := genOf(n, s)
			fs, fired, again, ok := sh.fireDue(n, s, sh.ref(idx, gen), idx, n)
			if again {
				continue // Cancel or Reset won the race
			}
			if !fired {
				return 0, false, ok
			}
			task, key := slot.Task(), n.Key
			sh.h.counts[cFired]++
			// Published at once: a task may run long, holding the
			// wheel, and Live must not count it pending meanwhile;
			// and before its token goes back (see Outs).
			sh.wrote(lineGoroutine)
			sh.stats.published[cFired].Store(sh.h.counts[cFired])
			sh.releaseToken()
			sh.work.fired++
			sh.releaseNode(idx, n, fs)
			sh.cur.tick = tick
			sh.runTask(task, key, s.routed(), idx, gen, false)
			return tick, true, sh.endRun()
		case statusCancelled:
			sh.releaseNode(idx, n, s)
		case statusCancelling:
			w.insert(idx, w.elapsed+1) // met again next tick, cancelled
		case statusStopped:
			// Stop claimed it: out of the wheel, never freed.
		default:
			badNode(idx, s, "new or fired node in the wheel")
		}
		return 0, false, true
	}
}

// fireDue fires a due timer, in state s on node n, whose handle is r: the
// shard goroutine met it here on node hidx (hn), which is n itself, or for
// a timer that crossed to this shard its proxy (expireProxy). If the
// timer's key has a task blocked (takeover.go), it holds hn back behind it
// and reports fired false. Else it publishes the run word (beginRun) and
// fires the timer (fire): it returns the fired state and fired true, or,
// when a Cancel or Reset won the race, withdraws the word (endRun) and
// reports again (look at the timer again) if the shard is still open, and
// ok false if it is not (abandon the pass).
func (sh *Shard) fireDue(n *pool.Node, s state, r Ref, hidx uint32, hn *pool.Node) (fs state, fired, again, ok bool) {
	if hk := sh.heldFor(s, n.Key); hk != nil {
		sh.holdBack(hk, hidx, hn) // its key's task is blocked (takeover.go)
		return 0, false, false, true
	}
	sh.beginRun(runWordOf(r))
	if fs, fired = fire(n, s); !fired {
		ok = sh.endRun()
		return 0, false, ok, ok
	}
	return fs, true, false, true
}

// runTask runs a timer's task, the timer of generation gen on node idx:
// its closure, or its handler with key; with an executor, it hands the
// task over (handOver), a series' to be filed again when it returns. keyed
// says whether the timer has a key whose tasks run one at a time on the
// shard goroutine (a takeover holds the key back while it blocks). The caller has published
// the timer's run word (beginRun), and withdraws it after: the panic
// handler below still counts as part of the task. See Quiet for the
// handshake with closed. The first task of a list reads the clock for
// runList's PassWork.Tasks; one task in taskSampleEvery is timed alone for
// Stats.TaskTime. A task (or run call) that calls runtime.Goexit never
// returns here: the deferred call below sees it, ends the run, and hands
// the shard to a successor (goexit.go). A task that blocks may have its
// wheel taken over meanwhile (takeover.go): the calling goroutine then
// retires as the task returns, and never returns here either.
func (sh *Shard) runTask(task Task, key uint64, keyed bool, idx uint32, gen uint64, series bool) {
	l := sh.curLife
	if sh.closed.Load() && !sh.quieted {
		sh.quieted = true
		close(sh.quiet)
	}
	if sh.cfg.Stats && !sh.work.timing {
		// The first task of its list: runList times the list's tasks
		// from here.
		sh.work.timing = true
		sh.work.taskStart = sh.clock.Now()
	}
	sh.stats.tasks++
	if sh.cfg.Stats && sh.stats.tasks%taskSampleEvery == 0 {
		start := sh.clock.Now()
		defer func() {
			if !l.retired.Load() {
				sh.stats.taskTime.Record(int64(sh.clock.Now() - start))
			}
		}()
	}
	var run *execRun
	if sh.cfg.Run != nil {
		// Before the task starts: a takeover may have the wheel from
		// then on, and the run table is the shard goroutine's.
		run = sh.handOver(task, key, idx, gen, series)
	}
	seq := sh.enterTask(task, key, keyed, idx, gen, series)
	returned, reporting := false, false
	defer func() {
		if returned {
			return
		}
		// A Goexit: the task's, or the panic handler's while reporting.
		if !sh.leaveTask(seq) {
			// Retired meanwhile: an executor that runs the task
			// inline (Config.Run) has reported the task's Goexit
			// (execRun.goexited) on this goroutine already.
			var v any
			if !reporting && sh.cfg.Run == nil {
				v = ErrGoexit
			}
			sh.retire(l, v)
		}
		sh.taskExited(reporting)
	}()
	if v := sh.callTask(task, key, run); v != nil {
		reporting = true
		sh.report(v)
		reporting = false
	}
	returned = true
	if !sh.leaveTask(seq) {
		sh.retire(l, nil) // never returns
	}
}

// callTask runs the task for runTask, or gives run (handOver's) to the
// executor, and returns the
// value of its panic (or the run call's), or nil if it returned. A nil
// panic reports a *runtime.PanicNilError, which recover returns for it,
// or, where GODEBUG=panicnil=1 makes recover return nil, one made here. A
// Goexit never returns from callTask: runTask sees it.
func (sh *Shard) callTask(task Task, key uint64, run *execRun) (panicked any) {
	returned := false
	defer func() {
		if !returned {
			if panicked = recover(); panicked == nil {
				panicked = new(runtime.PanicNilError)
			}
		}
	}()
	if run != nil {
		sh.cfg.Run(run.do)
	} else if f := task.Func; f != nil {
		f()
	} else {
		sh.cfg.Handlers.Func(task.Handler)(key)
	}
	returned = true
	return nil
}

// reportPanic hands v to the panic handler. A handler that panics itself
// must not kill the shard either: its panic is recovered and dropped, as
// there is nobody left to report it to. A handler's runtime.Goexit cannot
// be stopped: the callers see it (report, goexited).
func reportPanic(onPanic func(any), v any) {
	defer func() { _ = recover() }()
	onPanic(v)
}
