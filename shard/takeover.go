package shard

import (
	"runtime"
	"sync/atomic"
	"time"

	"github.com/shardwheel/shardwheel/internal/stress"
)

// Taking over a wheel whose task blocks.
//
// Tasks run inline on the shard goroutine, which holds the wheel while they
// run: a task that blocks (on a lock, a slow peer, a channel) would stop
// every timer of the wheel, and the keyed timers of every key that other
// shards' wheels hand over through it. So a watchdog, a timer of the
// shard's clock armed when a pass starts its first task and stopped when
// the pass ends, looks every TakeoverAfter at the task the goroutine is in
// (inTask: the task's sequence number, stored as it starts). If it is the
// one it saw the last time, that task has run for TakeoverAfter at least,
// and the watchdog takes the wheel over: with one CAS on inTask, from the
// task's number to takenOver, it becomes the holder of the wheel and of
// everything the shard goroutine owns, records the blocked run (takeover),
// puts back what the interrupted pass had not reached yet (requeueDue, as
// after a task's Goexit), lets go of the wheel, and goes on as the shard
// goroutine itself (run). The goroutine in the task is retired: as the task
// returns (or panics, or calls runtime.Goexit), its CAS on inTask, from the
// task's number to 0, fails, and it finishes its run as an executor's
// goroutine would (retire): it reports a panic, re-files a periodic timer
// by the attention queue, frees the run's slot of the run table, hands the
// run back to the shard goroutine, and ends by runtime.Goexit, its deferred
// calls doing nothing (each checks the life it captured on entry).
//
// The goroutine records the task (cur) and the rest of the list it walks
// before it stores inTask, and the takeover reads them after its CAS, which
// orders it after those writes: what it takes over is the task in progress.
//
// Order. The tasks of one key run one at a time on the shard goroutine, in
// deadline order: while a routed timer's task blocks, its key is held back
// (heldKeys; a series' next run waits for its last anyway). The shard
// goroutine meets the key's later timers due and keeps them pending, in
// the order it meets them, on the key's held list, out of the wheel (Prev
// heldOut). When the blocked run
// comes back (collectReturned), the held timers go to the due-now slot in
// that order, ahead of anything due later. A held timer may be cancelled,
// reset or claimed meanwhile: it is met again then, as any timer in the
// wheel; holders that meet it by the attention queue leave it where it is.
// Timers without a key (AfterFunc) keep no such order and run beside the
// blocked task.
//
// CancelWait. The run table (cancelwait.go) publishes the runs an executor
// holds; a takeover publishes the blocked run there too, before the run
// word leaves runWord, so that waiters see it in flight until it has
// returned. A run the shard goroutine handed to an executor that runs it
// inline (Config.Run) is in the table already, and its execRun finishes it
// as usual.
//
// Bounds. A shard takes over only while the Scheduler's blocked runs are
// fewer than Config.MaxBlocked (Config.Blocked counts them for all its
// shards): goroutines stay within the shards plus MaxBlocked, and the
// watchdogs' short-lived callbacks. Past it the wheel waits for its task,
// as without takeovers, and Config.OnRefused hears of it. A task that
// blocks forever costs one goroutine, not a wheel.

// takenOver is inTask once a takeover has the task's wheel: no task's
// sequence number (those count up from 1 and stay far below it).
const takenOver = 1 << 63

// life is one shard goroutine's: made when it starts (run), captured by its
// frames that defer calls, which do nothing once it is retired. retired is
// stored by the takeover that took the wheel from it; rec is the blocked
// run's record, claimed by the takeover before its CAS (claim), read by
// the retired goroutine after its own CAS failed (and rec.ready closed).
type life struct {
	retired atomic.Bool
	rec     atomic.Pointer[blockedRun]
}

// claim makes rec the record of the takeover that may retire l's
// goroutine, and reports false if another look's record is there: two
// watchdog callbacks may look at one task at once (the pass re-arms the
// watchdog while an earlier callback still runs), and the one whose CAS
// on inTask fails must not replace the record of the one whose CAS
// succeeds, which the retired goroutine waits on (rec.ready). A look that
// claimed it and then lost its CAS (the task returned) gives it back.
func (l *life) claim(rec *blockedRun) bool { return l.rec.CompareAndSwap(nil, rec) }

