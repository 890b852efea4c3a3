package shard

import (
	"runtime"
	"time"

	"github.com/shardwheel/shardwheel/pool"
)

// The producer API: any goroutine, including a task running on this shard's
// worker or another's, may call these. None of them waits for a worker.

// Reject says why Schedule refused a timer; package shardwheel turns it
// into an error.
type Reject uint8

// Reject values.
const (
	Accepted  Reject = iota // not a rejection: the timer was accepted
	NoTokens                // the shard's share of the pending limit is used up
	ArenaFull               // the shard holds pool.Capacity timers
	Closed                  // the shard was closed
)

// Schedule files task to run delay from now: at the first tick that starts
// at or after the clock reading it takes plus delay (for delay <= 0, the
// first tick at or after the call); delay beyond MaxDelay is clamped. It
// never blocks. When it rejects the timer (see Reject), it leaves no trace.
func (sh *Shard) Schedule(key uint64, delay time.Duration, task func()) (Ref, Reject) {
	return sh.schedule(key, -1, delay, task, 0, 0)
}

// ScheduleHandler is Schedule for a timer whose task is handler h (a
// number Config.Handlers.Add returned), which the worker calls with key:
// the timer holds no closure. indexed makes it a ScheduleIndexed timer.
func (sh *Shard) ScheduleHandler(key uint64, delay time.Duration, h uint16, indexed bool) (Ref, Reject) {
	var flags state
	if indexed {
		flags = indexedBit
	}
	return sh.schedule(key, -1, delay, nil, h, flags)
}

// ScheduleIndexed is Schedule for a timer that a key index refers to: the
// worker calls Config.Unindex with its key and Ref when it frees the node.
// It never yields the processor (see yieldIfBehind): its caller holds a
// lock of the index that other callers, the worker among them, may want.
func (sh *Shard) ScheduleIndexed(key uint64, delay time.Duration, task func()) (Ref, Reject) {
	return sh.schedule(key, -1, delay, task, 0, indexedBit)
}

// ScheduleAt is Schedule from a reading of the shard's clock the caller
// took already (a clock read is a good part of a Schedule): task runs at
// the first tick that starts at or after now plus delay. now must be a
// non-negative reading taken before the call.
func (sh *Shard) ScheduleAt(key uint64, now, delay time.Duration, task func()) (Ref, Reject) {
	return sh.schedule(key, now, delay, task, 0, 0)
}

// schedule is Schedule from clock reading now (or the clock's reading
// when it takes the node, if now < 0), with the extra state bits flags (0
// or indexedBit), for task, or handler h when task is nil.
func (sh *Shard) schedule(key uint64, now, delay time.Duration, task func(), h uint16, flags state) (Ref, Reject) {
	li, l := sh.myLane()
	if !sh.acquire(l) {
		return 0, NoTokens
	}
	idx, gen, slot, ok := sh.arena.Get(li)
	if !ok {
		sh.giveBack(l)
		return 0, ArenaFull
	}
	n := slot.Node()
	n.Key = key
	slot.SetTask(task, h)
	// Storing the state before the push publishes the fields above to
	// anyone who validates the state first (Drain, the worker after its
	// pop, which the push orders after this store).
	if now < 0 {
		now = sh.clock.Now()
	}
	s := newState(gen, sh.deadlineTick(now, delay)) | flags
	n.State.Store(uint64(s))
	l.queue.Push(idx, n)
	if sh.parked.Load() != 0 {
		sh.unpark()
	}
	// Close may have raced with us: Close stores closed before Drain scans,
	// and we stored the state before loading closed, so either Drain sees
	// our node or we see closed here (all Go atomics are sequentially
	// consistent). Whoever CASes the node first owns its fate; the node
	// stays in the queue, where a worker that is still running frees it.
	if sh.closed.Load() {
		if ok, _ := cancel(n, s, 0); ok {
			l.undone.Add(1)
			sh.release()
			return 0, Closed
		}
	}
	l.scheduled.Add(1)
	if flags&indexedBit == 0 {
		sh.yieldIfBehind(l, now)
	}
	return makeRef(idx, gen), Accepted
}

// takeBack frees node idx (generation gen) of a timer its caller has just
// cancelled while it was new, if it is still the node pushed last on lane
// l's queue (number li): then the worker has not seen it and never will, so
// the node goes straight back to the lane (its spare slot, else its free
// list; see pool.Arena.Put), on this core, and the cancel costs the worker
// nothing. That is the fate of a timeout
// cancelled right after it was scheduled by the same goroutine; any other
// node stays in its queue, where the worker finds it cancelled and frees
// it. Not for an indexed node whose entry may remain: the worker must tell
// its index (see free).
func (sh *Shard) takeBack(li int, l *lane, idx uint32, n *pool.Node, gen uint32) {
	if l.queue.Unpush(idx, n, gen) {
		l.reclaimed.Add(1)
		sh.arena.Put(li, idx)
	}
}

