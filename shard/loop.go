package shard

import (
	"fmt"
	"runtime"
	"time"

	"github.com/shardwheel/shardwheel/pool"
)

// Everything in this file runs on the worker goroutine only.

func (sh *Shard) run() {
	defer close(sh.exited)
	sh.gid.Store(goid())
	if sh.cfg.Pin != nil {
		// Never unlocked: the thread's CPU mask was changed, and an
		// unlocked thread would go back to the scheduler's pool with it.
		runtime.LockOSThread()
		if err := sh.cfg.Pin(); err != nil && sh.cfg.OnPinError != nil {
			sh.cfg.OnPinError(err)
		}
	}
	timer := sh.clock.NewTimer()
	defer timer.Stop()
	for !sh.closed.Load() {
		if !sh.pass() {
			return
		}
		sh.sleep(timer)
	}
}

// pass does one round of work: attention, transfer, expiry. It returns
// false if a task closed the shard, in which case it abandons the round:
// Drain has claimed every live node, and the wheel is never used again.
func (sh *Shard) pass() bool {
	now := sh.clock.Now()
	target := sh.floorTick(now)
	sh.recordTick(now, target)
	if sh.w.count == 0 && target > 0 {
		// Nothing is filed, so nothing can be skipped: catch elapsed up
		// with the clock before filing, so that deadlines unwrap against
		// a current tick even after the shard was parked for long. One
		// tick short of target, so that a timer already due is filed at
		// target and runs in this pass, as it would have while ticking.
		sh.w.elapsed = max(sh.w.elapsed, target-1)
	}
	sh.processAttention()
	sh.transfer(target)
	ok := sh.advance(target, now)
	for i := range sh.freed {
		sh.arena.PutChain(i, &sh.freed[i])
	}
	sh.stats.counts[cResident] = uint64(sh.w.count)
	sh.stats.publish()
	// Unless sleep plans otherwise, the next tick is the one due next.
	sh.wakeTick, sh.slept = sh.w.elapsed+1, false
	return ok
}

// plan decides when the worker wakes next: at the next tick while work is
// in flight, else at the earliest occupied slot, parked (timed reports
// whether there is such a slot; a shard with no timers parks untimed).
func (sh *Shard) plan() (next uint64, park, timed bool) {
	next = sh.w.elapsed + 1
	busy := sh.ringsBusy() || sh.attention.Load() != 0
	e, any := sh.w.next()
	park = !busy && (!any || e.deadline > next)
	if park && any {
		next = e.deadline
	}
	sh.wakeTick, sh.slept = next, park
	return next, park, !park || any
}

// sleep waits until the planned tick, a producer's signal, or Close. When
// parked it publishes the flag that makes producers wake it.
func (sh *Shard) sleep(timer Timer) {
	next, park, timed := sh.plan()
	if park {
		sh.parked.Store(1)
		// Re-check after publishing parked: a producer that pushed
		// before it could see the flag is visible here, and one that
		// pushes later will see the flag and wake us.
		if sh.ringsBusy() || sh.attention.Load() != 0 {
			sh.parked.Store(0)
			return
		}
	}
	var fire <-chan time.Time
	if timed {
		d := sh.tickTime(next) - sh.clock.Now()
		if d <= 0 {
			sh.parked.Store(0)
			return
		}
		timer.Reset(d)
		fire = timer.C()
	}
	select {
	case <-fire:
	case <-sh.wake:
	case <-sh.done:
	}
	sh.parked.Store(0)
}

func (sh *Shard) ringsBusy() bool {
	for i := range sh.lanes {
		if sh.lanes[i].ring.Len() > 0 {
			return true
		}
	}
	return false
}

func (sh *Shard) ringsLen() int {
	n := 0
	for i := range sh.lanes {
		n += sh.lanes[i].ring.Len()
	}
	return n
}

// processAttention empties the attention stack: cancelled nodes are unlinked
// and freed, nodes whose deadline moved earlier are re-filed.
func (sh *Shard) processAttention() {
	h := sh.attention.Swap(0)
	for h != 0 {
		idx := h - 1
		n := sh.arena.Node(idx)
		// Read the link before clearing queued: once the bit is clear a
		// producer may queue the node again and overwrite Link.
		h = sh.arena.Link(idx).Load()
		s := sh.clearQueued(n)
		switch {
		case n.Prev == 0:
			// Not yet transferred: the ring entry still ahead of us
			// will file or free it.
		case !s.live():
			if n.Prev != detached {
				sh.w.unlink(idx)
			}
			sh.freeEnded(idx, s, int(idx))
		default:
			// Reset to an earlier deadline: re-file it.
			sh.w.unlink(idx)
			sh.stats.counts[cRefiled]++
			sh.file(idx, s)
		}
	}
}

func (sh *Shard) clearQueued(n *pool.Node) state {
	for {
		s := state(n.State.Load())
		ns := s.withQueued(false)
		if n.State.CompareAndSwap(uint64(s), uint64(ns)) {
			return ns
		}
	}
}

