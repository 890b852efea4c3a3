package shard

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
	_ "unsafe" // for go:linkname
)

// Clock is a shard's source of time, injected so that tests can step a
// wheel exactly (as tokio's time driver does). Now must be monotonic and safe
// for concurrent use: Schedule, Reset and Deadline call it from any
// goroutine.
type Clock interface {
	// Now returns the time elapsed since an arbitrary fixed origin.
	Now() time.Duration
	// NewTimer returns a stopped Timer that the shard goroutine resets
	// before each sleep, and producers when they file an earlier timer.
	NewTimer() Timer
	// AfterFunc returns a stopped Timer that calls f, in a goroutine of
	// its own, each time it fires; its C is nil.
	AfterFunc(f func()) Timer
}

// Timer is a resettable one-shot timer bound to a Clock.
type Timer interface {
	// C delivers a value when the timer fires.
	C() <-chan time.Time
	// Reset makes the timer fire d from now, discarding an earlier setting
	// and any undelivered value, and reports true; or reports false and
	// changes nothing if the calling goroutine cannot reset it: its time
	// is not the clock's (a goroutine in a testing/synctest bubble would
	// arm a timer of the real clock on the bubble's fake time).
	Reset(d time.Duration) bool
	// Stop disarms the timer.
	Stop()
}

// NewClock returns the clock a Scheduler made now should follow, the
// wall-clock time its reading 0 stands for, and the uncertainty of that
// correspondence: a reading r is the time epoch+r-δ for some δ in
// [0, skew], so epoch.Add(r) is never earlier than the moment r stands for
// (see Shard.Time), and a moment t has the reading t.Sub(epoch)+δ, never
// more than t.Sub(epoch)+skew.
//
// Outside a testing/synctest bubble the clock is RealClock, the runtime's
// monotonic clock, read so that no bubble can change it: a Scheduler made
// outside a bubble keeps real time for callers inside one. A Scheduler made
// inside a bubble belongs to it: its clock is the bubble's fake clock, as
// its goroutines and timers are the bubble's.
func NewClock() (c Clock, epoch time.Time, skew time.Duration) {
	before := nanotime()
	epoch = time.Now()
	after := nanotime()
	if InBubble(epoch) {
		return bubbleClock{epoch}, epoch, 0
	}
	return RealClock{base: before}, epoch, time.Duration(after - before)
}

// InBubble reports whether t, a reading of time.Now, was taken inside a
// testing/synctest bubble: there time.Now carries no monotonic reading,
// which it always does outside on the platforms Go supports.
func InBubble(t time.Time) bool { return t == t.Round(0) }

// nanotime is the runtime's monotonic clock, in nanoseconds: the clock
// time.Now's monotonic reading comes from, without the fake time a
// testing/synctest bubble substitutes for time.Now and time.Since. The
// runtime keeps it reachable by linkname for the many packages that use it
// (see go.dev/issue/67401).
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// RealClock is the runtime's monotonic clock, counted from a fixed origin.
type RealClock struct{ base int64 }

// Now returns the time since the origin.
func (c RealClock) Now() time.Duration { return time.Duration(nanotime() - c.base) }

// NewTimer returns a stopped timer of package time.
func (RealClock) NewTimer() Timer { return newTimer(false) }

// AfterFunc returns a stopped timer of package time that calls f.
func (RealClock) AfterFunc(f func()) Timer { return newFuncTimer(f, false) }

// bubbleClock is the fake clock of the testing/synctest bubble a
// Scheduler was made in: time.Since, from the bubble's own start.
type bubbleClock struct{ epoch time.Time }

// Now returns the bubble's time since the epoch.
func (c bubbleClock) Now() time.Duration { return time.Since(c.epoch) }

// NewTimer returns a stopped timer of the bubble (New, which makes it, runs
// in the bubble).
func (bubbleClock) NewTimer() Timer { return newTimer(true) }

// AfterFunc returns a stopped timer of the bubble that calls f.
func (bubbleClock) AfterFunc(f func()) Timer { return newFuncTimer(f, true) }

// newTimer returns a stopped timer of package time, of a bubble's clock if
// bubbled, else of the real one.
func newTimer(bubbled bool) Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return realTimer{t, bubbled}
}

// newFuncTimer is newTimer for a timer that calls f.
func newFuncTimer(f func(), bubbled bool) Timer {
	t := time.AfterFunc(time.Hour, f)
	t.Stop()
	return realTimer{t, bubbled}
}

// realTimer is a timer of package time, and whether the bubble's fake
// clock drives it: only goroutines of the same kind can reset it, as
// package time computes the deadline from the caller's clock.
type realTimer struct {
	t       *time.Timer
	bubbled bool
}

