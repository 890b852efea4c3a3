// Package shard is one timer wheel and the goroutine that drives it: the unit
// that package shardwheel replicates once per CPU.
//
// # Design
//
// Time is counted in ticks from the shard's origin: tick k starts at
// origin + k*Tick. A timer due at time D is filed at tick ceil(D/Tick) and
// runs when the worker processes that tick, which it does only after its
// clock has reached the tick's start. Rounding up is what makes the headline
// guarantee hold: a timer never fires before its deadline. Under normal load
// it fires within about one tick after it (see Lateness below).
//
// The wheel is hierarchical (see wheel): WheelSize slots per level, enough
// levels to cover maxDelayTicks (2^36 ticks: 795 days at 1ms, 21.8 years at
// 10ms); longer delays are clamped to that horizon. With the default 512
// slots:
//
//	level  slot width   range at 1ms tick   range at 10ms tick
//	0      1 tick       512ms               5.12s
//	1      512 ticks    4m22s               43m41s
//	2      2^18 ticks   37h17m              15.5 days
//	3      2^27 ticks   3.5 years           42.5 years
//	4      2^36 ticks   (wrap guard only)
//
// A timer is touched once when filed, at most once per level when its slot
// cascades, and once when it fires: the cost of a tick does not grow with
// timers that are not yet due, unlike Netty's single wheel whose every tick
// walks a bucket and decrements round counters.
//
// # Producers and the worker
//
// Producers (any goroutine) take a node from the shard's pool.Arena, fill
// it, and push its index into the shard's ring.Ring. The node is
// "unresolved": it carries a delay, not a deadline, because reading the clock
// costs more than the rest of Schedule. The worker resolves it after popping:
// it counts the published ring entries first and reads the clock second, so
// the clock reading is later than every push it resolves, and deadline =
// reading + delay can only be late, never early.
//
// Cancel and Reset act on the node's state word with one CAS (see state.go)
// and never wait for the worker. When the node already sits in the wheel,
// Cancel (so that its memory is reclaimed now, not when its slot comes round)
// and a Reset to an earlier deadline (so that it is re-filed) push it on the
// attention stack: a Treiber stack threaded through the arena's link array
// (pool.Arena.Link), which the worker empties with one Swap per pass. A Reset to a later
// deadline only rewrites the state word: the worker finds the node in its old
// slot, sees the later deadline and re-files it, as tokio does.
//
// The worker sleeps until the earliest occupied slot; when nothing is due and
// the ring is empty it parks, and the first producer to see the parked flag
// wakes it. An idle shard therefore costs nothing, and a shard whose next
// timer is far away wakes only when that timer (or a cascade) is due.
//
// # Lateness
//
// A timer waits in the ring until the worker's next pass (at most one tick
// while the shard is ticking, or the wake-up latency when it was parked),
// then rounding to the tick grid adds less than one tick: a timer normally
// runs between 0 and 2 ticks after its deadline, one tick on average, plus
// any time the worker spends behind (tick lag).
package shard

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/shardwheel/shardwheel/pool"
	"github.com/shardwheel/shardwheel/ring"
)

var (
	// ErrStopped is returned by Schedule after Close.
	ErrStopped = errors.New("shardwheel: scheduler stopped")
	// ErrTooManyPending is returned by Schedule when the pending limit or
	// the arena's capacity (pool.MaxNodes per shard) is reached.
	ErrTooManyPending = errors.New("shardwheel: too many pending timers")

	// errArenaFull is ErrTooManyPending for a full arena: moving pending
	// tokens from other shards (Refill) cannot help it.
	errArenaFull = fmt.Errorf("%w: the shard holds %d timers, its capacity", ErrTooManyPending, pool.MaxNodes)
)

const cacheLineSize = 64