// transfer moves new timers from the lanes' rings into the wheel, at most
// TransferCap per tick; the rest wait in the rings for the next tick.
func (sh *Shard) transfer(target uint64) {
	if target != sh.capTick {
		sh.capTick, sh.capUsed = target, 0
	}
	total := 0
	for i := range sh.lanes {
		j := (sh.rr + i) & sh.laneMask
		sh.counts[j] = sh.lanes[j].ring.Published(sh.cfg.TransferCap - sh.capUsed - total)
		total += sh.counts[j]
	}
	if total == 0 {
		return
	}
	sh.rr++
	c := &sh.stats.counts
	c[cRingPeak] = max(c[cRingPeak], uint64(sh.ringsLen()))
	sh.capUsed += total
	c[cConsumed] += uint64(total)
	c[cTransferLast] = uint64(sh.capUsed)
	c[cTransferPeak] = max(c[cTransferPeak], uint64(sh.capUsed))
	if sh.capUsed == sh.cfg.TransferCap {
		c[cCapHits]++
	}
	// Read the clock after counting published entries: every push in
	// this batch happened before now, so now+delay is never early.
	now := sh.clock.Now()
	for j, n := range sh.counts {
		r := sh.lanes[j].ring
		for range n {
			v, _ := r.TryPop()
			sh.accept(uint32(v), now, j)
		}
	}
}

// accept files a node popped from lane's ring, resolving its deadline from
// now if it has none yet.
func (sh *Shard) accept(idx uint32, now time.Duration, lane int) {
	n := sh.arena.Node(idx)
	for {
		s := state(n.State.Load())
		switch s.status() {
		case statusUnresolved:
			ns := s.withTicks(statusPending, sh.resolve(s, now)).withQueued(false)
			if !n.State.CompareAndSwap(uint64(s), uint64(ns)) {
				continue // cancelled or reset meanwhile
			}
			sh.file(idx, ns)
		case statusPending:
			sh.file(idx, s) // a Reset resolved it already
		case statusCancelled:
			// Back to the lane it came from: the producer there
			// will likely want a node again soon.
			sh.releaseNode(idx, n, s, lane)
		default:
			badNode(idx, s)
		}
		return
	}
}

// fileFromTask files a new timer scheduled by a task running on this
// worker whose lane is full: the worker cannot wait for itself to drain
// the ring. It resolves the deadline from a clock reading taken now, after
// the Schedule call, so it cannot be early; the transfer cap does not apply
// (the worker is doing the work itself). advance may be iterating a taken
// slot: filing never lands in it (see wheel.take).
func (sh *Shard) fileFromTask(idx uint32, s state) {
	ns := s.withTicks(statusPending, sh.resolve(s, sh.clock.Now())).withQueued(false)
	if sh.arena.Node(idx).State.CompareAndSwap(uint64(s), uint64(ns)) {
		sh.file(idx, ns)
		return
	}
	// Cancelled or reset by another goroutine since Schedule stored s:
	// accept handles every such state.
	sh.accept(idx, sh.clock.Now(), int(idx))
}

// file inserts a pending node at its deadline, or at the next tick if that
// has passed (delay <= 0, or a Reset that is already due).
func (sh *Shard) file(idx uint32, s state) {
	t := max(unwrapTicks(s.ticks38(), sh.w.elapsed), sh.w.elapsed+1)
	sh.w.insert(idx, t)
}

// advance processes every slot due at or before target, then moves elapsed
// to target. now is the clock reading the pass started with. It returns
// false if a task closed the shard.
func (sh *Shard) advance(target uint64, now time.Duration) bool {
	for {
		e, ok := sh.w.next()
		if !ok || e.deadline > target {
			break
		}
		sh.w.elapsed = e.deadline
		fired := sh.stats.counts[cFired]
		first, end := sh.w.take(e)
		for idx := first; idx != end; {
			n := sh.arena.Node(idx)
			next := n.Next
			sh.w.detach(n)
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
	sh.w.elapsed = max(sh.w.elapsed, target)
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
			fs := s.to(statusFired)
			if !n.State.CompareAndSwap(uint64(s), uint64(fs)) {
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
			badNode(idx, s)
		}
	}
}

// releaseNode finishes with a terminal node that is no longer linked: free
// it to lane's free list, unless it is still on the attention stack, whose
// processing frees it. A terminal state never changes again, so s.queued()
// cannot become true after this check.
func (sh *Shard) releaseNode(idx uint32, n *pool.Node, s state, lane int) {
	if s.queued() {
		n.Prev = detached
		return
	}
	sh.freeEnded(idx, s, lane)
}

// freeEnded frees a node whose timer ended in state s, counting
// cancellations (a node is freed once, so each is counted once).
func (sh *Shard) freeEnded(idx uint32, s state, lane int) {
	if s.status() == statusCancelled {
		sh.stats.counts[cCancelled]++
	}
	sh.free(idx, lane)
}

// free returns a node to the pool at the end of the pass, on lane (modulo
// the lane count). Nodes whose lane is unknown pass their index, which
// spreads them over the lanes.
func (sh *Shard) free(idx uint32, lane int) {
	// The next life must start "not yet transferred" (Prev == 0), whatever
	// this one ended as (detached, for one). Most nodes end that way
	// already: skipping the write keeps their cache line clean, so the
	// producer that reuses the node does not have to fetch it back.
	if n := sh.arena.Node(idx); n.Prev != 0 {
		n.Next, n.Prev = 0, 0
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
			sh.cfg.OnPanic(v)
		}
	}()
	if sh.cfg.Run != nil {
		sh.cfg.Run(task)
		return
	}
	task()
}

// badNode reports a node in a state the worker can never legally see: the
// state machine is corrupt and continuing would lose or duplicate timers.
func badNode(idx uint32, s state) {
	panic(fmt.Sprintf("shardwheel: corrupt timer node %d in status %d", idx, s.status()))
}
