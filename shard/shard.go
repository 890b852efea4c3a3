package shard

import (
	"fmt"
	"math"
	"math/bits"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/shardwheel/shardwheel/internal/pad"
	"github.com/shardwheel/shardwheel/pool"
	"github.com/shardwheel/shardwheel/ring"
)

// Config configures a Shard. Tick, WheelSize, TransferCap and OnPanic are
// required; the other fields may be left zero. Package shardwheel validates
// user input before it gets here.
type Config struct {
	Tick        time.Duration
	WheelSize   int // a power of two, >= 2
	TransferCap int // new timers moved into the wheel per tick, >= 1
	// FirstBlock is the number of nodes the arena allocates when the shard
	// gets its first timer (see pool.New); later blocks double.
	FirstBlock int
	// Clock is the time source; nil means a new RealClock.
	Clock Clock
	// Epoch is the wall-clock time at which Clock read zero; Time uses it
	// to turn clock readings into time.Time. Ignored when Clock is nil.
	Epoch time.Time
	// Quota is the number of timers this shard may hold before Schedule
	// fails. Tokens move between shards with TakeTokens.
	Quota int64
	// Dry, shared by the shards whose tokens move between them, is set
	// when a search for spare tokens found none (see quota.go); nil gives
	// the shard a flag of its own.
	Dry *atomic.Bool
	// Lanes is the number of producer lanes, rounded up to a power of
	// two; runtime.GOMAXPROCS(0) is the natural value.
	Lanes int
	// Run executes an expired task; nil runs it inline on the worker.
	// A handler timer's task reaches it as a closure made at expiry.
	Run func(task func())
	// Handlers, required for ScheduleHandler, is the table of handlers
	// its timers name; shards of one scheduler share it.
	Handlers *Handlers
	// OnPanic receives the value of a panicking task (or Run). Required.
	OnPanic func(v any)
	// Stats turns on the latency histograms (tick lag, lateness, pass
	// time, task time), which cost a clock read per pass, per 64 tasks
	// run and per sampled task. Counters are always kept.
	Stats bool
	// Unindex, optional, is called by the worker, once, with the key and
	// Ref of each timer scheduled with ScheduleIndexed when it frees the
	// timer's node: after the timer ran or was cancelled, before the node
	// can be reused, and for a timer that fires normally before its task
	// runs (after, if a racing Reset had queued the node for attention).
	// Not reported: timers claimed by Drain (the worker has stopped) and
	// timers CancelUnindexed stopped (their caller removed the entry).
	// It runs on the worker goroutine and must not block.
	Unindex func(key uint64, r Ref)
	// Pin, optional, is called on the worker goroutine after it has locked
	// its OS thread; an error goes to OnPinError and the worker carries on.
	Pin        func() error
	OnPinError func(error)
}

// Shard is one timer wheel driven by one worker goroutine. All exported
// methods are safe for concurrent use. A Shard must be created with New and
// must not be copied.
type Shard struct {
	// Immutable after New.
	cfg      Config
	clock    Clock
	tick     int64         // ns
	ticks    divider       // divides by tick
	origin   time.Duration // clock reading at tick 0
	maxDelay time.Duration
	dry      *atomic.Bool
	arena    *pool.Arena
	lanes    []lane
	laneMask int
	wake     chan struct{} // capacity 1; producers signal, worker receives
	done     chan struct{} // closed by Close
	exited   chan struct{} // closed when the worker returns
	// quiet is closed by the worker when it starts a task after Close
	// (see Quiet); the worker is the only closer.
	quiet chan struct{}

	_ [pad.CacheLineSize]byte

	// Read on every Schedule, written by the worker once per pass (and on
	// Close): kept apart from lines producers write, so that reads stay
	// cache hits between passes.
	parked atomic.Uint32 // 1 while the worker sleeps beyond the next tick
	closed atomic.Bool
	gid    atomic.Uint64 // worker goroutine id, for Stop from a task
	// dueTick is the tick the worker plans to process next, MaxUint64
	// while it is parked with nothing due (see yieldIfBehind).
	dueTick atomic.Uint64
	_       [pad.CacheLineSize - 24]byte

	stopped atomic.Uint64 // timers claimed by Drain; Stop's goroutine
	// inTask is true while the worker runs a task (or the executor or
	// panic handler for one). Written by the worker only, read by Quiet's
	// callers; it and closed are sequentially consistent atomics, which
	// the handshake in Quiet relies on.
	inTask atomic.Bool
	// drained has one bit per node index, set for each timer Drain
	// claimed (atomic Or, after its CAS on the node); stored once by Drain
	// before its scan, nil before. Read by Claimed from any goroutine.
	drained atomic.Pointer[[]atomic.Uint64]

	// Worker only, except where workerStats says otherwise.
	stats workerStats
	work  passWork // what the current pass did
	slept bool     // the last sleep passed over ticks with nothing due
	timed bool     // the worker planned to process wakeTick when due
	more  bool     // the pass left work for another one at once
	// pacedTick is the elapsed tick at which cascadeAhead last ran.
	pacedTick uint64
	wakeTick  uint64 // the tick the worker last planned to process next
	w         *wheel
	freed     []pool.Chain // per lane
	rr        int          // lane transfer starts at, rotated for fairness
	capTick   uint64       // tick whose transfer budget capUsed counts
	capUsed   int
	quieted   bool // quiet is closed
}