// blockedRun is a run a takeover took the wheel from. Written by the
// takeover before it lets the wheel go; read by the retired goroutine once
// its task returns (see life), which then pushes it on Shard.returned.
type blockedRun struct {
	run    *execRun // its slot of the run table; nil if an executor's execRun has one
	key    uint64   // the timer's key, held back if keyed
	keyed  bool
	idx    uint32 // the timer's node and generation
	gen    uint64
	series bool          // a periodic timer's run, re-filed when it returns
	gid    uint64        // the retired goroutine's id (IsShardGoroutine)
	since  time.Duration // when its task started, to about a tick
	fn     uintptr       // the task's code, for BlockedTask.Func
	next   *blockedRun   // Shard.returned's link
	// ready is closed by the takeover once it has written the fields
	// above and counted itself in Shard.goroutines: the retired goroutine,
	// whose CAS fails as soon as the takeover's succeeds, waits for it.
	ready chan struct{}
}

// curRun is what the shard goroutine records of the task it runs, before
// it stores inTask. The shard goroutine's.
type curRun struct {
	task   Task
	key    uint64
	keyed  bool
	idx    uint32
	gen    uint64
	series bool
	// rest is the list runList walks, after the node of the timer whose
	// task runs (runList keeps it here as it goes): a takeover puts it
	// back. ran is the tasks runList has run and not recorded in the
	// lateness histogram yet, at tick batch, started from clock reading
	// now on; tick is the deadline tick of the task in progress, which
	// runList counts as it returns: a takeover records them all.
	rest        uint32
	ran         uint64
	batch, tick uint64
	now         time.Duration
}

// enterTask records the task the shard goroutine is about to run (see
// curRun) and stores its number in inTask, arming the watchdog at the
// pass's first task, and returns the number. The shard goroutine.
func (sh *Shard) enterTask(task Task, key uint64, keyed bool, idx uint32, gen uint64, series bool) uint64 {
	sh.cur.task, sh.cur.key, sh.cur.keyed, sh.cur.idx, sh.cur.gen, sh.cur.series = task, key, keyed, idx, gen, series
	sh.runSeq++
	seq := sh.runSeq
	if sh.watchdog != nil && !sh.watching {
		sh.watching = true
		sh.lastSeen.Store(seq)
		sh.watchOn.Store(true)
		sh.watchdog.Reset(sh.cfg.TakeoverAfter)
	}
	// Last: from here a takeover may hold all the shard goroutine owns,
	// and this goroutine touches none of it until leaveTask succeeds.
	sh.inTask.Store(seq)
	return seq
}

// leaveTask ends the task number seq, and reports false if a takeover took
// the wheel from the calling goroutine meanwhile: it must then retire. The
// shard goroutine (or the one a takeover retired).
func (sh *Shard) leaveTask(seq uint64) bool {
	stress.Point()
	return sh.inTask.CompareAndSwap(seq, 0)
}

// stopWatching disarms the watchdog as a pass ends. The shard goroutine.
func (sh *Shard) stopWatching() {
	if sh.watching {
		sh.watching = false
		sh.watchOn.Store(false)
		sh.watchdog.Stop()
	}
}

// watch is the watchdog's callback, on a goroutine of its own: it takes the
// wheel over if the shard goroutine is in the task it saw the last time,
// and else looks again TakeoverAfter later, while the pass wants it.
func (sh *Shard) watch() {
	if !sh.watchOn.Load() || sh.closed.Load() {
		return
	}
	// takenOver is no task: the successor holds the wheel, between tasks,
	// until its first task stores its number.
	seq := sh.inTask.Load()
	if last := sh.lastSeen.Swap(seq); seq == 0 || seq == takenOver || seq != last || !sh.takeover(seq) {
		sh.watchdog.Reset(sh.cfg.TakeoverAfter)
	}
}

