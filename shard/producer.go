package shard

import (
	"runtime"
	"time"

	"github.com/shardwheel/shardwheel/internal/stress"
	"github.com/shardwheel/shardwheel/pool"
)

// The producer API: any goroutine, including a task running on this shard's
// goroutine or another's, may call these. None of them waits for another
// goroutine.

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

// Task is what a timer runs: a closure, or a handler number (see Handlers).
type Task = pool.Task

// Request is one timer to schedule.
type Request struct {
	// Key is passed to a handler task; for an indexed timer it is the
	// key Config.Unindex hears of.
	Key uint64
	// Now is a reading of the shard's clock (Shard.Now) taken before the
	// call, and Delay the time after it the timer is due: at the first
	// tick that starts at or after Now+Delay. Delay is clamped to [0,
	// MaxDelay].
	Now, Delay time.Duration
	Task       Task
	// Indexed makes Config.Unindex hear of the timer's end. An indexed
	// Schedule never yields the processor (see yieldIfBehind): its caller
	// holds a lock of the index that others, the shard goroutine among
	// them, may want.
	Indexed bool
	// Period, when positive, makes the timer periodic (periodic.go): it
	// runs at the grid points Now + k*Period, k >= 1 (Delay is ignored;
	// a Period beyond MaxDelay is clamped), and Missed (SkipMissed,
	// BurstMissed or DelayMissed) says what it does with the points it
	// misses. Schedule then takes the node's series record (pool.Series).
	Period time.Duration
	Missed uint8
	// Plan, when non-nil, makes the timer a series on a plan of the
	// caller's (periodic.go): its first run is due Delay after Now, and
	// each next one at the point its run's task leaves in Plan. Period,
	// Missed, Slack and Routed do not apply. Schedule takes the node's
	// series record.
	Plan *pool.Plan
	// Routed makes the timer run on the shard Config.Group routes Key to
	// (cross.go), though it is filed here. Not with Period.
	Routed bool
	// Slack, when positive, lets the timer run up to Slack after its
	// deadline, at a tick the wheel chooses (slack.go). Not with Period.
	Slack time.Duration
}

// Schedule files the timer r describes and returns its Ref. It never
// blocks. When it rejects the timer (see Reject), it leaves no trace. r is
// only read.
func (sh *Shard) Schedule(r *Request) (Ref, Reject) {
	var t uint64
	switch {
	case r.Period > 0:
		t = sh.ceilTick(r.Now + sh.clampDelay(r.Period)) // a longer period overflows the grid's arithmetic
	case r.Slack > 0:
		t = sh.slackTick(r.Now, r.Delay, r.Slack)
	default: // a plan's first point too
		t = sh.deadlineTick(r.Now, r.Delay)
	}
	now := sh.floorTick(r.Now)
	stress.Point()
	p := procPin()
	l := &sh.lanes[p&sh.laneMask]
	if sh.cfg.Limited && !sh.acquire(l) {
		procUnpin()
		return Ref{}, NoTokens
	}
	var ref Ref
	var ok bool
	local := sh.isLocal(p)
	if local && sh.tryHoldAt(now) {
		ref, ok = sh.scheduleHeld(r, t)
		sh.release()
	} else {
		ref, ok = sh.scheduleQueued(p, l, r, t, now, local)
	}
	procUnpin()
	if !ok {
		if sh.cfg.Limited {
			sh.giveBack(l)
		}
		return Ref{}, ArenaFull
	}
	// Close may have raced with us: Close stores closed before Drain
	// scans, and we stored the state before loading closed, so either
	// Drain sees our node or we see closed here. Whoever CASes the node
	// first owns its fate; the node stays where it is, and nobody frees
	// it once the shard is closed.
	stress.Point()
	if sh.closed.Load() && sh.undo(ref, l) {
		return Ref{}, Closed
	}
	if !r.Indexed {
		sh.yieldIfBehind(l, now)
	}
	return ref, Accepted
}

// isLocal reports whether P p's own shard is this one (see LocalShard).
func (sh *Shard) isLocal(p int) bool { return LocalShard(p, sh.of) == sh.id }

// flagsOf returns the state flags of the timer r describes.
func flagsOf(r *Request) state {
	var f state
	if r.Indexed {
		f = indexedBit
	}
	if r.Routed && r.Period <= 0 && r.Plan == nil {
		f |= routedBit
	}
	return f
}

// startTimer starts the life of the timer r describes on the node slot, which
// its caller has taken: it writes the timer on the node,
// publishes it with the state store (status, deadline tick t and r's
// flags) and, for a periodic timer, gives it its record. It returns the node, its
// generation and its flags. The producer that took the node, before it
// files it or pushes it.
func (sh *Shard) startTimer(slot pool.Slot, r *Request, status, t uint64) (*pool.Node, uint64, state) {
	n := slot.Node()
	n.Key = r.Key
	slot.SetTask(r.Task)
	if r.Slack > 0 && r.Period <= 0 && r.Plan == nil {
		slot.SetFlags(pool.FlagSlack)
	}
	// The state store publishes the fields above to whoever validates the
	// state first (Drain, the holder that files or meets the node).
	fl := flagsOf(r)
	gen := startLife(n, status, t, fl)
	if r.Period > 0 || r.Plan != nil {
		sh.startSeries(slot, r, gen) // before the node is filed or pushed: its holder reads it
	}
	return n, gen, fl
}

