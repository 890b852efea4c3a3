package shardwheel

import (
	"fmt"
	"time"

	"github.com/shardwheel/shardwheel/shard"
)

// TimerOption sets where and how precisely one timer runs: ByKey, Slack,
// OnMissed. It is a small value, built and read on the caller's stack:
// passing options costs no allocation. Options apply in order, and a later
// one of a kind overrides an earlier one, but every option is checked: an
// invalid one fails the call even when a later one overrides it. The zero
// TimerOption is ignored.
type TimerOption struct {
	kind timerOptionKind
	v    uint64 // ByKey's key, Slack's duration, OnMissed's policy: 16 bytes in all
}

type timerOptionKind uint8

const (
	_ timerOptionKind = iota // the zero TimerOption, ignored
	optByKey
	optSlack
	optMissed
)

// ByKey runs the timer on the shard that key routes to (ShardOf) instead
// of the caller's. The tasks of one-shot timers of equal keys run one at a
// time, in deadline order when their deadlines are a tick or more apart
// (unless the wheel that filed the earlier one fell behind and handed it
// over late, or WithExecutor runs them on goroutines of its own), and
// wait behind a blocked one (see WithBlockedAfter); keys need not be
// unique. Such a timer is filed in the wheel of the caller's P all the
// same and crosses to its key's shard only once its deadline is less than
// WithWheelSize ticks away (512ms at the defaults): one cancelled before
// then never leaves the caller's wheel and costs what a timer without a
// key costs; one that runs on another shard pays one hand-over between
// shards. A series (Every) with ByKey is filed on its key's shard from the
// start and runs there; its runs, one at a time among themselves, are not
// ordered with the key's one-shot tasks. The timer's Timer.Key is key. On
// a Handler's timer key must be the handler's argument, which is what the
// handler is called with.
func ByKey(key uint64) TimerOption { return TimerOption{kind: optByKey, v: key} }

// Slack lets a one-shot timer run late by up to d: it runs no earlier than
// its delay from now and no later than delay+d from now (plus its shard's
// tick lag, as every timer). Within that window the shard picks the tick
// with the most trailing zero bits, so that timers with nearby windows
// tend to share ticks; when the window holds the start of a higher wheel
// level's slot (with the default wheel, a multiple of 256 ticks: 256ms at
// the default tick), that is the tick, and the timer is filed in a slot
// that runs directly, never moved down the wheel. A million 60s idle
// timeouts with 1s of slack so cost the shard no cascade work and about
// two wake-ups a second instead of one per tick (BENCHMARKS.md has the
// figures). Timers without slack keep their precision exactly: they never
// share these slots.
//
// A d <= 0 is the default: a tick's precision. The window is clamped to
// MaxDelay, and Reset makes the timer exact again. A series runs on its
// grid: Every refuses a Slack above 0.
func Slack(d time.Duration) TimerOption { return TimerOption{kind: optSlack, v: uint64(d)} }

// OnMissed sets what a series (Every) does with the grid points it misses
// while it is behind; the default is SkipMissed. AfterFunc refuses it,
// whatever the policy: a one-shot timer misses nothing.
func OnMissed(policy MissedPolicy) TimerOption {
	return TimerOption{kind: optMissed, v: uint64(policy)}
}

// timerSpec is what a call's options say.
type timerSpec struct {
	byKey  bool
	key    uint64
	slack  time.Duration
	missed MissedPolicy
}

// specOf reads opts for the call named verb (for errors), of a series or
// not, whose task is a handler's with argument arg if hasArg: every error
// wraps ErrInvalidOption and names the option and its value. sp.key is the
// key the timer carries: a handler's argument, which ByKey must repeat, or
// ByKey's key, or 0.
func (s *Scheduler) specOf(verb string, series bool, arg uint64, hasArg bool, opts []TimerOption) (timerSpec, error) {
	s.mustBeNew()
	var sp timerSpec
	for _, o := range opts {
		switch o.kind {
		case optByKey:
			sp.byKey, sp.key = true, o.v
		case optSlack:
			slack := time.Duration(o.v)
			if series && slack > 0 {
				return sp, fmt.Errorf("%w: %s: Slack(%v): a series runs on its grid, without slack", ErrInvalidOption, verb, slack)
			}
			sp.slack = slack
		case optMissed:
			policy := MissedPolicy(o.v)
			if !series {
				return sp, fmt.Errorf("%w: %s: OnMissed(%v): only a series (Every) misses grid points", ErrInvalidOption, verb, policy)
			}
			if _, ok := policy.engine(); !ok {
				return sp, fmt.Errorf("%w: %s: OnMissed(%v): not a policy", ErrInvalidOption, verb, policy)
			}
			sp.missed = policy
		}
	}
	if hasArg {
		if sp.byKey && sp.key != arg {
			return sp, fmt.Errorf("%w: %s(%d, ...): ByKey(%d): a handler's timer runs on the shard of its argument", ErrInvalidOption, verb, arg, sp.key)
		}
		sp.key = arg
	}
	return sp, nil
}

