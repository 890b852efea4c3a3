package shard

import (
	"math"
	"time"

	"github.com/shardwheel/shardwheel/pool"
)

// advance processes every tick up to target: it runs the level-0 slots
// that come due and, before elapsed passes a higher slot's cascade
// deadline, moves what is left of that slot down (normally nothing:
// cascadeAhead has moved it in shares). now is the clock reading the pass
// started with. It returns false if a task closed the shard.
func (sh *Shard) advance(target uint64, now time.Duration) bool {
	w := sh.w
	now, ok := sh.runDue(now)
	if !ok {
		return false
	}
	for {
		due, okDue := w.nextDue()
		c, okC := w.nextCascade()
		if okC && c.deadline <= target && (!okDue || c.deadline < due) {
			w.setElapsed(c.deadline)
			sh.cascade(c.level, c.num, math.MaxInt) // all of it: filed may be short after a wrap
			continue
		}
		if !okDue || due > target {
			break
		}
		w.setElapsed(due)
		var ok bool
		if now, ok = sh.runSlot(due, now); !ok {
			return false
		}
	}
	w.setElapsed(target)
	return true
}

// runDue runs the timers file found due already (see insertDue), if any.
func (sh *Shard) runDue(now time.Duration) (time.Duration, bool) {
	if !sh.w.dueNow() {
		return now, true
	}
	return sh.runSlot(sh.w.elapsed, now)
}

// lateSample is how many tasks of one tick share a lateness sample: the
// clock is read again after that many, so that a tick with many tasks does
// not report its last ones as on time.
const lateSample = 64

