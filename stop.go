package shardwheel

import (
	"context"
	"time"

	"github.com/shardwheel/shardwheel/shard"
)

// Stop stops every shard, waits for their goroutines to return, and returns
// the timers that had not ended, plain and indexed: they never run, their
// handles report not pending, and Timeout.Task gives back their tasks, so
// that their work can be handed elsewhere. It empties the key index, so
// keyed calls find nothing afterwards. After Stop, Schedule and ScheduleKey
// return ErrStopped.
//
// Timers whose task is the CancelFunc of a context from WithTimeout,
// WithDeadline or their Cause variants (the context's own timer among
// them) are not returned: Stop hands each to a timer of package time that
// calls it at the timer's deadline, so that a context made before Stop
// still expires at its deadline. Stats counts them as stopped.
//
// What Stop waits for: each shard goroutine to return. With the default
// inline executor that includes any task running when Stop is called, so
// every task has returned when Stop does. With WithExecutor it includes
// the executor's run calls in progress, but not tasks the executor runs
// asynchronously: wait for those with the executor's own means. A
// panicking task or executor is recovered by its shard and reported to the
// panic handler; an executor that runs tasks on other goroutines must
// recover their panics itself. Shutdown is Stop with a bound on this wait.
//
// A periodic series (Every) is returned between its runs. With
// WithExecutor, a series whose run the executor holds when Stop claims it
// (handed over, its task started or not) is not returned: that run, which
// may start after Stop returns, is its last, and Stats counts the series
// as stopped. So what Stop returns never runs twice: a returned series'
// Task is not also in the executor's hands. (Inline, a run in progress
// has returned by the time Stop does, unless the task called Stop itself
// or Shutdown gave up on it.)
//
// Stop is idempotent: only the first call returns timers; a later call
// waits until the first is completely done (every shard goroutine has
// returned, including one whose task called Stop and is still running) and
// returns nil.
//
// Called from inside a task running on a shard goroutine (the default
// executor), Stop does not wait for that shard, which would deadlock: it
// claims the pending timers of every shard, including those due in the
// same tick as the calling task, waits for the other shards, and returns;
// the calling shard's goroutine exits as soon as the task returns. A later
// Stop called from a task returns nil at once, without waiting: the first
// Stop may be waiting for that very task. With WithExecutor, Stop waits
// for every shard, so an executor that blocks a shard until a task that
// calls Stop returns will deadlock.
func (s *Scheduler) Stop() []Timeout {
	out, _ := s.Shutdown(context.Background())
	return out
}

// Shutdown is Stop that stops waiting when ctx is done: it then returns
// ctx.Err() instead of hanging on a task that never returns. Either way
// the first call claims every pending timer, returns it (or hands it over,
// as Stop does), and makes Schedule return ErrStopped; a nil error means
// every shard goroutine has returned, as after Stop. When ctx is done
// first, tasks that were running may still be running, and their shard
// goroutines exit when they return. The error is ctx.Err() whenever ctx is
// done before every shard goroutine has returned, even if ctx was done
// already when Shutdown was called. A later call, or Stop, waits (bounded
// by its own ctx) for those goroutines, and returns no timers.
func (s *Scheduler) Shutdown(ctx context.Context) ([]Timeout, error) {
	s.mustBeNew()
	gid := shard.GoroutineID()
	if !s.stopping.CompareAndSwap(false, true) {
		if s.onShardGoroutine(gid) {
			return nil, nil
		}
		err := wait(ctx, s.stopped)
		for _, sh := range s.shards {
			if err == nil {
				err = wait(ctx, sh.Exited())
			}
		}
		return nil, err
	}
	for _, sh := range s.shards {
		sh.Close()
	}
	var err error
	for _, sh := range s.shards {
		if sh.IsShardGoroutine(gid) {
			continue // quiet: it is running the task that called us
		}
		if err == nil {
			err = wait(ctx, sh.Exited())
		}
		if err != nil {
			// Giving up on a shard goroutine still busy: Drain may
			// run beside it once it touches no node again, which it
			// reaches without waiting for any task (see shard.Quiet).
			if quiet, ch := sh.Quiet(); !quiet {
				select {
				case <-ch:
				case <-sh.Stopped():
				}
			}
		}
	}
	var out []Timeout
	for _, sh := range s.shards {
		sh.Drain(func(r shard.Ref, key uint64, due time.Duration, task shard.Task) bool {
			if s.handOver(sh, task, due) {
				return false // not returned: Task reports nil, as documented
			}
			out = append(out, Timeout{sh: sh, ref: r, key: key})
			return true
		})
	}
	// Every indexed timer has ended: drop the index. A ScheduleKey racing
	// with Stop that stores its entry after this sees its timer ended and
	// deletes the entry itself.
	for i := range s.index {
		s.index[i].m.Clear()
	}
	close(s.stopped)
	countLive(-1, nil)
	return out, err
}

// wait waits until ch is closed or ctx is done, and returns ctx.Err() in
// the second case. A closed ch wins over a done ctx.
func wait(ctx context.Context, ch <-chan struct{}) error {
	select {
	case <-ch:
		return nil
	default:
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// onShardGoroutine reports whether the goroutine with id gid is one of s's
// shard goroutines: Stop called from a task run inline.
func (s *Scheduler) onShardGoroutine(gid uint64) bool {
	for _, sh := range s.shards {
		if sh.IsShardGoroutine(gid) {
			return true
		}
	}
	return false
}