// Config configures a Shard. Tick, WheelSize, RingSize, TransferCap and
// OnPanic are required; the other fields may be left zero. Package
// shardwheel validates user input before it gets here.
type Config struct {
	Tick        time.Duration
	WheelSize   int // a power of two, >= 2
	RingSize    int
	TransferCap int // ring entries moved into the wheel per tick, >= 1
	// Clock is the time source; nil means a new RealClock.
	Clock Clock
	// Epoch is the wall-clock time at which Clock read zero; Time uses it
	// to turn clock readings into time.Time. Ignored when Clock is nil.
	Epoch time.Time
	// Quota is the number of timers this shard may hold before Schedule
	// fails. Tokens move between shards with Refill.
	Quota int64
	// Lanes is the number of producer lanes, rounded up to a power of
	// two; runtime.GOMAXPROCS(0) is the natural value.
	Lanes int
	// Run executes an expired task; nil runs it inline on the worker.
	Run func(task func())
	// OnPanic receives the value of a panicking task (or Run). Required.
	OnPanic func(v any)
	// Stats turns on the latency histograms (tick lag, lateness, task
	// time), which cost a clock read per tick and per sampled task.
	// Counters are always kept.
	Stats bool
	// Pin, optional, is called on the worker goroutine after it has locked
	// its OS thread; an error goes to OnPinError and the worker carries on.
	Pin        func() error
	OnPinError func(error)
}

// Shard is one timer wheel driven by one worker goroutine. All methods other
// than the worker's own are safe for concurrent use. A Shard must be created
// with New and must not be copied.
type Shard struct {
	// Immutable after New.
	cfg      Config
	clock    Clock
	tick     int64         // ns
	origin   time.Duration // clock reading at tick 0
	maxDelay time.Duration
	arena    *pool.Arena
	lanes    []lane
	laneMask int
	wake     chan struct{} // capacity 1; producers signal, worker receives
	done     chan struct{} // closed by Close
	exited   chan struct{} // closed when the worker returns

	// Cancel (of a filed timer) and Reset (to an earlier deadline) push
	// here; the worker swaps it empty once per pass.
	_         [cacheLineSize]byte
	attention atomic.Uint32 // attention stack head: index+1, 0 = empty
	_         [cacheLineSize - 4]byte

	// Read on every Schedule, written only when the worker parks or on
	// Close: kept apart from written lines so reads stay cache hits.
	parked atomic.Uint32 // 1 while the worker sleeps beyond the next tick
	closed atomic.Bool
	gid    atomic.Uint64 // worker goroutine id, for Stop from a task
	_      [cacheLineSize - 16]byte

	stopped atomic.Uint64 // timers claimed by Drain

	// Worker only, except where workerStats says otherwise.
	stats    workerStats
	slept    bool   // the last sleep passed over ticks with nothing due
	wakeTick uint64 // the tick the worker last planned to process next
	w        *wheel
	freed    []pool.Chain // per lane
	counts   []int        // per lane, scratch for transfer
	rr       int          // lane transfer starts at, rotated for fairness
	capTick  uint64       // tick whose transfer budget capUsed counts
	capUsed  int
}

// lane is the part of a shard that producers running on one P use: its own
// ring of new timers and its own share of pending tokens, so that producers
// on different CPUs do not contend (the node pool has matching free-list
// lanes). Any goroutine may use any lane; the P id only makes collisions
// rare.
type lane struct {
	ring *ring.Ring // immutable after New; the ring pads its own counters
	// quota is the number of timers this lane may still accept. Producers
	// take a token in Schedule; Cancel, the worker and Drain give tokens
	// back to the lane of the P they run on, so a lane's count may go
	// beyond its initial share or negative; only the sum over all lanes and
	// shards means anything (see Scheduler.Pending).
	quota atomic.Int64
	// resets and ringFull count successful Resets and full-ring slow
	// paths of producers on this lane, for Stats.
	resets   atomic.Uint64
	ringFull atomic.Uint64
	_        [cacheLineSize - 32]byte
}

