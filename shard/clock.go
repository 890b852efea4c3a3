package shard

import (
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
