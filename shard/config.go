package shard

import (
	"sync/atomic"
	"time"
)

// Config configures a Shard. Tick, WheelSize, TransferCap and OnPanic are
// required; the other fields may be left zero. Package shardwheel validates
// user input before it gets here.
type Config struct {
	Tick        time.Duration
	WheelSize   int // a power of two, >= 2
	TransferCap int // timers moved from the queue into the wheel per tick, >= 1
	// FirstBlock is the number of nodes the arena allocates when the shard
	// gets its first timer (see pool.New); later blocks double.
	FirstBlock int
	// Clock is the time source; nil means the one NewClock returns.
	Clock Clock
	// Epoch is the wall-clock time at which Clock read zero, and Skew the
	// uncertainty of that (see NewClock); Time and Reading use them to
	// turn clock readings into time.Time and back. Ignored when Clock is
	// nil.
	Epoch time.Time
	Skew  time.Duration
	// Limited makes the shard keep pending tokens (tokens.go): Tokens is
	// the number of timers it may hold before Schedule fails, and tokens
	// move between shards with TakeTokens. Without a limit it keeps none.
	Limited bool
	Tokens  int64
	// Dry, shared by the shards whose tokens move between them, is set
	// when a search for spare tokens found none (see tokens.go); nil gives
	// the shard a flag of its own.
	Dry *atomic.Bool
	// Lanes is the number of producer lanes, rounded up to a power of
	// two; runtime.GOMAXPROCS(0) is the natural value.
	Lanes int
	// ID and Shards place the shard among its Scheduler's: P p's own
	// shard is number p modulo Shards, where its Schedules file timers
	// themselves; a Schedule from another P leaves its timer in the
	// shard's queue, for the shard's own P (or its goroutine) to file, so
	// that a timer crossing cores touches one line of the other core, not
	// the wheel. Shards 0 means 1.
	ID, Shards int
	// Home is the lane of this shard's own P, taken modulo the lane count:
	// a holder filing a timer that finds no node of its own (takeFree)
	// takes one from the arena (Arena.Get): from that lane's shared list
	// first, else another lane's, else a never-used node, and sweeps for
	// one only when all of those fail. Freed nodes go to the holder's own
	// list, not to a lane (share feeds the lanes from it).
	Home int
	// Run executes an expired task; nil runs it on the shard's runner
	// (runner.go). The runner calls it with the method value of a
	// pooled record of the run (cancelwait.go's execRun), which runs the
	// task and tells the shard it has returned; Run must call each func
	// it is given exactly once.
	Run func(task func())
	// Group, optional, is the shards routed timers cross between
	// (cross.go); without one, a routed timer is a plain one.
	Group *Group
	// Capacity, when positive, lowers the timers the shard's arena holds
	// below pool.Capacity: tests fill a shard with it.
	Capacity int
	// Handlers, required for handler timers, is the table of handlers
	// their tasks name; shards of one scheduler share it.
	Handlers *Handlers
	// OnPanic receives the value of a panicking task (or Run), and
	// ErrGoexit for a task that calls runtime.Goexit, on the goroutine
	// that ran it (runner.go). Required.
	OnPanic func(v any)
	// Stats turns on the latency histograms (tick lag, lateness, pass
	// time, task time), which cost a clock read per pass and about one
	// per task run. Counters are always kept.
	Stats bool
	// Unindex, optional, is called once with the key and Ref of each
	// indexed timer (Request.Indexed) when its node is freed: after the
	// timer ran or was cancelled, before the node can be reused, and for
	// a timer that fires before its task runs. Not reported: timers
	// claimed by Stop and timers CancelUnindexed stopped (their caller
	// removed the entry). It runs on the shard goroutine, holding the
	// wheel, and must not block for long.
	Unindex func(key uint64, r Ref)
	// Pin, optional, is called on the shard goroutine after it has
	// locked its OS thread; an error goes to OnPinError and the goroutine
	// carries on.
	Pin        func() error
	OnPinError func(error)
	// BlockedAfter, when positive, is how long a task may hold up the
	// runs behind it before the shard leaves its runner behind it and
	// hands them to a new one (runner.go); 0 never does. MaxBlocked
	// bounds the runners left behind at once, counted in Blocked, which
	// the shards of one Scheduler share; OnRefused, optional, hears of a
	// look refused at that bound.
	BlockedAfter time.Duration
	MaxBlocked   int
	Blocked      *atomic.Int64
	OnRefused    func()
}