// New returns a shard; its worker starts with Start.
func New(cfg Config) (*Shard, error) {
	if cfg.Tick <= 0 || cfg.WheelSize < 2 || cfg.WheelSize&(cfg.WheelSize-1) != 0 ||
		cfg.TransferCap < 1 || cfg.OnPanic == nil || cfg.RingSize < 1 || cfg.Quota < 0 {
		return nil, fmt.Errorf("shard: invalid config %+v", cfg)
	}
	clock := cfg.Clock
	if clock == nil {
		rc := NewRealClock()
		clock, cfg.Epoch = rc, rc.Epoch()
	}
	nLanes := 1 << bits.Len(uint(max(cfg.Lanes, 1)-1))
	a := pool.New(reservedNodes(cfg.WheelSize), nLanes)
	sh := &Shard{
		cfg:      cfg,
		clock:    clock,
		tick:     int64(cfg.Tick),
		origin:   clock.Now(),
		arena:    a,
		lanes:    make([]lane, nLanes),
		laneMask: nLanes - 1,
		wake:     make(chan struct{}, 1),
		done:     make(chan struct{}),
		exited:   make(chan struct{}),
		w:        newWheel(a, cfg.WheelSize),
		freed:    make([]pool.Chain, nLanes),
		counts:   make([]int, nLanes),
	}
	// The ring capacity is the shard's: each lane gets an equal part.
	laneRing := max(cfg.RingSize/nLanes, minLaneRing)
	for i := range sh.lanes {
		r, err := ring.New(laneRing)
		if err != nil {
			return nil, err
		}
		sh.lanes[i].ring = r
	}
	sh.lanes[0].quota.Store(cfg.Quota)
	sh.maxDelay = time.Duration(min(maxDelayTicks-2, math.MaxInt64/4/sh.tick) * sh.tick)
	return sh, nil
}

// minLaneRing keeps lanes of a large machine from getting rings so small
// that an ordinary burst fills them.
const minLaneRing = 64

// Start launches the worker goroutine. It must be called once.
func (sh *Shard) Start() {
	go sh.run()
}

// myLane returns the lane of the caller's P.
func (sh *Shard) myLane() (int, *lane) {
	i := currentP() & sh.laneMask
	return i, &sh.lanes[i]
}

// Ref identifies one timer: node index in the high half, generation in the
// low half. The zero Ref never names a timer (index 0 is reserved).
type Ref uint64

func makeRef(idx, gen uint32) Ref     { return Ref(uint64(idx)<<32 | uint64(gen)) }
func (r Ref) split() (uint32, uint32) { return uint32(r >> 32), uint32(r) }

// MaxDelay returns the longest delay the shard files as given; longer ones
// are clamped to it.
func (sh *Shard) MaxDelay() time.Duration { return sh.maxDelay }

func (sh *Shard) clampDelay(d time.Duration) time.Duration {
	return min(max(d, 0), sh.maxDelay)
}

// Closed reports whether Close has been called.
func (sh *Shard) Closed() bool { return sh.closed.Load() }

// acquire takes a pending token for a Schedule on lane l, stealing from the
// shard's other lanes when l has none.
func (sh *Shard) acquire(l *lane) bool {
	for {
		if l.quota.Add(-1) >= 0 {
			return true
		}
		l.quota.Add(1)
		if !sh.stealInto(l) {
			return false
		}
	}
}

// release gives one pending token back, to the lane of the caller's P.
func (sh *Shard) release() {
	_, l := sh.myLane()
	l.quota.Add(1)
}

// stealInto moves up to half of the spare tokens of the first lane of sh
// that has any into dst, and reports whether it moved any.
func (sh *Shard) stealInto(dst *lane) bool {
	for i := range sh.lanes {
		src := &sh.lanes[i]
		for {
			q := src.quota.Load()
			if q <= 0 {
				break
			}
			take := (q + 1) / 2
			if src.quota.CompareAndSwap(q, q-take) {
				dst.quota.Add(take)
				return true
			}
		}
	}
	return false
}

// Refill moves spare tokens from sh into dst's lane for the caller's P and
// reports whether it moved any. It lets one shard use another's share of
// the pending limit.
func (sh *Shard) Refill(dst *Shard) bool {
	_, l := dst.myLane()
	return sh.stealInto(l)
}

// Quota returns the tokens this shard holds now, summed over its lanes.
func (sh *Shard) Quota() int64 {
	var q int64
	for i := range sh.lanes {
		q += sh.lanes[i].quota.Load()
	}
	return q
}

