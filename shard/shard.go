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

// Shard is one timer wheel, the goroutine that drives it, and the lanes
// by which the rest of the process reaches it. All exported methods are
// safe for concurrent use. A Shard must be created with New and must not
// be copied.
//
// Fields are grouped by who writes them; within a group, the comment says
// who reads them. "Holder" is whoever holds the wheel (see own.go).
type Shard struct {
	// Immutable after New.
	cfg      Config
	clock    Clock
	tick     int64         // ns
	ticks    divider       // divides by tick
	origin   time.Duration // clock reading at tick 0
	maxDelay time.Duration
	// sweepCheck is a second's worth of ticks (at least one): a shard
	// goroutine that plans to sleep longer is woken by every
	// cancelCheck-th Cancel of a lane, to see whether the cancelled
	// timers call for a sweep (see cancelled).
	sweepCheck uint64
	dry        *atomic.Bool
	arena      *pool.Arena
	lanes      []lane
	laneMask   int
	home       int           // lane a holder out of free nodes takes one from (Config.Home)
	id, of     int           // the shard's number and the number of shards
	wake       chan struct{} // capacity 1: anyone signals, the shard goroutine receives
	done       chan struct{} // closed by Close
	exited     chan struct{} // closed when the shard goroutine and its runners have returned
	lines      *lineWriters  // who wrote which lines, with the verify tag (verify.go)
	// alarm is the timer the shard goroutine sleeps on, reset by it and
	// by a wakeFor that lowers sleepUntil (own.go).
	alarm Timer
	// ownerExited is closed when the shard goroutine returns, exited when
	// its runners have too (goroutines counts them and the shard
	// goroutine).
	ownerExited chan struct{}

	// Read by every Schedule (closed) or by IsShardGoroutine (g), written
	// once: by Close, and by the shard goroutine as it starts. On the
	// immutable fields' lines.
	closed atomic.Bool
	g      atomic.Uintptr // the shard goroutine's token (gtoken.go)

	_ [pad.CacheLineSize]byte

	// own is the wheel's owner word (own.go): CASed by every holder, so
	// on every Schedule of the shard's P: a line of its own.
	own atomic.Uint64
	_   [pad.CacheLineSize]byte

	// Pushed by producers that find the wheel held (queue), and by Resets
	// to an earlier deadline and shards crossing or handing back routed
	// timers (attention, attention.go); emptied by holders. Each pads its
	// producers' line; their backlogs are the holders'.
	queue     ring.Queue
	attention ring.Queue
	_         [pad.CacheLineSize]byte

	// Read on every Schedule, written by the shard goroutine once per pass
	// and CASed by a wakeFor that lowers it: a line of their own, so that
	// reads stay cache hits between passes.
	//
	// sleepUntil is the tick the shard goroutine plans to process next,
	// MaxUint64 while it is parked with nothing due: a holder that files
	// a timer due earlier wakes it (see file), and a producer that finds
	// it a tick late yields (see yieldIfBehind).
	sleepUntil atomic.Uint64
	plannedAt  atomic.Uint64 // the elapsed tick when the goroutine planned it
	// runnerUntil is the last tick for which the runner is not behind:
	// MaxUint64, or, while runs it has not started are left at a pass's
	// end, the tick that pass reached: producers then yield once a tick
	// too (see yieldIfBehind). Written by the goroutine each pass.
	runnerUntil atomic.Uint64
	_           [pad.CacheLineSize]byte

	// starved is set by a producer that does not hold the wheel, when its
	// lane ran dry or took shareMin nodes, and cleared by the holder that
	// feeds the lanes (share): read by every holder's release, written
	// rarely, on a line of its own.
	starved atomic.Bool
	_       [pad.CacheLineSize]byte

	stopped atomic.Uint64 // timers claimed by Stop; Stop's goroutine
	// crossedFired counts this shard's routed timers that other shards'
	// goroutines ran (cross.go), which count in this shard's Fired.
	crossedFired atomic.Uint64
	// waiters counts the goroutines in WaitRun, and notify is the channel
	// the next run that ends closes while there are any (made by the
	// first waiter, by CAS; swapped out and closed by the run's end).
	waiters atomic.Int32
	notify  atomic.Pointer[chan struct{}]
	// claimed has one bit per node index, set for each timer Stop claimed
	// and kept (atomic Or, after its CAS on the node); stored once by
	// Drain before its scan, nil before. Read by Claimed from any
	// goroutine.
	claimed atomic.Pointer[[]atomic.Uint64]
	// blockedNow is the runners left behind, for readers; refused counts
	// the looks the MaxBlocked bound refused; goroutines counts the shard
	// goroutine and its runners' goroutines; runners lists every runner
	// the shard made (pushed by the shard goroutine, read by Stats).
	blockedNow atomic.Pointer[blockedView]
	refused    atomic.Uint64
	goroutines atomic.Int32
	runners    atomic.Pointer[runner]

	_ [pad.CacheLineSize]byte

	// The runs (cancelwait.go): runTab is the newest run table (stored
	// by the shard goroutine, read by waiters); runFree is the stack on
	// which runs give their execRun back, pushed (CAS) by whatever
	// goroutine ran the task and taken whole (Swap) by the shard
	// goroutine. aborts counts the tasks that panicked or called
	// runtime.Goexit, for Panics: added by whatever goroutine reported
	// them, taken (Swap) by the shard goroutine in its pass
	// (countAborts).
	runTab  atomic.Pointer[runTable]
	runFree atomic.Pointer[execRun]
	aborts  atomic.Uint64
	// returned is the stack on which runners left behind hand themselves
	// back once their kept runs are done (runner.go): pushed by them,
	// taken whole by the shard goroutine.
	returned atomic.Pointer[runner]

	_ [pad.CacheLineSize]byte

	// The holder's: only the goroutine holding the wheel reads or writes
	// these (own.go's CAS and Swap order successive holders).
	h holder
	_ [pad.CacheLineSize]byte

	// The shard goroutine's, except where publishedStats says otherwise; work
	// is written under the wheel's hold.
	stats     publishedStats
	work      passWork // what the current pass did
	slept     bool     // the last sleep passed over ticks with nothing due
	timed     bool     // the goroutine planned to process wakeTick when due
	more      bool     // the pass left work for another one at once
	pacedTick uint64   // the elapsed tick at which cascadeAhead last ran
	// housekeepAt is the tick from which a pass does a housekeeping step
	// (ahead.go).
	housekeepAt uint64
	// lookRunner and lookClaimed are the runner and the runs it had
	// claimed at the last runnerMoving.
	lookRunner  *runner
	lookClaimed uint64
	wakeups     uint64   // sleeps that ended: published at the next pass (cWakeups)
	wakeTick    uint64   // the tick the goroutine last planned to process next
	lastTick    uint64   // the last tick a pass reached; written holding the wheel
	lastPass    PassWork // what the last pass did, for recordRecent
	// The runners' (runner.go): runner is the current one, spare those
	// returned for reuse, moved leave's scratch; blocked the runners left
	// behind, heldKeys the keys held back behind them (blocked.go), longest
	// the longest of their tasks that returned.
	runner   *runner
	room     int  // runs the runner may be handed before its backlog is full (makeRoom)
	full     bool // the runner's backlog stopped this pass (runList)
	spare    *runner
	moved    []*execRun
	blocked  []*blockedRun
	heldKeys map[uint64]*heldKey
	longest  BlockedTask
	runs     runPool // the execRuns it holds (cancelwait.go)
	trace    tracer  // the execution tracer's view of passes (passes.go)

	// Padding keeps a Shard over 32 KiB, a large allocation, which the
	// runtime places at the start of a page: its fields' cache lines
	// follow from their offsets (see doc.go's table).
	_ [8 << 10]byte
}

