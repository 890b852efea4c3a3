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
