package shard

import (
	"reflect"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/shardwheel/shardwheel/internal/stress"
	"github.com/shardwheel/shardwheel/pool"
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

// heldOut is Node.Prev of a timer held back behind a blocked task of its
// key: out of the wheel, on its key's held list (linked through Next).
const heldOut = detached - 1

// life is one shard goroutine's: made when it starts (run), captured by its
// frames that defer calls, which do nothing once it is retired. retired is
// stored by the takeover that took the wheel from it; rec is the blocked
// run's record, stored before the takeover's CAS, read by the retired
// goroutine after its own CAS failed (and rec.ready closed).
type life struct {
	retired atomic.Bool
	rec     atomic.Pointer[blockedRun]
}

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

// BlockedTask describes a task a takeover left running on a goroutine of
// its own (see the top of this file), for Stats.
type BlockedTask struct {
	// Key is the timer's key, and Keyed whether the key's later timers
	// are held back until it returns.
	Key   uint64
	Keyed bool
	// Func names the task's function, as the runtime knows it
	// (runtime.FuncForPC); empty if unknown.
	Func string
	// Since is the clock reading at which the task started, to about
	// TakeoverAfter; Ran how long it ran, to about a tick, once it has
	// returned (else 0).
	Since time.Duration
	Ran   time.Duration
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
	sh.inTask.Store(seq)
	if sh.watchdog != nil && !sh.watching {
		sh.watching = true
		sh.lastSeen.Store(seq)
		sh.watchOn.Store(true)
		sh.watchdog.Reset(sh.cfg.TakeoverAfter)
	}
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
	old.rec.Store(rec)
	stress.Point()
	if !sh.inTask.CompareAndSwap(seq, takenOver) {
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

// taskCode returns the code pointer of task's function, for the name Stats
// shows.
func (sh *Shard) taskCode(task Task) uintptr {
	if task.Func != nil {
		return reflect.ValueOf(task.Func).Pointer()
	}
	if task.Handler != 0 {
		return reflect.ValueOf(sh.cfg.Handlers.Func(task.Handler)).Pointer()
	}
	return 0
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

// collectReturned lets the keys of the blocked runs that have returned go
// and forgets the runs. The shard goroutine, in its pass.
func (sh *Shard) collectReturned() {
	if sh.returned.Load() == nil {
		return
	}
	now := sh.clock.Now()
	for rec := sh.returned.Swap(nil); rec != nil; rec = rec.next {
		if ran := max(now-rec.since, time.Nanosecond); ran > sh.longest.Ran {
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
	}
	sh.publishBlocked()
}

// blockedView is what publishBlocked publishes: immutable.
type blockedView struct {
	tasks   []BlockedTask
	gids    []uint64
	longest BlockedTask
}

// task describes b for Stats.
func (b *blockedRun) task() BlockedTask {
	name := ""
	if fn := runtime.FuncForPC(b.fn); fn != nil {
		name = fn.Name()
	}
	return BlockedTask{Key: b.key, Keyed: b.keyed, Func: name, Since: b.since}
}

// publishBlocked publishes the blocked runs, for Stats and for
// IsShardGoroutine (a blocked task that calls Stop must not wait for
// itself). The shard goroutine.
func (sh *Shard) publishBlocked() {
	v := &blockedView{tasks: make([]BlockedTask, len(sh.blocked)), gids: make([]uint64, len(sh.blocked)),
		longest: sh.longest}
	for i, b := range sh.blocked {
		v.tasks[i] = b.task()
		v.gids[i] = b.gid
	}
	sh.blockedNow.Store(v)
}

// Blocked returns the tasks takeovers left running, that have not
// returned yet, and the longest of those that have (Ran 0 if none has).
// Any goroutine.
func (sh *Shard) Blocked() (running []BlockedTask, longest BlockedTask) {
	if v := sh.blockedNow.Load(); v != nil {
		return v.tasks, v.longest
	}
	return nil, BlockedTask{}
}

// heldKey is a key held back behind a blocked task of its: the timers met
// due meanwhile, oldest first, linked through Next. The shard goroutine's.
type heldKey struct{ head, tail uint32 }

// holdKey holds key back (see the top of this file). The shard goroutine.
func (sh *Shard) holdKey(key uint64) {
	if sh.heldKeys == nil {
		sh.heldKeys = map[uint64]*heldKey{}
	}
	if sh.heldKeys[key] == nil {
		sh.heldKeys[key] = &heldKey{}
	}
}

// heldFor returns the held list of key if it is held back and the timer in
// state s has a key (routed), else nil: a map lookup only while some key
// is held. The shard goroutine.
func (sh *Shard) heldFor(s state, key uint64) *heldKey {
	if len(sh.heldKeys) == 0 || !s.routed() {
		return nil
	}
	return sh.heldKeys[key]
}

// holdBack keeps node idx (n), a timer of a held key met due and out of
// every slot, pending on the key's held list. The shard goroutine, holding
// the wheel.
func (sh *Shard) holdBack(hk *heldKey, idx uint32, n *pool.Node) {
	n.Prev, n.Next = heldOut, 0
	if hk.tail == 0 {
		hk.head = idx
	} else {
		sh.arena.Node(hk.tail).Next = idx
	}
	hk.tail = idx
}

// releaseKey lets key go: its held timers go to the due-now slot in the
// order they were met, where the next pass meets them first. The shard
// goroutine, holding the wheel.
func (sh *Shard) releaseKey(key uint64) {
	hk := sh.heldKeys[key]
	if hk == nil {
		return
	}
	delete(sh.heldKeys, key)
	for idx := hk.head; idx != 0; {
		n := sh.arena.Node(idx)
		next := n.Next
		n.Prev, n.Next = 0, 0
		sh.h.w.insertDue(idx)
		idx = next
	}
}