// scheduleHeld starts the timer's life on a node of the holder's and files
// it. Holder, pinned.
func (sh *Shard) scheduleHeld(r *Request, t uint64) (Ref, bool) {
	sh.assertHolder()
	idx, slot, ok := sh.takeFree()
	if !ok {
		if idx, slot, ok = sh.arena.Get(sh.home); !ok {
			if idx, slot, ok = sh.reclaim(); !ok {
				return Ref{}, false
			}
		}
	}
	n, gen, fl := sh.startTimer(slot, r, statusPending, t)
	sh.catchUp()
	if fl.routed() && t < sh.h.w.elapsed+sh.h.w.size { // near: it may cross now
		sh.fileOrCross(idx, n, makeState(gen, statusPending, t)|fl, t)
	} else {
		sh.file(idx, n, t)
	}
	sh.h.lastFiled = idx
	sh.countFiled()
	sh.wakeFor(t)
	sh.paceSweep(1)
	return sh.ref(idx, gen), true
}

// countFiled counts a timer filed at once. Holder only.
func (sh *Shard) countFiled() {
	sh.assertHolder()
	sh.h.counts[cScheduled]++
	if c := sh.h.counts[cScheduled]; c&publishEvery == 0 {
		sh.wrote(lineGoroutine)
		// own carries the low bits (see scheduledNow): keep the
		// published count within reach of them.
		sh.stats.published[cScheduled].Store(c)
	}
}

// scheduleQueued starts the timer's life on a node from the arena's lane
// p and pushes it on the queue, for whoever holds the wheel to file. From
// the shard's own P it then tries to take the wheel itself (handshake step
// 1, own.go). From another P it does not: the shard's own P takes the
// queue in when its next Schedule lets go of the wheel, and its goroutine
// at its next pass, which wakeFor makes come no later than the timer's
// tick. now is the clock's tick. Pinned.
func (sh *Shard) scheduleQueued(p int, l *lane, r *Request, t, now uint64, local bool) (Ref, bool) {
	idx, slot, ok := sh.takeShared(p, l)
	if !ok {
		return Ref{}, false
	}
	_, gen, _ := sh.startTimer(slot, r, statusNew, t)
	stress.Point()
	sh.wrote(lineQueue)
	sh.queue.Push(idx, slot.Link())
	l.queued.Add(1)
	stress.Point()
	switch {
	case !local:
		sh.wakeFor(t)
	case sh.tryHoldAt(now):
		sh.takeIn(takeInBudget)
		sh.release()
	}
	return sh.ref(idx, gen), true
}

// takeShared takes a node from the arena's shared lists for a producer on
// P p (lane l) that does not hold the wheel, and counts it in the lane's
// demand, so that holders give the lane as many back (share). If p's lane
// had none left, or every shareMin-th take, it marks the shard starved and
// wakes the shard goroutine to be that holder: else producers on this P
// would take other lanes' nodes, or grow the arena, while the goroutine
// sleeps. Pinned.
func (sh *Shard) takeShared(p int, l *lane) (uint32, pool.Slot, bool) {
	idx, slot, own, ok := sh.arena.GetOwn(p)
	if ok {
		// Every shareMin-th take asks for a feed too, so that a lane in
		// steady use is fed before it runs dry.
		if d := l.demand.Add(1); (!own || d%shareMin == 0) && !sh.starved.Load() {
			sh.wrote(lineStarved)
			sh.starved.Store(true)
			sh.signal()
		}
	}
	return idx, slot, ok
}

// undo cancels a timer whose Schedule raced with Close, if Stop has not
// claimed it first, and reports whether it did.
func (sh *Shard) undo(r Ref, l *lane) bool {
	n := sh.arena.Node(r.idx)
	for {
		s, mine := load(n, r.gen)
		if !mine || !s.live() {
			return false // Stop claimed it: it is Stop's now
		}
		if cs, ok, _ := cancel(n, s, indexedBit); ok {
			// A handed timer's proxy is left for its shard to meet:
			// the Scheduler is stopping.
			sh.arena.Slot(r.idx).DropFunc()
			endCancel(n, cs)
			l.undone.Add(1)
			if sh.cfg.Limited {
				sh.giveBack(l)
			}
			return true
		}
	}
}

// yieldIfBehind gives up the caller's processor, at most once per tick per
// lane, while the shard goroutine has not started a tick before t, the
// clock's, or its runner had runs it had not started at the end of the
// last pass before t (runnerUntil). A producer in a tight loop otherwise
// keeps its P until Go preempts it, up to 10ms later, and the shard
// goroutine, whose timer that P must run and which is readied on it, waits
// as long (and so does a runner readied there): every timer of the shard
// runs late. It never waits for either: runtime.Gosched returns as soon as
// the scheduler has looked at the other runnable goroutines.
func (sh *Shard) yieldIfBehind(l *lane, t uint64) {
	if t <= min(sh.sleepUntil.Load(), sh.runnerUntil.Load()) || l.yielded.Load() == t {
		return
	}
	l.yielded.Store(t)
	runtime.Gosched()
}

// find returns the storage and node of r if r is a plausible reference
// into this arena.
func (sh *Shard) find(r Ref) (pool.Slot, *pool.Node, bool) {
	slot, ok := sh.arena.FindSlot(r.idx)
	if !ok {
		return slot, nil, false
	}
	return slot, slot.Node(), true
}

// cancelCheck: every cancelCheck-th Cancel of a lane wakes a shard
// goroutine that plans to sleep for more than a second (see cancelled).
const cancelCheck = 1024

// Pending reports whether the timer r has neither run nor been cancelled
// nor claimed by Stop.
func (sh *Shard) Pending(r Ref) bool {
	_, n, ok := sh.find(r)
	if !ok {
		return false
	}
	s, mine := load(n, r.gen)
	return mine && s.live()
}

// Deadline returns the clock reading at which the timer r is due (the start
// of its deadline tick), and false if it is no longer pending.
func (sh *Shard) Deadline(r Ref) (time.Duration, bool) {
	_, n, ok := sh.find(r)
	if !ok {
		return 0, false
	}
	s, mine := load(n, r.gen)
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
