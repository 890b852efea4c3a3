package shardwheel

import (
	"errors"
	"fmt"
	"time"

	"github.com/shardwheel/shardwheel/shard"
)

// Missed says what a periodic timer does with the grid points it missed
// while its shard was behind.
type Missed uint8

const (
	SkipMissed  Missed = iota // run once for all of them, then go on at the next future grid point
	BurstMissed               // run once for each of them, back to back, then go on on the grid
	DelayMissed               // run once, and the grid restarts one period after this run returns
)

// engine returns the engine's value of the policy m (shard.SkipMissed and
// its kin), and false for a value that is no policy. The engine's
// constants are its own: this switch, not a conversion, joins the two, and
// TestMissedMatchesTheEngine checks it.
func (m Missed) engine() (uint8, bool) {
	switch m {
	case SkipMissed:
		return shard.SkipMissed, true
	case BurstMissed:
		return shard.BurstMissed, true
	case DelayMissed:
		return shard.DelayMissed, true
	}
	return 0, false
}

// String returns the constant's name.
func (m Missed) String() string {
	switch m {
	case SkipMissed:
		return "SkipMissed"
	case BurstMissed:
		return "BurstMissed"
	case DelayMissed:
		return "DelayMissed"
	}
	return fmt.Sprintf("Missed(%d)", uint8(m))
}

var (
	// ErrBadPeriod is returned by Every and its kin for a period shorter
	// than the Scheduler's tick (a period <= 0 included): the wheel runs
	// a series at most once a tick, so a shorter period could only miss
	// grid points.
	ErrBadPeriod = errors.New("shardwheel: Every: period must be at least the tick")
	// ErrBadMissed is returned by Every for a Missed value that is none
	// of SkipMissed, BurstMissed and DelayMissed.
	ErrBadMissed = errors.New("shardwheel: Every: unknown Missed policy")
)

// Every runs task periodically, on the shard that key routes to, at the
// grid points start + k·period (k = 1, 2, ...; start is the call), and
// returns a handle to the series. Each run starts no earlier than its grid
// point, and the grid does not drift: neither the task's run time nor the
// tick grid moves it. A period beyond MaxDelay is clamped to MaxDelay.
//
// Runs never overlap: the next run begins only once the previous one has
// returned, with WithExecutor too (the executor's goroutine then hands
// the series back). A grid point that comes while the series is behind
// (its previous run not started or not returned: a stalled shard, a slow
// task, a slow executor) is missed, and missed says what to do: SkipMissed
// (recommended: after a stall the series runs once and goes on on the
// grid), BurstMissed (one run per missed point, back to back, then on the
// grid) or DelayMissed (one run, then the grid restarts one period after
// it returns). Stats counts runs (PeriodicRuns) and missed points
// (PeriodicMissed).
//
// The handle acts on the whole series: Cancel ends it and reports whether
// it was still live (a run in progress finishes, none starts after it);
// CancelWait also waits for a run in progress; Reset(d) restarts the grid
// from the call with period d (and returns false, changing nothing, for
// d <= 0); Pending is true while the series lives; Deadline is its next
// run's tick (a run's own while it runs); Stop returns a live series
// once, and its Task is task, except with WithExecutor a series whose run
// the executor holds, which Stop ends without returning it: that run is
// its last (see Stop). The series is one timer in Pending and in Stats
// (Scheduled, then Cancelled or Stopped); its runs are not Fired.
//
// It returns ErrNilTask for a nil task, ErrBadPeriod for a period shorter
// than the tick (<= 0 included), ErrBadMissed for an unknown policy, and
// Schedule's errors otherwise. It allocates the series' record (80
// bytes), and each Reset a new grid (24 bytes); nothing per run: one node
// serves the whole series.
func (s *Scheduler) Every(key uint64, period time.Duration, missed Missed, task func()) (Timeout, error) {
	if task == nil {
		return Timeout{}, ErrNilTask
	}
	s.mustBeNew()
	return s.every(s.shards[s.route(key)], key, period, missed, shard.Task{Func: task})
}

// Every is Scheduler.Every for a series whose task is the handler's
// function called with key: it runs fn(key) at the grid points start +
// k·period, on the shard that key routes to. Periods, policies, errors
// and guarantees are Scheduler.Every's, and the zero Handler's calls
// return ErrNilTask; with no closure it allocates only the series'
// record (80 bytes).
func (h Handler) Every(key uint64, period time.Duration, missed Missed) (Timeout, error) {
	if h.s == nil {
		return Timeout{}, ErrNilTask
	}
	return h.s.every(h.s.shards[h.s.route(key)], key, period, missed, h.task())
}

// EveryFunc is Every without a key: the series runs on the shard of the P
// the caller runs on, as AfterFunc's timers do, so that scheduling it,
// resetting it and cancelling it from that P touch no other core (Every
// files it on its key's shard). Its Timeout's Key is 0. Periods, policies,
// errors, guarantees and cost are Every's.
func (s *Scheduler) EveryFunc(period time.Duration, missed Missed, task func()) (Timeout, error) {
	if task == nil {
		return Timeout{}, ErrNilTask
	}
	return s.every(s.localShard(), 0, period, missed, shard.Task{Func: task})
}

// EveryFunc is Scheduler.EveryFunc for a series whose task is the
// handler's function called with key: it runs fn(key) at the grid points
// start + k·period, on the shard of the caller's P, whatever the key (the
// handler's argument only). Periods, policies, errors and guarantees are
// Scheduler.Every's; it allocates only the series' record (80 bytes).
func (h Handler) EveryFunc(key uint64, period time.Duration, missed Missed) (Timeout, error) {
	if h.s == nil {
		return Timeout{}, ErrNilTask
	}
	return h.s.every(h.s.localShard(), key, period, missed, h.task())
}

// every schedules a periodic timer on sh.
func (s *Scheduler) every(sh *shard.Shard, key uint64, period time.Duration, missed Missed, task shard.Task) (Timeout, error) {
	if period < s.tick {
		return Timeout{}, ErrBadPeriod
	}
	policy, ok := missed.engine()
	if !ok {
		return Timeout{}, ErrBadMissed
	}
	r := s.request(key, period, task)
	r.Period, r.Missed = period, policy
	return s.scheduleOn(sh, &r)
}