// lane is the part of a shard that goroutines running on one P use: their
// share of pending tokens and their counters, so that producers on
// different CPUs do not contend (the node pool has matching free-list
// lanes). Any goroutine may use any lane; the P id only makes collisions
// rare. Every field is an atomic that the lane's goroutines write and
// Stats and token searches read.
type lane struct {
	// tokens is the number of timers this lane may still accept.
	// Producers take one in Schedule; whoever ends a timer gives one back
	// to the lane of the P it runs on, so a lane's count may go beyond its
	// initial share or negative; only the sum over all lanes and shards
	// means anything (see Scheduler.Pending).
	tokens atomic.Int64
	// Counters of this lane's goroutines, for Stats: Schedules undone
	// because Stop won the race, timers pushed on the queue, and
	// successful Resets and Cancels. (Timers filed at once are counted by
	// the holder: see scheduledNow.)
	undone  atomic.Uint64
	queued  atomic.Uint64
	resets  atomic.Uint64
	cancels atomic.Uint64
	// yielded is the last tick in which a producer on this lane yielded
	// its processor to a late shard goroutine (see yieldIfBehind).
	yielded atomic.Uint64
	// missed counts the grid points periodic timers missed, counted by
	// their runs (periodic.go's step), on whatever goroutine ran them.
	missed atomic.Uint64
	// demand counts the nodes producers on this lane took elsewhere
	// (another lane, or the arena's growth) for want of one on its shared
	// free list; the holder that feeds the lane takes it down (share).
	demand atomic.Uint64
	// Eight words: the lane fills its line (TestPaddedLayout).
}

