package shard

import (
	"cmp"
	"reflect"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/shardwheel/shardwheel/internal/stress"
	"github.com/shardwheel/shardwheel/pool"
)

// Runners left behind a blocked task (see runner.go), and what Stats shows
// of them.
//
// Blocked runners are noticed by the shard goroutine, in its pass: it
// looks at the current runner's word while runs wait behind its task; if
// the word is the same as at a look at least BlockedAfter earlier, the
// task has run that long (or waited that long for a CPU: nothing tells the
// two apart) and the runner is left behind it, if fewer than
// Config.MaxBlocked runners are (Config.Blocked counts them for all the
// shards of a Scheduler); else OnRefused hears of it and the runs wait.
// plan wakes the goroutine for the next look while runs wait.

// blockedRun is the record of a runner left behind its task: written by the
// shard goroutine before the CAS that leaves the runner, and read by
// anyone after (Stats, through blockedView); ran (how long the task ran
// from since) and then done are stored by the runner when the task has
// returned.
type blockedRun struct {
	key   uint64
	keyed bool
	fn    uintptr       // the task's code, for BlockedTask.Func
	gid   uint64        // the runner's goroutine id (IsShardGoroutine)
	since time.Duration // a clock reading at which the task was running already
	ran   atomic.Int64
	done  atomic.Bool
}

// BlockedTask describes a task that ran past Config.BlockedAfter, whose
// runner the shard left behind it (see runner.go), for Stats.
type BlockedTask struct {
	// Key is the timer's key, and Keyed whether the key's later timers
	// are held back until it returns.
	Key   uint64
	Keyed bool
	// Func names the task's function, as the runtime knows it
	// (runtime.FuncForPC); empty if unknown.
	Func string
	// Since is a clock reading at which the task was running already,
	// at most BlockedAfter and a tick after it started; Ran how long it
	// ran from then, to about a tick, once it has returned (else 0).
	Since time.Duration
	Ran   time.Duration
}

// taskCode returns the code pointer of task's function, for Stats' name.
func (sh *Shard) taskCode(task Task) uintptr {
	if task.Func != nil {
		return reflect.ValueOf(task.Func).Pointer()
	}
	if task.Handler != 0 {
		return reflect.ValueOf(sh.cfg.Handlers.Func(task.Handler)).Pointer()
	}
	return 0
}