// yieldIfBehind gives up the caller's processor, at most once per tick per
// lane, while the worker has not started a tick that began before now. A
// producer in a tight loop otherwise keeps its P until Go preempts it, up
// to 10ms later, and the worker, whose timer that P must run and which is
// readied on it, waits as long: every timer of the shard runs late. It
// never waits for the worker: runtime.Gosched returns as soon as the
// scheduler has looked at the other runnable goroutines.
func (sh *Shard) yieldIfBehind(l *lane, now time.Duration) {
	t := sh.floorTick(now)
	if t <= sh.dueTick.Load() || l.yielded.Load() == t {
		return
	}
	l.yielded.Store(t)
	runtime.Gosched()
}

// node returns the node of r if r is a plausible reference into this arena.
func (sh *Shard) node(r Ref) (*pool.Node, uint32, bool) {
	idx, gen := r.split()
	n := sh.arena.Find(idx)
	return n, gen, n != nil
}

// load returns the state of the timer r names, and false if the node has
// moved on to another generation. State is loaded before Gen: Gen only
// grows, so if Gen still equals the handle's generation afterwards, the
// state was read within that generation.
func load(n *pool.Node, gen uint32) (state, bool) {
	s := state(n.State.Load())
	return s, n.Gen.Load() == gen && s.tagOK(gen)
}

// Cancel stops the timer r from running and reports whether this call did
// so. It is lock-free and O(1).
func (sh *Shard) Cancel(r Ref) bool { return sh.cancelRef(r, 0) }

// CancelUnindexed is Cancel for a ScheduleIndexed timer whose index entry
// the caller has removed itself: if it cancels the timer, the worker does
// not call Config.Unindex for it.
func (sh *Shard) CancelUnindexed(r Ref) bool { return sh.cancelRef(r, indexedBit) }

// cancelRef is Cancel, clearing the state bits drop in the same CAS.
func (sh *Shard) cancelRef(r Ref, drop state) bool {
	idx, _ := r.split()
	n, gen, ok := sh.node(r)
	if !ok {
		return false
	}
	for {
		s, mine := load(n, gen)
		if !mine || !s.live() {
			return false
		}
		if ok, queue := cancel(n, s, drop); ok {
			li, l := sh.myLane()
			l.cancels.Add(1)
			sh.giveBack(l)
			if queue {
				sh.pushAttention(l, r)
			} else if s.status() == statusNew && (s&indexedBit == 0 || drop&indexedBit != 0) {
				sh.takeBack(li, l, idx, n, gen)
			}
			return true
		}
	}
}

// Reset moves the timer r's deadline to delay from now and reports whether
// it was still pending. A later deadline costs one CAS; an earlier one also
// queues the node for the worker to re-file.
func (sh *Shard) Reset(r Ref, delay time.Duration) bool {
	n, gen, ok := sh.node(r)
	if !ok {
		return false
	}
	t := sh.deadlineTick(sh.clock.Now(), delay)
	for {
		s, mine := load(n, gen)
		if !mine || !s.live() {
			return false
		}
		if ok, queue := reset(n, s, t); ok {
			_, l := sh.myLane()
			l.resets.Add(1)
			if queue {
				sh.pushAttention(l, r)
			}
			return true
		}
	}
}

// Pending reports whether the timer r has neither run nor been cancelled.
func (sh *Shard) Pending(r Ref) bool {
	n, gen, ok := sh.node(r)
	if !ok {
		return false
	}
	s, mine := load(n, gen)
	return mine && s.live()
}

// Deadline returns the clock reading at which the timer r is due (the start
// of its deadline tick), and false if it is no longer pending.
func (sh *Shard) Deadline(r Ref) (time.Duration, bool) {
	n, gen, ok := sh.node(r)
	if !ok {
		return 0, false
	}
	s, mine := load(n, gen)
	if !mine || !s.live() {
		return 0, false
	}
	return sh.due(s, sh.clock.Now()), true
}

// due returns the clock reading at which a live timer in state s is due,
// given a clock reading now within 2^37 ticks of its deadline.
func (sh *Shard) due(s state, now time.Duration) time.Duration {
	return sh.tickTime(unwrapTicks(s.ticks38(), sh.floorTick(now)))
}
