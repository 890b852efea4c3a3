package main

import (
	"iter"
	"sync"
	"time"

	"github.com/shardwheel/shardwheel"
)

// timers is an implementation under test, as the load drives it. H is its
// handle type. Both implementations receive the same calls with the same
// arguments; each does what is natural to it.
type timers[H any] interface {
	// Schedule starts a timer that runs f after d.
	Schedule(key uint64, d time.Duration, f func()) (H, error)
	// Cancel stops a timer and reports whether it had not run yet.
	Cancel(h H) bool
	// Reset moves a timer's deadline to d from now, or starts it again
	// if it already ran, and returns the handle to keep. ok reports
	// whether it was still pending.
	Reset(h H, key uint64, d time.Duration, f func()) (next H, ok bool)
	// Close stops every timer still pending; live yields the handles the
	// load holds.
	Close(live iter.Seq[H])
}

// wheel adapts a shardwheel.Scheduler through its un-keyed call, as a
// proxy's request timeout needs no key: s.AfterFunc, Timer.Cancel and
// Timer.Reset. The load's key is not used.
type wheel struct{ s *shardwheel.Scheduler }

func (w wheel) Schedule(_ uint64, d time.Duration, f func()) (shardwheel.Timer, error) {
	return w.s.AfterFunc(d, f)
}

func (w wheel) Cancel(t shardwheel.Timer) bool { return t.Cancel() }

// Reset falls back to AfterFunc when the timer has ended.
func (w wheel) Reset(t shardwheel.Timer, _ uint64, d time.Duration, f func()) (shardwheel.Timer, bool) {
	if t.Reset(d) {
		return t, true
	}
	// The timer ended, so Reset cannot revive it: schedule a new one,
	// which is what time.Timer's Reset does internally.
	n, err := w.s.AfterFunc(d, f)
	if err != nil {
		return t, false
	}
	return n, false
}

// Close stops the scheduler, which ends every pending timer: the load's
// handles are not needed.
func (w wheel) Close(iter.Seq[shardwheel.Timer]) { w.s.Stop() }

// keyedWheel adapts a shardwheel.Scheduler through an Index, as a
// multiplexed client uses it: the load's handle is the timer's key (a
// request or connection id), and the Index finds the timer.
type keyedWheel struct {
	s  *shardwheel.Scheduler
	ix *shardwheel.Index[uint64]
}

func (w keyedWheel) Schedule(key uint64, d time.Duration, f func()) (uint64, error) {
	_, err := w.ix.AfterFunc(key, d, f)
	return key, err
}

func (w keyedWheel) Cancel(key uint64) bool { return w.ix.Cancel(key) }

// Reset falls back to AfterFunc when the key's timer has ended, as
// wheel's Reset does.
func (w keyedWheel) Reset(key, _ uint64, d time.Duration, f func()) (uint64, bool) {
	if w.ix.Reset(key, d) {
		return key, true
	}
	// On an error (the run is stopping) the key simply has no timer, as
	// wheel's Reset keeps its ended handle.
	_, _ = w.ix.AfterFunc(key, d, f)
	return key, false
}

// Close stops the scheduler, as wheel's does.
func (w keyedWheel) Close(iter.Seq[uint64]) { w.s.Stop() }

// stdlib adapts time.AfterFunc: Timer.Stop cancels, Timer.Reset resets.
type stdlib struct{}

func (stdlib) Schedule(_ uint64, d time.Duration, f func()) (*time.Timer, error) {
	return time.AfterFunc(d, f), nil
}

func (stdlib) Cancel(t *time.Timer) bool { return t.Stop() }

// Reset relies on Timer.Reset re-arming an AfterFunc timer that already
// ran: f runs again at the new deadline.
func (stdlib) Reset(t *time.Timer, _ uint64, d time.Duration, _ func()) (*time.Timer, bool) {
	return t, t.Reset(d)
}

// Close stops every timer the load holds: unlike a Scheduler, the runtime
// has no way to drop them all, and left running they would fire into the
// next measurement.
func (stdlib) Close(live iter.Seq[*time.Timer]) {
	for t := range live {
		if t != nil {
			t.Stop()
		}
	}
}

// null does no timer work: compare drives the load through it to measure
// what the load costs alone, to subtract from the implementations' runs.
// It answers as the real implementations do on the load's common path,
// so that the load runs the same code it runs against them. What no
// answer can imitate is a timer firing: its tasks never run, so the load
// records no lateness and re-issues no background request, and makes
// fewer calls than against a real implementation (compare subtracts per
// call for that reason).
type null struct{}

// Schedule keeps nothing, f included: the handle is the key, as in the
// keyed adapters, and nothing ever looks at it.
func (null) Schedule(key uint64, _ time.Duration, _ func()) (uint64, error) { return key, nil }

// Cancel reports the timer pending, as a real implementation does for
// every request whose response comes before its timeout: with the default
// load, all those answered (a response within 200ms, a timeout after 1s
// at the earliest), so the load counts no missed cancel.
func (null) Cancel(uint64) bool { return true }

// Reset reports the timer pending, as a real implementation does for
// nearly every read of the default load (a connection is read every half
// second on average, against a 10s idle timeout), so the load reopens
// nothing.
func (null) Reset(key, _ uint64, _ time.Duration, _ func()) (uint64, bool) { return key, true }

// Close has nothing to stop.
func (null) Close(iter.Seq[uint64]) {}

// stdlibKeyed is what a multiplexed client writes today to reach
// time.AfterFunc timers by id: a sync.Map from key to timer, whose entry
// the timer's own task deletes when it fires (a wrapping closure: one more
// allocation per timer, part of this way's cost).
type stdlibKeyed struct{ m *sync.Map }

func (k stdlibKeyed) Schedule(key uint64, d time.Duration, f func()) (uint64, error) {
	k.m.Store(key, time.AfterFunc(d, func() { k.m.Delete(key); f() }))
	return key, nil
}

func (k stdlibKeyed) Cancel(key uint64) bool {
	t, ok := k.m.LoadAndDelete(key)
	return ok && t.(*time.Timer).Stop()
}

// Reset re-arms the key's timer, as stdlib's Reset does, or schedules a
// new one once the timer has fired and deleted its entry. (A Reset that
// races the firing re-arms a timer whose entry is being deleted: like a
// client written this way, it then runs once more without being found.)
func (k stdlibKeyed) Reset(key, _ uint64, d time.Duration, f func()) (uint64, bool) {
	if t, ok := k.m.Load(key); ok {
		return key, t.(*time.Timer).Reset(d)
	}
	_, _ = k.Schedule(key, d, f)
	return key, false
}

// Close stops every timer still in the map.
func (k stdlibKeyed) Close(iter.Seq[uint64]) {
	k.m.Range(func(_, t any) bool {
		t.(*time.Timer).Stop()
		return true
	})
}