// AfterFunc runs task once, delay from now, and returns a handle to the
// timer. By default the timer is filed on the shard of the P the caller
// runs on and its task runs there, which makes it the cheapest way to
// schedule: its whole life usually stays on the caller's CPU. ByKey runs
// it on its key's shard instead, one at a time with the key's other tasks;
// Slack lets it run late, where it costs the wheel least. delay <= 0 runs
// task at the first tick at or after the call, normally the next, and a
// delay beyond MaxDelay is clamped. Cancel, Reset, Pending and Stop act on
// the timer wherever it is.
//
// It returns ErrNilTask for a nil task, an error wrapping ErrInvalidOption
// for an option that does not apply, ErrStopped after Stop, and
// ErrTooManyPending at the WithMaxPending limit (or, wrapped, when the
// shard holds ShardCapacity timers); a rejected call leaves no trace, in
// Stats too. AfterFunc never blocks: it does not wait for any shard, so it
// is safe to call from a task however many timers the task schedules. It
// is lock-free and, in steady state, allocates nothing but what the
// caller's closure does.
func (s *Scheduler) AfterFunc(delay time.Duration, task func(), opts ...TimerOption) (Timer, error) {
	if task == nil {
		return Timer{}, ErrNilTask
	}
	// The two common shapes, no option and ByKey alone, skip reading the
	// options: the request timeout's hot path pays nothing for them.
	switch {
	case len(opts) == 0:
		sh := s.localShard()
		r := s.request(0, delay, shard.Task{Func: task})
		return s.scheduleOn(sh, &r)
	case len(opts) == 1 && opts[0].kind == optByKey:
		sh := s.localShard()
		r := s.request(opts[0].v, delay, shard.Task{Func: task})
		r.Routed = true
		return s.scheduleOn(sh, &r)
	}
	return s.schedule("AfterFunc", false, 0, false, delay, shard.Task{Func: task}, opts)
}

// schedule schedules a timer of task: a series of period d if series, else
// a one-shot timer due d from now. A handler's task passes its argument
// as arg (hasArg), which ByKey must then repeat.
func (s *Scheduler) schedule(verb string, series bool, arg uint64, hasArg bool, d time.Duration, task shard.Task, opts []TimerOption) (Timer, error) {
	sh, r, err := s.timerRequest(verb, series, arg, hasArg, d, task, opts, nil)
	if err != nil {
		return Timer{}, err
	}
	return s.scheduleOn(sh, &r)
}

// timerRequest reads a call's options, as specOf does, and returns the
// shard to file the timer on and the request that describes it: a series
// of period d if series, else a one-shot timer due d from now. An Index's
// timer passes its key's hash as index: the timer is indexed, and routed
// by that hash unless ByKey gives another key.
func (s *Scheduler) timerRequest(verb string, series bool, arg uint64, hasArg bool, d time.Duration, task shard.Task,
	opts []TimerOption, index *uint64) (*shard.Shard, shard.Request, error) {
	sp, err := s.specOf(verb, series, arg, hasArg, opts)
	if err != nil {
		return nil, shard.Request{}, err
	}
	if index != nil && !sp.byKey {
		sp.byKey, sp.key = true, *index
	}
	r := s.request(sp.key, d, task)
	r.Indexed = index != nil
	if !series {
		r.Slack, r.Routed = sp.slack, sp.byKey
		return s.localShard(), r, nil
	}
	if d < s.tick {
		return nil, shard.Request{}, ErrBadPeriod
	}
	policy, _ := sp.missed.engine() // checked by specOf; SkipMissed is 0
	r.Period, r.Missed = d, policy
	return s.seriesShard(sp), r, nil
}

// seriesShard returns the shard a series of spec sp is filed on: its
// key's from the start, with ByKey (a series never crosses shards), else
// the caller's.
func (s *Scheduler) seriesShard(sp timerSpec) *shard.Shard {
	if sp.byKey {
		return s.shards[s.route(sp.key)]
	}
	return s.localShard()
}

// Every runs task periodically at the grid points start + k·period (k = 1,
// 2, ...; start is the call), and returns a handle to the series. By
// default the series lives on the shard of the P the caller runs on, as
// AfterFunc's timers do; ByKey files it on its key's shard (its runs are
// not ordered with the key's one-shot tasks: see ByKey). Each run starts
// no earlier
// than its grid point, and the grid does not drift: neither the task's
// run time nor the tick grid moves it. A period beyond MaxDelay is
// clamped to MaxDelay.
//
// Runs never overlap: the next run begins only once the previous one has
// returned, with WithExecutor too (the executor's goroutine then hands
// the series back). A grid point that comes while the series is behind
// (its previous run not started or not returned: a stalled shard, a slow
// task, a slow executor) is missed, and OnMissed says what to do:
// SkipMissed (the default: after a stall the series runs once and goes on
// on the grid), BurstMissed (one run per missed point, back to back, then
// on the grid) or DelayMissed (one run, then the grid restarts one period
// after it returns). Stats counts runs (PeriodicRuns) and missed points
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
// than the tick (<= 0 included), an error wrapping ErrInvalidOption for
// Slack or an unknown OnMissed policy, and AfterFunc's errors otherwise.
// In steady state it allocates nothing: the series' record is the one its
// node kept from an earlier series (on a node that never held one, 80
// bytes are allocated; a Reset allocates a new grid, 24 bytes); nothing
// per run: one node serves the whole series.
func (s *Scheduler) Every(period time.Duration, task func(), opts ...TimerOption) (Timer, error) {
	if task == nil {
		return Timer{}, ErrNilTask
	}
	return s.schedule("Every", true, 0, false, period, shard.Task{Func: task}, opts)
}
