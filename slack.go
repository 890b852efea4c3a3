package shardwheel

import (
	"time"

	"github.com/shardwheel/shardwheel/shard"
)

// ScheduleWithin is Schedule for a timer that may run late by up to slack:
// it runs task once, no earlier than delay from now and no later than
// delay+slack from now (plus its shard's tick lag, as every timer), on the
// shard that key routes to, and returns a handle to the timer.
//
// Within that window the shard picks the tick with the most trailing zero
// bits, so that timers with nearby windows tend to share ticks; when the
// window holds the start of a higher wheel level's slot (with the default
// wheel, a multiple of 256 ticks: 256ms at the default tick), that is the
// tick, and the timer is filed in a slot that runs directly, never moved
// down the wheel. A million 60s idle timeouts with 1s of slack so cost the
// shard no cascade work and about two wake-ups a second instead of one per
// tick (BENCHMARKS.md has the figures). Timers without slack keep their
// precision exactly: they never share these slots.
//
// A slack <= 0 is Schedule's precision; the window is clamped to
// MaxDelay. Reset makes the timer exact again: it runs at the new
// deadline. Errors and guarantees, never early included, are Schedule's.
func (s *Scheduler) ScheduleWithin(key uint64, delay, slack time.Duration, task func()) (Timeout, error) {
	if task == nil {
		return Timeout{}, ErrNilTask
	}
	sh := s.localShard()
	r := s.request(key, delay, shard.Task{Func: task})
	r.Slack, r.Routed = slack, true
	return s.scheduleOn(sh, &r)
}

// AfterFuncWithin is ScheduleWithin without a key: the timer is filed on
// the shard of the P the caller runs on and runs there, as AfterFunc's
// timers do (ScheduleWithin's runs on its key's shard). Its Timeout's Key
// is 0. Windows, placement, errors and guarantees are ScheduleWithin's.
func (s *Scheduler) AfterFuncWithin(delay, slack time.Duration, task func()) (Timeout, error) {
	if task == nil {
		return Timeout{}, ErrNilTask
	}
	sh := s.localShard()
	r := s.request(0, delay, shard.Task{Func: task})
	r.Slack = slack
	return s.scheduleOn(sh, &r)
}

// AfterFuncWithin is Scheduler.AfterFuncWithin for a timer whose task is
// the handler's function called with key: it runs fn(key) once, between
// delay and delay+slack from now, on the shard of the caller's P whatever
// the key. It allocates nothing.
func (h Handler) AfterFuncWithin(key uint64, delay, slack time.Duration) (Timeout, error) {
	if h.s == nil {
		return Timeout{}, ErrNilTask
	}
	sh := h.s.localShard()
	r := h.s.request(key, delay, h.task())
	r.Slack = slack
	return h.s.scheduleOn(sh, &r)
}

// ScheduleWithin is Scheduler.ScheduleWithin for a timer whose task is
// the handler's function called with key: it runs fn(key) once, between
// delay and delay+slack from now, on the shard that key routes to. It
// allocates nothing.
func (h Handler) ScheduleWithin(key uint64, delay, slack time.Duration) (Timeout, error) {
	if h.s == nil {
		return Timeout{}, ErrNilTask
	}
	r := h.s.request(key, delay, h.task())
	r.Slack, r.Routed = slack, true
	return h.s.scheduleOn(h.s.localShard(), &r)
}
