package shard

import (
	"time"

	"github.com/shardwheel/shardwheel/pool"
)

// advance processes every slot due at or before target, then moves elapsed
// to target. now is the clock reading the pass started with. It returns
// false if a task closed the shard.
func (sh *Shard) advance(target uint64, now time.Duration) bool {
	for {
		e, ok := sh.w.next()
		if !ok || e.deadline > target {
			break
		}
		sh.w.setElapsed(e.deadline)
		fired := sh.stats.counts[cFired]
		for idx := sh.w.take(e); idx != 0; {
			n := sh.arena.Node(idx)
			next := sh.w.detach(n)
			if !sh.expire(idx, n) {
				return false
			}
			idx = next
		}
		if ran := sh.stats.counts[cFired] - fired; ran > 0 && sh.cfg.Stats {
			// One sample for the tick's timers: they were all due at
			// its start and the worker reached them at now.
			sh.stats.lateness.RecordN(int64(now-sh.tickTime(e.deadline)), ran)
			now = sh.clock.Now() // tasks took time: later slots start later
		}
	}
	sh.w.setElapsed(target)
	return true
}

// expire handles a node whose slot came due: re-file it if a Reset moved
// its deadline later (or it cascades from a higher level), else fire it.
func (sh *Shard) expire(idx uint32, n *pool.Node) bool {
	for {
		s := state(n.State.Load())
		switch s.status() {
		case statusPending:
			if unwrapTicks(s.ticks38(), sh.w.elapsed) > sh.w.elapsed {
				sh.stats.counts[cRefiled]++
				sh.file(idx, s)
				return true
			}
			fs, ok := fire(n, s)
			if !ok {
				continue // Cancel or Reset won the race
			}
			task := *sh.arena.Task(idx)
			sh.release()
			sh.stats.counts[cFired]++
			sh.releaseNode(idx, n, fs, int(idx))
			sh.runTask(task)
			return !sh.closed.Load()
		case statusCancelled:
			sh.releaseNode(idx, n, s, int(idx))
			return true
		default:
			badNode(idx, s, "unresolved or fired node in the wheel")
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
