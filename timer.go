package shardwheel

import (
	"time"

	"github.com/shardwheel/shardwheel/shard"
)

// Timer is a handle to one scheduled timer. It is a small value: copy it
// freely. Its zero value is valid and names no timer: Cancel and Reset
// return false, Pending false, Key 0 and Deadline the zero Time.
type Timer struct {
	sh  *shard.Shard
	ref shard.Ref
	key uint64
}

// Cancel stops the timer from running and reports whether this call did so:
// true at most once per timer, and never after it fired (its task handed
// to its shard's runner, started or queued behind the tasks handed before
// it), was cancelled, or Stop returned it. On a periodic timer (Every) it
// ends the series: true iff the series was still live; a run in progress
// finishes, a run queued and not started does not start, and none starts
// after it (CancelWait also waits for a run in progress). Cancel is
// lock-free and O(1): it marks the timer cancelled and drops its task, so
// that the closure can be collected at once. The timer's node (its 32
// bytes) stays in the wheel until the wheel meets it or a sweep frees it
// (Stats.HeldCancelled); a Cancel on the wheel's own P of the timer filed
// last there, not an Index's, frees it at once (Stats.TakenBack). An
// Index's timer cancelled this way is no longer its key's: the Index's
// Cancel, Reset, Lookup and All no longer find it, and the shard drops its
// entries when it frees the node.
func (t Timer) Cancel() bool {
	return t.sh != nil && t.sh.Cancel(t.ref)
}

// Reset moves the timer's deadline to delay from now (clamped like
// AfterFunc's) and reports whether the timer was still pending, in which case
// it now runs at the new deadline and not at the old one. If Reset returns
// false the timer has ended (possibly by running at its old deadline, with
// which Reset raced) and nothing changes. Moving a deadline later costs one
// atomic compare-and-swap and allocates nothing.
//
// On a periodic timer (Every) Reset restarts the series' grid from the
// call with period delay: its next run is delay from now, then every
// delay (it allocates the new grid, 24 bytes). A delay shorter than the
// tick is refused, as Every refuses it: Reset returns false and the
// series goes on unchanged. A timer with Slack becomes exact: it runs at
// the new deadline.
func (t Timer) Reset(delay time.Duration) bool {
	return t.sh != nil && t.sh.Reset(t.ref, t.key, delay)
}

// Pending reports whether the timer has not yet ended: for a periodic
// timer, whether the series lives (during its runs too).
func (t Timer) Pending() bool {
	return t.sh != nil && t.sh.Pending(t.ref)
}

// Task returns the task of a timer that Stop or Shutdown returned, so that
// its work can be handed elsewhere (or run: calling it does not revive the
// timer, which never runs). For a periodic series it is the series' task,
// which the scheduler runs no more: with WithExecutor, Stop returns no
// series whose run the executor still holds, so calling it never
// duplicates such a run (see Stop). For every other timer (pending, ended
// in any other way) and for the zero Timer it returns nil: a shard drops
// a task when its timer ends. A stopped Scheduler keeps the tasks of the
// timers Stop returned, for Task, for as long as the Scheduler or a
// Timer of it is reachable.
func (t Timer) Task() func() {
	if t.sh == nil {
		return nil
	}
	return t.sh.Func(t.sh.Claimed(t.ref), t.key)
}

// Key returns the key the timer carries: ByKey's, a Handler timer's
// argument, an Index's timer's routing key (ByKey's, else the hash of its
// index key), and 0 for any other.
func (t Timer) Key() uint64 { return t.key }

// Deadline returns when the timer is due, or the zero Time if it has ended.
// The deadline is on the tick grid, so it may be up to a tick after
// schedule time plus delay. Until the shard has picked up a new timer
// (normally within one tick) Deadline reports the earliest time it can run.
func (t Timer) Deadline() time.Time {
	if t.sh == nil {
		return time.Time{}
	}
	d, ok := t.sh.Deadline(t.ref)
	if !ok {
		return time.Time{}
	}
	return t.sh.Time(d)
}