func (r realTimer) C() <-chan time.Time { return r.t.C }

// Reset relies on Go 1.23 timers: Reset discards an undelivered value. It
// reads time.Now to tell a bubble's goroutine from another (InBubble).
func (r realTimer) Reset(d time.Duration) bool {
	if InBubble(time.Now()) != r.bubbled {
		return false
	}
	r.t.Reset(d)
	return true
}

func (r realTimer) Stop() { r.t.Stop() }

// Clock arithmetic. Any goroutine may call these: they read only immutable
// fields.

// Ref identifies one timer: the shard whose arena holds its node (its
// Config.ID), the node, and the node's generation in the timer's life,
// which never repeats (64 bits), so a Ref never names a later timer that
// reuses the node. The zero Ref never names a timer (index 0 is reserved,
// generation 0 never handed out). Refs are comparable.
type Ref struct {
	gen   uint64
	idx   uint32
	shard uint32
}

// ref returns the Ref of the life of generation gen on node idx.
func (sh *Shard) ref(idx uint32, gen uint64) Ref {
	return Ref{gen: gen, idx: idx, shard: uint32(sh.id)}
}

// IsZero reports whether r is the zero Ref.
func (r Ref) IsZero() bool { return r.gen == 0 }

// Shard returns the number (Config.ID) of the shard whose node r names.
func (r Ref) Shard() int { return int(r.shard) }

// AtomicRef holds a Ref that one goroutine stores while others load it.
// The zero value holds the zero Ref.
type AtomicRef struct {
	gen   atomic.Uint64
	where atomic.Uint64 // shard<<32 | idx
}

// Store stores r. Where it lives goes first: a Load that sees the
// generation sees the rest with it (Go's atomics are sequentially
// consistent).
func (a *AtomicRef) Store(r Ref) {
	a.where.Store(uint64(r.shard)<<32 | uint64(r.idx))
	a.gen.Store(r.gen)
}

// Load returns the Ref stored last, or the zero Ref.
func (a *AtomicRef) Load() Ref {
	gen := a.gen.Load()
	w := a.where.Load()
	return Ref{gen: gen, idx: uint32(w), shard: uint32(w >> 32)}
}

// AddDuration returns a+b, saturated at the bounds of time.Duration
// instead of wrapping round, as time.Time.Sub saturates: a sum of a clock
// reading and a user's delay must never turn "far ahead" into "long ago".
func AddDuration(a, b time.Duration) time.Duration {
	sum := a + b
	switch {
	case b > 0 && sum < a:
		return math.MaxInt64
	case b < 0 && sum > a:
		return math.MinInt64
	}
	return sum
}

func (sh *Shard) clampDelay(d time.Duration) time.Duration {
	return min(max(d, 0), sh.maxDelay)
}

// divider divides by a constant with a multiplication: a 64-bit division
// costs 35-90 cycles on the CPUs we measure on, and Schedule does two (its
// deadline and the tick it checks the shard goroutine against).
type divider struct {
	d, m uint64 // m = floor((2^64-1) / d)
}

func newDivider(d uint64) divider { return divider{d: d, m: ^uint64(0) / d} }

// div returns floor(x / d). d*m > 2^64 - d, so x*m/2^64 lies in
// (x/d - x/2^64, x/d], and x < 2^64: its integer part, the high half of
// x*m, is the quotient or one less, and one correction step makes it exact.
func (v divider) div(x uint64) uint64 {
	q, _ := bits.Mul64(x, v.m)
	if x-q*v.d >= v.d {
		q++
	}
	return q
}

// ceilTick returns the first tick that starts at or after clock reading at.
func (sh *Shard) ceilTick(at time.Duration) uint64 {
	d := int64(at - sh.origin)
	if d <= 0 {
		return 0
	}
	return sh.ticks.div(uint64(d + sh.tick - 1))
}

// floorTick returns the last tick that starts at or before clock reading at.
func (sh *Shard) floorTick(at time.Duration) uint64 {
	d := int64(at - sh.origin)
	if d <= 0 {
		return 0
	}
	return sh.ticks.div(uint64(d))
}

// tickTime returns the clock reading at which tick t starts.
func (sh *Shard) tickTime(t uint64) time.Duration {
	return sh.origin + time.Duration(int64(t)*sh.tick)
}

// deadlineTick returns the tick a timer set delay after clock reading now
// is due at: the first tick that starts at or after the deadline, so never
// early.
func (sh *Shard) deadlineTick(now, delay time.Duration) uint64 {
	return sh.ceilTick(now + sh.clampDelay(delay))
}