// Schedule files task to run delay from now. delay <= 0 runs at the next
// tick; delay beyond MaxDelay is clamped. It returns ErrTooManyPending if
// the shard has no pending token left (see Refill) or its arena is full, and
// ErrStopped if the shard is closed.
func (sh *Shard) Schedule(key uint64, delay time.Duration, task func()) (Ref, error) {
	li, l := sh.myLane()
	if !sh.acquire(l) {
		return 0, ErrTooManyPending
	}
	idx, gen, ok := sh.arena.Get(li)
	if !ok {
		l.quota.Add(1)
		return 0, errArenaFull
	}
	n := sh.arena.Node(idx)
	n.Key = key
	*sh.arena.Task(idx) = task
	// Storing the state last publishes the fields above to anyone who
	// validates the state first (Drain, the worker via the ring).
	s := unresolvedState(gen, sh.clampDelay(delay), sh.tick)
	n.State.Store(uint64(s))
	if !l.ring.Push(uint64(idx)) {
		sh.pushSlow(l, idx, s)
	}
	if sh.parked.Load() != 0 {
		sh.unpark()
	}
	// Close may have raced with us: Close stores closed before Drain scans,
	// and we stored the state before loading closed, so either Drain sees
	// our node or we see closed here (all Go atomics are sequentially
	// consistent). Whoever CASes the node first owns its fate.
	if sh.closed.Load() && n.State.CompareAndSwap(uint64(s), uint64(s.to(statusCancelled))) {
		sh.release()
		return 0, ErrStopped
	}
	return makeRef(idx, gen), nil
}

// pushSlow handles a full lane: the worker has not caught up. It wakes the
// worker, which may transfer again within the tick (up to TransferCap), and
// yields until the push succeeds or the shard closes. A task running on the
// worker itself cannot wait for it: it files the node into the wheel
// directly (see fileFromTask). s is the node's unresolved state.
func (sh *Shard) pushSlow(l *lane, idx uint32, s state) {
	l.ringFull.Add(1)
	if sh.OnWorker() {
		sh.fileFromTask(idx, s)
		return
	}
	for !sh.closed.Load() {
		sh.signal()
		runtime.Gosched()
		if l.ring.Push(uint64(idx)) {
			return
		}
	}
}

