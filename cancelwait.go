package shardwheel

import "context"

// CancelWait is Cancel that also waits for the task if it is in flight.
// It returns true when it cancelled the timer before it fired; otherwise
// it returns false once the task has returned, waiting for it if it is in
// flight: fired and queued on its shard's runner behind the tasks handed
// before it, or running there, or, with WithExecutor, on whatever
// goroutine the executor runs it (it waits for the task itself, not for
// the executor's run call). It returns ctx.Err() if ctx is done before the
// task has returned; a task that was not in flight needs no wait, and then
// ctx is not looked at.
//
// Called from inside the timer's own task it does not wait (the task
// cannot wait for itself): it returns Cancel's result at once, with a nil
// error: false for a one-shot timer, whose task has started; for a
// periodic series, true if the series was still live. So it does from a
// task of the runner that has the timer's task queued behind it (a timer
// of the same key fired meanwhile), which starts only after the caller
// returns.
//
// On a periodic timer (Every) it ends the series and waits for a run in
// progress, returning true iff the series was still live; with ctx done
// first, true (the series has ended) and ctx.Err() (its last run may
// still be running).
//
// A timer that Stop returned, or that another call cancelled, has no task
// running: CancelWait returns false at once. On the zero Timer it
// returns false, nil.
//
// Waiting never blocks the shard of the timer waited for: the shard
// publishes each run while it is in flight, and wakes waiters, if there
// are any, when one ends. (A task that calls CancelWait on another timer
// holds up the tasks queued behind it on its runner while it waits, as any
// blocking task does.) Timers nobody waits for still pay for that
// publication: each run goes through a pooled record published in a
// table, tens of nanoseconds (BENCHMARKS.md).
func (t Timer) CancelWait(ctx context.Context) (bool, error) {
	if t.sh == nil {
		return false, nil
	}
	ok, err := t.sh.CancelWait(ctx, t.ref)
	// A timer with a key may have run on its key's shard (routed), not
	// on its node's: wait there too. The run word names the node's shard,
	// so no other timer's run there is mistaken for it.
	if k := t.sh.RouteOf(t.key); err == nil && k != nil {
		err = k.WaitRun(ctx, t.ref)
	}
	return ok, err
}