// blockedView is what publishBlocked publishes: immutable but records' done.
type blockedView struct {
	runs    []*blockedRun
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

// publishBlocked publishes the runners left behind, for Stats and for
// IsShardGoroutine (a blocked task that calls Stop must not wait for
// itself). The shard goroutine.
func (sh *Shard) publishBlocked() {
	sh.blockedNow.Store(&blockedView{runs: slices.Clone(sh.blocked), longest: sh.longest})
}

// Blocked returns the tasks that ran past BlockedAfter and have not
// returned, and the longest of those that have (Ran 0 if none has). Any
// goroutine.
func (sh *Shard) Blocked() (running []BlockedTask, longest BlockedTask) {
	v := sh.blockedNow.Load()
	if v == nil {
		return nil, BlockedTask{}
	}
	longest = v.longest
	for _, b := range v.runs {
		if !b.done.Load() {
			running = append(running, b.task())
		} else if ran := time.Duration(b.ran.Load()); ran > longest.Ran {
			longest = b.task() // returned, and not yet collected
			longest.Ran = ran
		}
	}
	return running, longest
}

// watchRunner leaves the current runner behind a task that has held up the
// runs behind it for BlockedAfter (see above). The shard goroutine, in its pass.
func (sh *Shard) watchRunner(now time.Duration) {
	sh.assertGoroutine()
	r := sh.runner
	if r == nil || sh.cfg.BlockedAfter <= 0 {
		return
	}
	w := r.word.Load()
	if w&(runIdle|runWoken) != 0 || w>>runShift == 0 || w>>runShift == r.handed {
		// Parked, woken or not started (no task holds the runs up), or
		// nothing waits behind its task: not timed, but looked at again
		// (runnerWake) while runs wait, as a task it starts may block.
		r.looked, r.lookAt = false, now
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
// runner next, if runs handed to it wait (behind its task, or for its
// goroutine to start). The shard goroutine.
func (sh *Shard) runnerWake() (uint64, bool) {
	r := sh.runner
	if r == nil || sh.cfg.BlockedAfter <= 0 || r.word.Load()>>runShift >= r.handed {
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
		r.rec, r.looked, r.handed, r.fresh = nil, false, 0, false
		r.tail.Store(0)
		r.word.Store(0)
		r.next, sh.spare = sh.spare, r
		r = next
	}
	sh.publishBlocked()
}

// runKept runs, in order, the runs the shard goroutine left with r behind
// its blocked task, once that task has returned (see the top of this
// file). The runner's goroutine.
func (r *runner) runKept() {
	if !r.rec.done.Load() { // else a kept run's Goexit restarted the goroutine
		r.rec.ran.Store(int64(max(r.sh.clock.Now()-r.rec.since, time.Nanosecond)))
		r.rec.done.Store(true)
	}
	for r.keptAt < len(r.kept) {
		x := r.kept[r.keptAt]
		r.kept[r.keptAt] = nil
		r.keptAt++ // first: a Goexit in x goes on from the next
		r.run(x)
	}
	r.kept, r.keptAt = r.kept[:0], 0
}

// giveBack ends a runner left behind, once its kept runs are done: it
// hands it back to the shard goroutine (returned), which lets the blocked
// key's held timers go and keeps the runner as a spare. The runner's
// goroutine, its last steps.
func (r *runner) giveBack() {
	sh := r.sh
	r.token.Store(0) // before the push: the runtime may give this goroutine's g to another
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

// Keys held back behind a blocked task (see runner.go): while a routed
// timer's task blocks, the shard goroutine keeps the key's later due
// timers pending, out of the wheel, and puts them in the due-now slot, in
// deadline order, when the task and the key's runs kept behind it have
// returned. Held timers stay pending: a Cancel or Reset of one works as
// in the wheel, and Stop claims them.

// heldOut is Node.Prev of a timer held back behind a blocked task of its
// key: out of the wheel, on its key's held list (linked through Next).
const heldOut = detached - 1

// heldKey is a key held back behind a blocked task of its: the timers met
// due meanwhile, oldest first, linked through Next. The shard goroutine's.
type heldKey struct{ head, tail uint32 }

// holdKey holds key back. The shard goroutine.
func (sh *Shard) holdKey(key uint64) {
	sh.assertGoroutine()
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
	sh.assertHolder()
	n.Prev, n.Next = heldOut, 0
	if hk.tail == 0 {
		hk.head = idx
	} else {
		sh.arena.Node(hk.tail).Next = idx
	}
	hk.tail = idx
}

// releaseKey lets key go: its held timers go to the head of the due-now
// slot in deadline order (a Reset may have moved one since it was met;
// equal deadlines keep the order they were met in), ahead of the key's
// timers a full backlog may have left there, which are due later: the
// next pass meets them first. The shard goroutine, holding the wheel.
func (sh *Shard) releaseKey(key uint64) {
	sh.assertGoroutine()
	sh.assertHolder()
	hk := sh.heldKeys[key]
	if hk == nil {
		return
	}
	delete(sh.heldKeys, key)
	w := sh.h.w
	type heldTimer struct {
		idx  uint32
		tick uint64 // read once: a Reset may move it meanwhile
	}
	var held []heldTimer
	for idx := hk.head; idx != 0; {
		n := sh.arena.Node(idx)
		held = append(held, heldTimer{idx, unwrapTicks(state(n.State.Load()).ticks38(), w.elapsed)})
		idx = n.Next
	}
	slices.SortStableFunc(held, func(a, b heldTimer) int { return cmp.Compare(a.tick, b.tick) })
	for i := len(held) - 1; i >= 0; i-- { // last first: each goes ahead of the one before
		n := sh.arena.Node(held[i].idx)
		n.Prev, n.Next = 0, 0
		w.insertDueFirst(held[i].idx)
	}
}
