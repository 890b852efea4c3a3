package shardwheel

import (
	"context"
	"time"

	"github.com/shardwheel/shardwheel/shard"
)

// Stop stops every shard, waits for their goroutines to return, and returns
// the timers that had not ended, plain and indexed: they never run, their
// handles report not pending, and Timer.Task gives back their tasks, so
// that their work can be handed elsewhere. It empties every Index, so
// their calls find nothing afterwards. After Stop, AfterFunc and Every
// (the Scheduler's, a Handler's, an Index's) and NewHandler return
// ErrStopped.
//
// Timers whose task is the CancelFunc of a context from WithTimeout,
// WithDeadline or their Cause variants (the context's own timer among
// them) are not returned: Stop hands each to a timer of package time that
// calls it at the timer's deadline, so that a context made before Stop
// still expires at its deadline. Stats counts them as stopped.
//
// What Stop waits for: each shard goroutine to return, which it does
// within a pass (it never runs a task), and then every task the shards
// handed out before it: the tasks running, and those queued behind them
// (fired, so not returned), including a task that blocks and its key's
// tasks queued behind it. So every task has returned when Stop does. With
// WithExecutor, Stop waits for the executor's run calls in progress or
// queued, but not for tasks the executor runs asynchronously: wait for
// those with the executor's own means. A panicking task or executor is
// recovered and reported to the panic handler; an executor that runs tasks
// on other goroutines must recover their panics itself. Shutdown is Stop
// with a bound on this wait.
//
// A periodic series (Every) is returned between its runs. A series whose
// run is handed out when Stop claims it (its task started or not) is not
// returned: that run, which may start after Stop claims it, is its last,
// and Stats counts the series as stopped. So what Stop returns never runs
// twice: a returned series' Task is not also in a runner's hands. A timer
// due while its key's task blocked (WithBlockedAfter) is still pending:
// Stop returns it.
//
// Stop is idempotent: only the first call returns timers; a later call
// waits until the first is completely done (every task has returned,
// including one that called Stop and is still running) and returns nil.
//
// Called from inside a task, Stop does not wait for the tasks of that
// task's shard, which would deadlock: it claims the pending timers of every
// shard, waits for the other shards' tasks, and returns; the calling
// shard's remaining tasks run once the calling task returns. A later Stop
// called from a task returns nil at once, without waiting: the first Stop
// may be waiting for that very task. With WithExecutor, the executor's
// goroutines are not the shard's: Stop called from a task an executor runs
// asynchronously waits for every shard's runners, so an executor whose run
// call waits until a task that calls Stop returns will deadlock.
func (s *Scheduler) Stop() []Timer {
	out, _ := s.Shutdown(context.Background())
	return out
}

// Shutdown is Stop that stops waiting when ctx is done: it then returns
// ctx.Err() instead of hanging on a task that never returns. Either way
// the first call claims every pending timer, returns it (or hands it over,
// as Stop does), and makes AfterFunc return ErrStopped. The error says
// whether anything is still running: nil means every task handed out
// before has returned, even when ctx was done already (an idle
// scheduler's Shutdown with a cancelled ctx returns its timers and nil);
// ctx.Err() means ctx was done while such a task was still running or
// queued, and those tasks run to their end. Two exceptions, as for Stop:
// called from a task, Shutdown does not wait for or look at the tasks of
// that task's shard; and with WithExecutor, a nil error covers the tasks
// but not the executor's run calls, which may still be returning, nor the
// tasks it runs asynchronously once its run calls have returned. A later
// call, or Stop, waits (bounded by its own ctx) for what still runs, and
// returns no timers.
func (s *Scheduler) Shutdown(ctx context.Context) ([]Timer, error) {
	s.mustBeNew()
	gid := shard.GoroutineID()
	if !s.stopping.CompareAndSwap(false, true) {
		if s.onShardGoroutine(gid) {
			return nil, nil
		}
		if err := wait(ctx, s.stopped); err != nil {
			return nil, err
		}
		return nil, s.waitTasks(ctx, gid)
	}
	for _, sh := range s.shards {
		sh.Close()
	}
	// Each shard goroutine returns within a pass: it runs no task, so
	// nothing it waits for is a task's. Drain may run from then on.
	for _, sh := range s.shards {
		<-sh.Stopped()
	}
	var out []Timer
	for _, sh := range s.shards {
		sh.Drain(func(r shard.Ref, key uint64, due time.Duration, task shard.Task) bool {
			if s.handOver(sh, task, due) {
				return false // not returned: Task reports nil, as documented
			}
			out = append(out, Timer{sh: sh, ref: r, key: key})
			return true
		})
	}
	// Every indexed timer has ended: drop the indexes. A scheduling call
	// racing with Stop that stores its entries after this sees its timer
	// ended and deletes them itself.
	if p := s.indexes.Load(); p != nil {
		for _, ix := range *p {
			ix.clear()
		}
	}
	err := s.waitTasks(ctx, gid)
	close(s.stopped)
	countLive(-1, nil)
	return out, err
}

// waitTasks waits, once every shard goroutine has stopped, for the tasks
// handed out before: every runner of a shard returns once it has run them,
// but the task that called Stop (on goroutine gid) cannot wait for its
// own. When ctx is done first it returns ctx.Err() only if a task is still
// running or queued: runners that have nothing left to run but have not
// returned yet are no reason to report that Shutdown gave up.
func (s *Scheduler) waitTasks(ctx context.Context, gid uint64) error {
	for _, sh := range s.shards {
		if sh.IsShardGoroutine(gid) {
			continue
		}
		if err := wait(ctx, sh.Exited()); err != nil && sh.RunsInFlight() {
			return err
		}
	}
	return nil
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
// runners: Stop called from a task.
func (s *Scheduler) onShardGoroutine(gid uint64) bool {
	for _, sh := range s.shards {
		if sh.IsShardGoroutine(gid) {
			return true
		}
	}
	return false
}
