package shard

import (
	"sync"
	"sync/atomic"
	"time"
)

// Clock is the worker's source of time, injected so that tests can step a
// wheel exactly (as tokio's time driver does). Now must be monotonic and safe
// for concurrent use: Reset and Deadline call it from any goroutine.
type Clock interface {
	// Now returns the time elapsed since an arbitrary fixed origin.
	Now() time.Duration
	// NewTimer returns a stopped Timer that the worker resets before each
	// sleep. Only the worker uses it.
	NewTimer() Timer
}

// Timer is a resettable one-shot timer bound to a Clock.
type Timer interface {
	// C delivers a value when the timer fires.
	C() <-chan time.Time
	// Reset makes the timer fire d from now, discarding an earlier setting
	// and any undelivered value.
	Reset(d time.Duration)
	// Stop disarms the timer.
	Stop()
}

// RealClock is the monotonic clock of package time.
type RealClock struct{ base time.Time }

// NewRealClock returns a RealClock whose origin is now.
func NewRealClock() *RealClock { return &RealClock{base: time.Now()} }

// Epoch returns the wall-clock time of the origin: Epoch().Add(Now()) is
// the present, with a monotonic reading.
func (c *RealClock) Epoch() time.Time { return c.base }

// Now returns the time since the origin. It reads only the monotonic clock.
func (c *RealClock) Now() time.Duration { return time.Since(c.base) }

// NewTimer returns a stopped timer.
func (c *RealClock) NewTimer() Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return realTimer{t}
}

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }

// Reset relies on Go 1.23 timers: Reset discards an undelivered value.
func (r realTimer) Reset(d time.Duration) { r.t.Reset(d) }
func (r realTimer) Stop()                 { r.t.Stop() }

// ManualClock is a Clock that moves only when Advance is called. It is meant
// for tests: a worker driven by it sleeps until the test advances time past
// its wake-up tick. The zero value reads 0 and is ready to use.
type ManualClock struct {
	now    atomic.Int64
	mu     sync.Mutex // guards timers
	timers []*manualTimer
}

// Now returns the current manual time.
func (c *ManualClock) Now() time.Duration { return time.Duration(c.now.Load()) }

// Advance moves the clock forward by d and fires every timer that is due.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now.Add(int64(d))
	for _, t := range c.timers {
		if t.armed && int64(t.when) <= now {
			t.armed = false
			select {
			case t.ch <- time.Time{}:
			default:
			}
		}
	}
}

// NewTimer returns a stopped timer driven by Advance.
func (c *ManualClock) NewTimer() Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTimer{c: c, ch: make(chan time.Time, 1)}
	c.timers = append(c.timers, t)
	return t
}

type manualTimer struct {
	c     *ManualClock
	ch    chan time.Time
	when  time.Duration // guarded by c.mu
	armed bool          // guarded by c.mu
}

func (t *manualTimer) C() <-chan time.Time { return t.ch }

func (t *manualTimer) Reset(d time.Duration) {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	select {
	case <-t.ch:
	default:
	}
	t.when, t.armed = t.c.Now()+d, true
	if d <= 0 {
		t.armed = false
		t.ch <- time.Time{}
	}
}

func (t *manualTimer) Stop() {
	t.c.mu.Lock()
	t.armed = false
	t.c.mu.Unlock()
}