// New returns a shard; its goroutine starts with Start. It allocates no
// node storage: the arena grows when timers arrive.
func New(cfg Config) (*Shard, error) {
	if cfg.Tick <= 0 || cfg.WheelSize < 2 || cfg.WheelSize&(cfg.WheelSize-1) != 0 ||
		cfg.TransferCap < 1 || cfg.OnPanic == nil || cfg.Tokens < 0 {
		return nil, fmt.Errorf("shard: invalid config %+v", cfg)
	}
	clock := cfg.Clock
	if clock == nil {
		clock, cfg.Epoch, cfg.Skew = NewClock()
	}
	nLanes := 1 << bits.Len(uint(max(cfg.Lanes, 1)-1))
	a := pool.New(cfg.FirstBlock, nLanes)
	if cfg.Capacity > 0 {
		a.LimitCapacity(cfg.Capacity + 1) // index 0 is reserved
	}
	sh := &Shard{
		cfg:      cfg,
		clock:    clock,
		tick:     int64(cfg.Tick),
		ticks:    newDivider(uint64(cfg.Tick)),
		origin:   originOf(cfg, clock),
		arena:    a,
		lanes:    make([]lane, nLanes),
		laneMask: nLanes - 1,
		home:     cfg.Home & (nLanes - 1),
		id:       cfg.ID,
		of:       max(cfg.Shards, 1),
		wake:     make(chan struct{}, 1),
		done:     make(chan struct{}),
		exited:   make(chan struct{}),
		alarm:    clock.NewTimer(),

		ownerExited: make(chan struct{}),
	}
	if cfg.BlockedAfter > 0 {
		if sh.cfg.Blocked == nil {
			sh.cfg.Blocked = new(atomic.Int64)
		}
		if sh.cfg.MaxBlocked <= 0 {
			sh.cfg.MaxBlocked = math.MaxInt32
		}
	}
	if debug {
		sh.lines = new(lineWriters)
	}
	sh.h.w = newWheel(a, cfg.WheelSize)
	sh.h.sweep.min, sh.h.sweep.at = minSweep, minSweep
	sh.h.limit = noLimit
	sh.lanes[0].tokens.Store(cfg.Tokens)
	if sh.dry = cfg.Dry; sh.dry == nil {
		sh.dry = new(atomic.Bool)
	}
	sh.maxDelay = time.Duration(min(maxDelayTicks-2, math.MaxInt64/4/sh.tick) * sh.tick)
	sh.sweepCheck = uint64(max(int64(time.Second)/sh.tick, 1))
	sh.sleepUntil.Store(math.MaxUint64)
	sh.runnerUntil.Store(math.MaxUint64)
	return sh, nil
}

// originOf returns the clock reading a shard counts ticks from: its
// Group's, else the clock's now.
func originOf(cfg Config, clock Clock) time.Duration {
	if cfg.Group != nil {
		return cfg.Group.Origin
	}
	return clock.Now()
}

// Start launches the shard goroutine. It must be called once.
func (sh *Shard) Start() {
	sh.goroutines.Store(1)
	go sh.run()
}

// MaxDelay returns the longest delay the shard files as given; longer ones
// are clamped to it.
func (sh *Shard) MaxDelay() time.Duration { return sh.maxDelay }

// Closed reports whether Close has been called.
func (sh *Shard) Closed() bool { return sh.closed.Load() }

// Now returns the shard's clock reading.
func (sh *Shard) Now() time.Duration { return sh.clock.Now() }

// Time converts a clock reading to wall-clock time (with a monotonic
// reading when the clock is real): never earlier than the moment the
// reading stands for (see NewClock).
func (sh *Shard) Time(at time.Duration) time.Time { return sh.cfg.Epoch.Add(at) }

// Instant is Reading's inverse: the time a reading at stands for, exact
// for a reading Reading made (Time, for deadlines, rounds up by the
// clock's skew instead).
func (sh *Shard) Instant(at time.Duration) time.Time { return sh.cfg.Epoch.Add(at - sh.cfg.Skew) }

// Reading converts a time to a clock reading: never earlier than the
// reading the clock will show at t (see NewClock), so a timer due at it is
// never early.
func (sh *Shard) Reading(t time.Time) time.Duration {
	return AddDuration(t.Sub(sh.cfg.Epoch), sh.cfg.Skew)
}

// Footprint estimates the heap bytes New allocates for a shard with
// wheelSize slots per level and the given lane count, before any timer:
// package shardwheel checks option combinations against it, and a benchmark
// there measures the real figure.
func Footprint(wheelSize, lanes int) int {
	nLanes := uintptr(1) << bits.Len(uint(max(lanes, 1)-1))
	perLane := unsafe.Sizeof(lane{}) + pad.CacheLineSize // its free list
	levels, size := uintptr(wheelLevels(wheelSize)), uintptr(max(wheelSize, minWheelSize))
	slots := levels * (size*unsafe.Sizeof(slotList{}) + (size+63)/64*8)
	return int(unsafe.Sizeof(Shard{}) + unsafe.Sizeof(pool.Arena{}) + unsafe.Sizeof(wheel{}) + nLanes*perLane + slots)
}
