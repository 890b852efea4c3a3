package shard

import (
	"sync"
	"sync/atomic"
	"time"
)

// ManualClock is a Clock that moves only when Advance is called. It is meant
// for tests: a shard goroutine driven by it sleeps until the test advances time past
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
		if t.armed.Load() && t.when.Load() <= now && t.armed.CompareAndSwap(true, false) {
			t.fire()
		}
	}
}

// NewTimer returns a stopped timer driven by Advance.
func (c *ManualClock) NewTimer() Timer { return c.newTimer(nil) }

// AfterFunc returns a stopped timer driven by Advance that calls f, in a
// goroutine of its own, when it fires.
func (c *ManualClock) AfterFunc(f func()) Timer { return c.newTimer(f) }

func (c *ManualClock) newTimer(f func()) *manualTimer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTimer{c: c, ch: make(chan time.Time, 1), f: f}
	if f != nil {
		t.ch = nil
	}
	c.timers = append(c.timers, t)
	return t
}

// manualTimer is a ManualClock's timer. Reset and Stop take no lock and
// never wait, as the runtime's timers: the shard calls them from goroutines
// pinned to their P (armAlarm).
type manualTimer struct {
	c     *ManualClock
	ch    chan time.Time
	when  atomic.Int64 // the clock reading it fires at, while armed
	armed atomic.Bool
	f     func() // AfterFunc's: called instead of sending on ch
}

func (t *manualTimer) C() <-chan time.Time { return t.ch }

// fire delivers a value, unless one is waiting already, or calls f.
func (t *manualTimer) fire() {
	if t.f != nil {
		go t.f()
		return
	}
	select {
	case t.ch <- time.Time{}:
	default:
	}
}

func (t *manualTimer) Reset(d time.Duration) bool {
	t.armed.Store(false)
	select { // drop an undelivered value, as Go 1.23 timers do
	case <-t.ch:
	default:
	}
	t.when.Store(int64(t.c.Now() + d))
	if d <= 0 {
		t.fire()
		return true
	}
	t.armed.Store(true)
	// An Advance that passed the deadline before armed was set would
	// miss it: fire now if so.
	if t.c.Now() >= time.Duration(t.when.Load()) && t.armed.CompareAndSwap(true, false) {
		t.fire()
	}
	return true
}

func (t *manualTimer) Stop() { t.armed.Store(false) }