// lane is the part of a shard that producers running on one P use: its own
// incoming queue and its own share of pending tokens and counters, so that
// producers on different CPUs do not contend (the node pool has matching
// free-list lanes). Any goroutine may use any lane; the P id only makes
// collisions rare.
type lane struct {
	queue ring.Queue // pads its own producer and consumer lines
	// quota is the number of timers this lane may still accept. Producers
	// take a token in Schedule; Cancel, the worker and Drain give tokens
	// back to the lane of the P they run on, so a lane's count may go
	// beyond its initial share or negative; only the sum over all lanes and
	// shards means anything (see Scheduler.Pending).
	quota atomic.Int64
	// Counters of producers on this lane, for Stats: accepted Schedules
	// (counted once the call can no longer be undone, so the count never
	// goes down), Schedules undone because Stop won the race (their nodes
	// still pass through the queue), successful Resets and Cancels, and
	// the cancelled nodes taken back from this lane's queue (takeBack).
	scheduled atomic.Uint64
	undone    atomic.Uint64
	resets    atomic.Uint64
	cancels   atomic.Uint64
	reclaimed atomic.Uint64
	// yielded is the last tick in which a producer on this lane yielded
	// its processor to a late worker (see yieldIfBehind).
	yielded atomic.Uint64
	// attention is the head of this lane's attention stack (index+1, 0 =
	// empty): Cancel of a filed timer and Reset to an earlier deadline
	// push here, on the lane of the P they run on, so that they write no
	// line another P writes; the worker swaps each lane's stack empty once
	// per pass (see attention.go).
	attention atomic.Uint32
	_         [pad.CacheLineSize - 60]byte
}

// New returns a shard; its worker starts with Start. It allocates no node
// storage: the arena grows when timers arrive.
func New(cfg Config) (*Shard, error) {
	if cfg.Tick <= 0 || cfg.WheelSize < 2 || cfg.WheelSize&(cfg.WheelSize-1) != 0 ||
		cfg.TransferCap < 1 || cfg.OnPanic == nil || cfg.Quota < 0 {
		return nil, fmt.Errorf("shard: invalid config %+v", cfg)
	}
	clock := cfg.Clock
	if clock == nil {
		rc := NewRealClock()
		clock, cfg.Epoch = rc, rc.Epoch()
	}
	nLanes := 1 << bits.Len(uint(max(cfg.Lanes, 1)-1))
	a := pool.New(cfg.FirstBlock, nLanes)
	sh := &Shard{
		cfg:      cfg,
		clock:    clock,
		tick:     int64(cfg.Tick),
		ticks:    newDivider(uint64(cfg.Tick)),
		origin:   clock.Now(),
		arena:    a,
		lanes:    make([]lane, nLanes),
		laneMask: nLanes - 1,
		wake:     make(chan struct{}, 1),
		done:     make(chan struct{}),
		exited:   make(chan struct{}),
		quiet:    make(chan struct{}),
		w:        newWheel(a, cfg.WheelSize),
		freed:    make([]pool.Chain, nLanes),
	}
	for i := range sh.lanes {
		sh.lanes[i].queue.Init()
	}
	sh.lanes[0].quota.Store(cfg.Quota)
	if sh.dry = cfg.Dry; sh.dry == nil {
		sh.dry = new(atomic.Bool)
	}
	sh.maxDelay = time.Duration(min(maxDelayTicks-2, math.MaxInt64/4/sh.tick) * sh.tick)
	return sh, nil
}

// Start launches the worker goroutine. It must be called once.
func (sh *Shard) Start() {
	go sh.run()
}

// myLane returns the lane of the caller's P.
func (sh *Shard) myLane() (int, *lane) {
	i := currentP() & sh.laneMask
	return i, &sh.lanes[i]
}

// MaxDelay returns the longest delay the shard files as given; longer ones
// are clamped to it.
func (sh *Shard) MaxDelay() time.Duration { return sh.maxDelay }

// Closed reports whether Close has been called.
func (sh *Shard) Closed() bool { return sh.closed.Load() }

// Time converts a clock reading to wall-clock time (with a monotonic
// reading when the clock is real).
func (sh *Shard) Time(at time.Duration) time.Time { return sh.cfg.Epoch.Add(at) }

// Footprint estimates the heap bytes New allocates for a shard with
// wheelSize slots per level and the given lane count, before any timer:
// package shardwheel checks option combinations against it, and a benchmark
// there measures the real figure.
func Footprint(wheelSize, lanes int) int {
	nLanes := uintptr(1) << bits.Len(uint(max(lanes, 1)-1))
	perLane := unsafe.Sizeof(lane{}) + pad.CacheLineSize + unsafe.Sizeof(pool.Chain{})
	levels, size := uintptr(wheelLevels(wheelSize)), uintptr(max(wheelSize, minWheelSize))
	slots := levels * (size*unsafe.Sizeof(slotList{}) + (size+63)/64*8)
	return int(unsafe.Sizeof(Shard{}) + unsafe.Sizeof(pool.Arena{}) + unsafe.Sizeof(wheel{}) + nLanes*perLane + slots)
}
