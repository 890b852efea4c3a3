package shard

import (
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
	for {
		due, okDue := w.nextDue()
		c, okC := w.nextCascade()
		if okC && c.deadline <= target && (!okDue || c.deadline < due) {
			w.setElapsed(c.deadline)
			sh.cascade(c.level, c.num, int(w.slots[w.slotIndex(c.level, c.num)].filed))
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

// lateSample is how many tasks of one tick share a lateness sample: the
// clock is read again after that many, so that a tick with many tasks does
// not report its last ones as on time.
const lateSample = 64

// runSlot expires the nodes of level-0 slot number due (the tick elapsed
// just reached) and returns the clock reading after their tasks. now is a
// reading taken before it started.
func (sh *Shard) runSlot(due uint64, now time.Duration) (time.Duration, bool) {
	start, ran := sh.tickTime(due), uint64(0)
	for idx := sh.w.take(due); idx != 0; {
		n := sh.arena.Node(idx)
		next := sh.w.detach(n)
		fired, ok := sh.expire(idx, n)
		if !ok {
			return now, false
		}
		if fired {
			if ran++; ran == lateSample && sh.cfg.Stats {
				sh.stats.lateness.RecordN(int64(now-start), ran)
				now, ran = sh.clock.Now(), 0
			}
		}
		idx = next
	}
	if ran > 0 && sh.cfg.Stats {
		sh.stats.lateness.RecordN(int64(now-start), ran)
		now = sh.clock.Now() // tasks took time: later slots start later
	}
	return now, true
}

// cascadeAhead moves down, before target is processed, a share of each
// higher-level slot whose window is open: in proportion to the ticks this
// pass covers out of those left before the slot's deadline, and at least
// cascadeChunk nodes, so that a small slot moves in one go and the worker
// need not tick for it. A slot whose deadline this pass reaches is left to
// advance, which moves it at that deadline. It returns the nodes moved.
func (sh *Shard) cascadeAhead(target uint64) int {
	w := sh.w
	moved := 0
	if target <= w.elapsed || w.count == 0 {
		return 0 // no new tick: the share was moved already
	}
	for l := w.levels - 1; l >= 1; l-- {
		num := w.num(l, w.elapsed) + 1
		sl := &w.slots[w.slotIndex(l, num)]
		d := w.cascadeDeadline(l, num)
		if sl.head == 0 || d <= target {
			continue
		}
		filed := uint64(sl.filed)
		share := (filed*(target-w.elapsed) + d - w.elapsed - 1) / (d - w.elapsed)
		share = max(share, min(filed, cascadeChunk))
		moved += sh.cascade(l, num, int(share))
	}
	return moved
}

// cascadeChunk is the least cascadeAhead moves of a slot in a pass: a few
// tens of microseconds of work.
const cascadeChunk = 1024

// cascade moves up to limit nodes of level l's slot num down the wheel,
// where their deadlines now fit, and returns how many it moved.
func (sh *Shard) cascade(l int, num uint64, limit int) int {
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
			sh.file(idx, s)
		case statusCancelled:
			sh.releaseNode(idx, n, s, int(idx))
		default:
			badNode(idx, s, "new or fired node in the wheel")
		}
	}
	sh.stats.counts[cRefiled] += uint64(moved)
	sh.work.refiled += moved
	return moved
}

// expire handles a node whose level-0 slot came due: re-file it if a Reset
// moved its deadline later, else fire it. It reports whether it ran the
// task, and false for ok if a task closed the shard.
func (sh *Shard) expire(idx uint32, n *pool.Node) (fired, ok bool) {
	for {
		s := state(n.State.Load())
		switch s.status() {
		case statusPending:
			if unwrapTicks(s.ticks38(), sh.w.elapsed) > sh.w.elapsed {
				sh.stats.counts[cRefiled]++
				sh.work.refiled++
				sh.file(idx, s)
				return false, true
			}
			fs, ok := fire(n, s)
			if !ok {
				continue // Cancel or Reset won the race
			}
			task := *sh.arena.Task(idx)
			sh.release()
			sh.stats.counts[cFired]++
			sh.work.fired++
			sh.releaseNode(idx, n, fs, int(idx))
			sh.runTask(task)
			return true, !sh.closed.Load()
		case statusCancelled:
			sh.releaseNode(idx, n, s, int(idx))
			return false, true
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

func (sh *Shard) runTask(task func()) {
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