// runSlot expires the nodes of level-0 slot number due (the tick elapsed
// just reached, or elapsed itself for the timers insertDue filed) and
// returns the clock reading after their tasks. now is a reading taken
// before it started. Lateness is measured from each task's own deadline
// tick, one sample for a run of up to lateSample tasks of the same tick.
func (sh *Shard) runSlot(due uint64, now time.Duration) (time.Duration, bool) {
	var tick, ran uint64
	record := func() {
		if ran > 0 && sh.cfg.Stats {
			sh.stats.lateness.RecordN(int64(now-sh.tickTime(tick)), ran)
			now = sh.clock.Now() // tasks took time: later ones start later
		}
		ran = 0
	}
	for idx := sh.w.take(due); idx != 0; {
		n := sh.arena.Node(idx)
		next := sh.w.detach(n)
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
	return now, true
}

// cascadeAhead moves down a share of each higher-level slot whose window
// is open, after advance has brought elapsed to the pass's target: in
// proportion to the ticks since the last pass that paced (within the
// window) out of those left before the slot's cascade deadline, and at
// least cascadeChunk nodes, so that a small slot moves in one go and the
// worker need not tick for it. Passes again within the same tick move
// nothing more.
func (sh *Shard) cascadeAhead() {
	w := sh.w
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
// where their deadlines now fit.
func (sh *Shard) cascade(l int, num uint64, limit int) {
	si := sh.w.slotIndex(l, num)
	moved := 0
	for ; moved < limit; moved++ {
		idx := sh.w.popHead(si)
		if idx == 0 {
			break
		}
		n := sh.arena.Node(idx)
		s := state(n.State.Load())
		switch s.status() {
		case statusPending:
			// Not file: a Reset may have made it due already, and
			// advance may be past its due-now slot. Its attention
			// entry re-files it at the next pass, if it is not run
			// at the next tick first.
			sh.w.insert(idx, max(unwrapTicks(s.ticks38(), sh.w.elapsed), sh.w.elapsed+1))
		case statusCancelled:
			sh.releaseNode(idx, n, s, int(idx))
		default:
			badNode(idx, s, "new or fired node in the wheel")
		}
	}
	sh.stats.counts[cRefiled] += uint64(moved)
	sh.work.refiled += moved
}

// expire handles a node whose level-0 slot came due: re-file it if a Reset
// moved its deadline later, else fire it. It reports whether it ran the
// task and its deadline tick, and false for ok if a task closed the shard.
func (sh *Shard) expire(idx uint32, n *pool.Node) (tick uint64, fired, ok bool) {
	for {
		s := state(n.State.Load())
		switch s.status() {
		case statusPending:
			tick = unwrapTicks(s.ticks38(), sh.w.elapsed)
			if tick > sh.w.elapsed {
				sh.stats.counts[cRefiled]++
				sh.work.refiled++
				sh.file(idx, s)
				return 0, false, true
			}
			fs, ok := fire(n, s)
			if !ok {
				continue // Cancel or Reset won the race
			}
			task, h := sh.arena.Task(idx)
			key := n.Key
			sh.release()
			sh.stats.counts[cFired]++
			sh.work.fired++
			sh.releaseNode(idx, n, fs, int(idx))
			sh.runTask(task, h, key)
			return tick, true, !sh.closed.Load()
		case statusCancelled:
			sh.releaseNode(idx, n, s, int(idx))
			return 0, false, true
		default:
			badNode(idx, s, "new or fired node in the wheel")
		}
	}
}

// releaseNode finishes with a terminal node that is no longer linked: free
// it, unless it is still on the attention stack, whose processing frees it.
// A terminal state never changes again, so s.queued() cannot become true
// after this check.
func (sh *Shard) releaseNode(idx uint32, n *pool.Node, s state, lane int) {
	if s.queued() {
		n.Prev = detached
		return
	}
	sh.free(idx, lane)
}

// free returns a node to the pool at the end of the pass, on lane (modulo
// the lane count). Where no lane is known, callers pass the node's index,
// which spreads freed nodes over the lanes.
func (sh *Shard) free(idx uint32, lane int) {
	// The next life must start "not in the wheel" (Prev == 0), whatever
	// this one ended as (detached, for one). Most nodes end that way
	// already: skipping the write keeps their cache line clean, so the
	// producer that reuses the node does not have to fetch it back.
	n := sh.arena.Node(idx)
	if n.Prev != 0 {
		n.Next, n.Prev = 0, 0
	}
	// An indexed timer has ended, however it ended: tell its index while
	// Key and Gen still describe it (Get reuses the node only after Add).
	if state(n.State.Load())&indexedBit != 0 && sh.cfg.Unindex != nil {
		sh.cfg.Unindex(n.Key, makeRef(idx, n.Gen.Load()))
	}
	sh.arena.Add(&sh.freed[lane&sh.laneMask], idx)
}

// runTask runs a timer's task, or when task is nil, handler h with key.
func (sh *Shard) runTask(task func(), h uint16, key uint64) {
	// Registered first, so it runs last: the panic handler below still
	// counts as part of the task. See Quiet for the handshake with closed.
	sh.inTask.Store(true)
	defer sh.inTask.Store(false)
	if sh.closed.Load() && !sh.quieted {
		sh.quieted = true
		close(sh.quiet)
	}
	sh.stats.tasks++
	if sh.cfg.Stats && sh.stats.tasks%taskSampleEvery == 0 {
		start := sh.clock.Now()
		defer func() { sh.stats.taskTime.Record(int64(sh.clock.Now() - start)) }()
	}
	defer func() {
		if v := recover(); v != nil {
			sh.stats.counts[cPanics]++
			reportPanic(sh.cfg.OnPanic, v)
		}
	}()
	if task == nil {
		fn := sh.cfg.Handlers.Func(h)
		if sh.cfg.Run == nil {
			fn(key)
			return
		}
		task = func() { fn(key) } // an executor takes a func(): one allocation
	}
	if sh.cfg.Run != nil {
		sh.cfg.Run(task)
		return
	}
	task()
}

// reportPanic hands v to the panic handler. A handler that panics itself
// must not kill the shard either: its panic is recovered and dropped, as
// there is nobody left to report it to.
func reportPanic(onPanic func(any), v any) {
	defer func() { _ = recover() }()
	onPanic(v)
}