// takeover takes the wheel from the shard goroutine, in task number seq,
// and goes on as the shard goroutine (see the top of this file): it
// returns when the shard is closed, and reports true then; false at once
// if the task had returned, or the Scheduler holds MaxBlocked blocked runs
// (OnRefused then hears of it, and the wheel waits).
func (sh *Shard) takeover(seq uint64) bool {
	b := sh.cfg.Blocked
	if b.Add(1) > int64(sh.cfg.MaxBlocked) {
		b.Add(-1)
		sh.refused.Add(1)
		if sh.cfg.OnRefused != nil {
			sh.cfg.OnRefused()
		}
		return false
	}
	rec := &blockedRun{ready: make(chan struct{})}
	old := sh.life.Load()
	if !old.claim(rec) {
		b.Add(-1)
		return false // another look is taking this goroutine's wheel over
	}
	stress.Point()
	if !sh.inTask.CompareAndSwap(seq, takenOver) {
		old.rec.CompareAndSwap(rec, nil) // for the next look
		b.Add(-1)
		return false // the task returned
	}
	stress.Point() // the retired goroutine's task may return here: it waits for ready
	// The wheel, and all the shard goroutine owns, is this goroutine's
	// now: the CAS read what the old one wrote before it stored seq.
	sh.heldBy()
	old.retired.Store(true)
	c := sh.cur
	// Field by field: ready, which the retired goroutine reads at once,
	// is not written again.
	rec.key, rec.keyed, rec.idx, rec.gen, rec.series = c.key, c.keyed, c.idx, c.gen, c.series
	rec.gid, rec.since, rec.fn = sh.gid.Load(), sh.clock.Now()-sh.cfg.TakeoverAfter, sh.taskCode(c.task)
	if word := sh.runWord.Load(); word != runHandedOver {
		// An inline run: published in the run table, where CancelWait
		// finds it until the retired goroutine frees the slot.
		r := sh.takeRun()
		sh.publishRun(r, word)
		r.tab.gs[r.slot].Store(sh.g.Load())
		rec.run = r
		if c.series {
			// Out of the wheel until it comes back by the attention
			// queue, as an executor's run (rearmAsync).
			sh.arena.Node(c.idx).Prev = detached
		}
	}
	sh.runWord.Store(0) // no task in progress: the successor's passes follow
	sh.blocked = append(sh.blocked, rec)
	sh.publishBlocked()
	if rec.keyed {
		sh.holdKey(rec.key)
	}
	sh.h.counts[cTakeovers]++
	if sh.cfg.Stats {
		if c.ran > 0 {
			sh.stats.lateness.RecordN(int64(c.now-sh.tickTime(c.batch)), c.ran)
		}
		sh.stats.lateness.Record(int64(c.now - sh.tickTime(c.tick))) // it started about then
		sh.cur.ran = 0
	}
	sh.watching = false
	sh.watchOn.Store(false) // the successor's first task arms it again
	sh.requeueDue(c.rest)
	sh.goroutines.Add(1) // this goroutine, as the shard goroutine now
	close(rec.ready)
	sh.release()
	sh.run()
	return true
}

// retire finishes the run of a goroutine a takeover retired, whose task
// returned (v: its panic's value, reported already if nil), and ends the
// goroutine: it reports v as an executor's goroutine would (Panics counts
// it by aborts), re-files a periodic timer by the attention queue, frees
// the run's slot of the run table (waking CancelWait's waiters), and hands
// the run back to the shard goroutine (returned), which lets the key's held
// timers go. It touches nothing else of the shard's. The retired goroutine.
func (sh *Shard) retire(l *life, v any) {
	rec := l.rec.Load()
	<-rec.ready // the takeover has recorded the run: a few steps of its, never a task
	if v != nil {
		reportPanic(sh.cfg.OnPanic, v)
		sh.aborts.Add(1)
	}
	if r := rec.run; r != nil {
		if rec.series {
			sh.rearmAsync(rec.idx, rec.gen)
		}
		t, i := r.tab, r.slot
		t.gs[i].Store(0) // before the word, as finish does
		t.words[i].Store(0)
		sh.wakeWaiters()
		r.giveBack()
	}
	sh.cfg.Blocked.Add(-1)
	for {
		head := sh.returned.Load()
		rec.next = head
		if sh.returned.CompareAndSwap(head, rec) {
			break
		}
	}
	sh.signal()
	sh.goroutineEnded()
	runtime.Goexit()
}

// goroutineEnded counts out a goroutine of the shard that returns for
// good, and closes exited with the last. Any of them.
func (sh *Shard) goroutineEnded() {
	if sh.goroutines.Add(-1) == 0 {
		sh.alarm.Stop()
		close(sh.exited)
	}
}