// node returns the node of r if r is a plausible reference into this arena.
func (sh *Shard) node(r Ref) (*pool.Node, uint32, bool) {
	idx, gen := r.split()
	if idx < sh.arena.Reserved() || idx >= sh.arena.HighWater() {
		return nil, 0, false
	}
	return sh.arena.Node(idx), gen, true
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
func (sh *Shard) Cancel(r Ref) bool {
	n, gen, ok := sh.node(r)
	if !ok {
		return false
	}
	for {
		s, mine := load(n, gen)
		if !mine || !s.live() {
			return false
		}
		// A resolved node may sit in the wheel: queue it so the worker
		// frees it now rather than when its slot comes round. An
		// unresolved one is still in the ring, where the worker will
		// find it cancelled.
		queue := s.status() == statusPending && !s.queued()
		ns := s.to(statusCancelled).withQueued(s.queued() || queue)
		if n.State.CompareAndSwap(uint64(s), uint64(ns)) {
			sh.release()
			if queue {
				sh.pushAttention(r)
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
	now := sh.clock.Now()
	t := sh.ceilTick(now + sh.clampDelay(delay))
	for {
		s, mine := load(n, gen)
		if !mine || !s.live() {
			return false
		}
		queue := false
		if s.status() == statusPending {
			cur := unwrapTicks(s.ticks38(), t)
			queue = t < cur && !s.queued()
		}
		ns := s.withTicks(statusPending, t).withQueued(s.queued() || queue)
		if n.State.CompareAndSwap(uint64(s), uint64(ns)) {
			_, l := sh.myLane()
			l.resets.Add(1)
			if queue {
				sh.pushAttention(r)
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

// Deadline returns the clock reading at which the timer r is due, and false
// if it is no longer pending. Before the worker has resolved a new timer
// (normally within a tick) it reports the earliest time the timer may run.
func (sh *Shard) Deadline(r Ref) (time.Duration, bool) {
	n, gen, ok := sh.node(r)
	if !ok {
		return 0, false
	}
	s, mine := load(n, gen)
	if !mine || !s.live() {
		return 0, false
	}
	now := sh.clock.Now()
	if s.status() == statusUnresolved {
		return sh.tickTime(sh.resolve(s, now)), true
	}
	return sh.tickTime(unwrapTicks(s.ticks38(), sh.floorTick(now))), true
}

// Time converts a clock reading to wall-clock time (with a monotonic
// reading when the clock is real).
func (sh *Shard) Time(at time.Duration) time.Time { return sh.cfg.Epoch.Add(at) }

func (sh *Shard) pushAttention(r Ref) {
	idx, _ := r.split()
	link := sh.arena.Link(idx)
	for {
		h := sh.attention.Load()
		link.Store(h)
		if sh.attention.CompareAndSwap(h, idx+1) {
			break
		}
	}
	if sh.parked.Load() != 0 {
		sh.unpark()
	}
}

// unpark wakes a parked worker. Only the producer that clears the flag
// sends, so a burst of schedules costs one wake-up.
func (sh *Shard) unpark() {
	if sh.parked.CompareAndSwap(1, 0) {
		sh.signal()
	}
}

func (sh *Shard) signal() {
	select {
	case sh.wake <- struct{}{}:
	default:
	}
}

// Close stops the worker at its next safe point and makes Schedule fail with
// ErrStopped. It does not wait: see Wait. Idempotent.
func (sh *Shard) Close() {
	if sh.closed.CompareAndSwap(false, true) {
		close(sh.done)
	}
}

// Wait blocks until the worker has returned. It must not be called from the
// worker itself (see OnWorker).
func (sh *Shard) Wait() { <-sh.exited }

// OnWorker reports whether the caller is this shard's worker goroutine, as
// it is inside a task run inline.
func (sh *Shard) OnWorker() bool { return sh.gid.Load() == goid() }

// Drain claims every timer that is still pending, after Close, and calls
// emit with each one's reference and key. A claimed timer is cancelled: it
// never runs and its handle reports not pending. Timers that lose the race
// to a concurrent Cancel or to the worker are not emitted.
func (sh *Shard) Drain(emit func(r Ref, key uint64)) {
	hw := sh.arena.HighWater()
	for idx := sh.arena.Reserved(); idx < hw; idx++ {
		if !sh.arena.Allocated(idx) {
			continue // a producer is installing the chunk: it will see closed
		}
		n := sh.arena.Node(idx)
		for {
			s := state(n.State.Load())
			if !s.live() {
				break
			}
			gen := n.Gen.Load()
			if gen == 0 {
				break // a fresh node a producer is still taking (Get bumps Gen first)
			}
			if !s.tagOK(gen) {
				continue // recycled between the loads: look again
			}
			// Success means the state did not change since it was
			// loaded, so gen belongs to the claimed timer; and the
			// CAS orders us after the producer's writes of Key and
			// task, which nobody writes again once it is cancelled.
			if n.State.CompareAndSwap(uint64(s), uint64(s.to(statusCancelled))) {
				sh.release()
				sh.stopped.Add(1)
				*sh.arena.Task(idx) = nil
				emit(makeRef(idx, gen), n.Key)
				break
			}
		}
	}
}

// ceilTick returns the first tick that starts at or after clock reading at.
func (sh *Shard) ceilTick(at time.Duration) uint64 {
	d := int64(at - sh.origin)
	if d <= 0 {
		return 0
	}
	return uint64((d + sh.tick - 1) / sh.tick)
}

// resolve returns the deadline tick of an unresolved state given a clock
// reading no earlier than the Schedule call.
func (sh *Shard) resolve(s state, now time.Duration) uint64 {
	v, inTicks := s.delay()
	if inTicks {
		return sh.ceilTick(now) + uint64(v)
	}
	return sh.ceilTick(now + time.Duration(v))
}

// floorTick returns the last tick that starts at or before clock reading at.
func (sh *Shard) floorTick(at time.Duration) uint64 {
	d := int64(at - sh.origin)
	if d <= 0 {
		return 0
	}
	return uint64(d / sh.tick)
}

// tickTime returns the clock reading at which tick t starts.
func (sh *Shard) tickTime(t uint64) time.Duration {
	return sh.origin + time.Duration(int64(t)*sh.tick)
}
