// Package shardwheel is a sharded, lock-free timer scheduler for programs
// that keep millions of timeouts: proxies, RPC clients, connection pools.
//
// It keeps the semantics of Netty's HashedWheelTimer (a tick, a wheel of
// buckets, new timeouts queued to the wheel's thread and moved into buckets
// at most TransferCap per tick, a cancel path, unprocessed timeouts returned
// on stop, a pending limit) and removes its single-thread ceiling: a
// Scheduler runs N independent wheels (shards), one goroutine each, by
// default one per P. A timer is filed in the wheel of the P its caller runs
// on; one scheduled with a key (ByKey, ScheduleKey) runs on the shard its
// key hashes to, and crosses to that shard only near its deadline. The
// returned Timer remembers the shard that filed its timer, so that
// Cancel and Reset go straight to it. A shard's goroutine never runs a
// task: it hands the due ones, in deadline order, to the shard's runner, a
// goroutine that runs them one at a time, so that the tasks of one key run
// one at a time, in deadline order (WithExecutor hands them elsewhere).
//
// # Scheduling
//
// Two verbs schedule a closure: AfterFunc runs it once, Every periodically;
// a Handler (a function registered once and called with each timer's
// argument) has the same two. Per-timer options say where and how
// precisely the timer runs, and cost nothing: by default it lives on the
// caller's shard, exact to the tick; ByKey(k) runs it on k's shard, one at
// a time with k's other tasks; Slack(d) lets a one-shot timer run up to d
// late where it costs the wheel least; OnMissed(p) says what a series does
// with the grid points it missed (SkipMissed by default).
//
// # Two kinds of timers
//
// AfterFunc and Every make plain timers: a key only picks the shard, keys
// need not be unique, and the Timer handle is the only way to cancel or
// reset the timer. ScheduleKey makes an indexed timer: the shard the key
// routes to also indexes it by key, at most one per key, so that CancelKey,
// ResetKey and Lookup reach it by key alone (a multiplexed client that
// learns of a response by its request id needs no map of its own), and
// ScheduleKey on a key replaces the key's pending indexed timer. Keyed
// calls never see plain timers. Both kinds have the same handles and
// guarantees, and Stop returns both.
//
// # Guarantees
//
//   - Never early: a task runs no earlier than the moment AfterFunc (or
//     Reset) was called plus its delay, on the monotonic clock.
//   - Bounded lateness: a task starts less than a tick after its deadline
//     (deadlines round up to the tick grid) plus its shard's tick lag, which
//     is near zero unless the shard's goroutine waits for a CPU, plus its
//     wait behind the tasks handed to its runner before it: a task that
//     holds those up for WithBlockedAfter (a tick by default) is left
//     behind, the others going on on another runner, so they wait about two
//     ticks at most, but the later timers of its own key wait until it
//     returns (see WithBlockedAfter); Stats shows it (Lateness).
//   - Exactly once: every timer accepted ends in exactly one way:
//     its task ran once, one Cancel returned true for it, or Stop claimed
//     it (returned it, or handed it over, or, for a series whose run is
//     handed out, left that run as its last: see Stop). Pending counts
//     the timers that have not ended yet.
//   - Stale handles are inert: once a timer has ended, its Timer reports
//     not pending, and Cancel and Reset on it return false, even after the
//     node behind it was reused for another timer.
//   - delay <= 0 runs at the first tick at or after the call (the next
//     tick, unless the call falls exactly on a tick's start); a delay
//     beyond MaxDelay is clamped to MaxDelay (795 days at a 1ms tick, 21.8
//     years at 10ms).
//   - A panicking task is recovered and reported to the panic handler; the
//     tasks behind it run. So do those behind a task that calls
//     runtime.Goexit (reported as ErrTaskGoexit), and those of other keys
//     behind a task that blocks (WithBlockedAfter). No task touches the
//     wheel.
//
// # Contexts
//
// WithTimeout, WithDeadline and their Cause variants are the context
// package's functions of the same names with the deadline kept in the
// wheel: a one-line swap for a proxy's or an RPC client's per-request
// deadline, at two allocations and no goroutine per context. A deadline is
// never lost: where the wheel cannot hold it the context package's own
// function takes over, and Stop hands the timers of live contexts to the
// runtime's timers.
//
// # Cost
//
// AfterFunc, Cancel and Reset are lock-free and allocate nothing in steady
// state (the caller's closure aside): nodes live in per-shard pools,
// pointer-free so that the garbage collector skips them. A Handler, a task
// registered once and called with each timer's key, removes the closure
// too: such a timer is its node alone. AfterFunc files a timer in the
// wheel of the caller's P, taking that wheel with one compare-and-swap, so
// that a timer set and cancelled on one goroutine usually stays on its
// core; Cancel is two compare-and-swaps on the timer's node (dropping its
// task between them), whichever P calls it. A timer with a key is filed
// the same way and crosses to its key's shard, through that shard's queue,
// only as it comes near its deadline: one cancelled before costs what an
// AfterFunc timer costs. A tick costs work only for timers that are due:
// each shard is a hierarchical wheel, and an idle shard sleeps until its
// next due slot, or parks when it has none. After a spike of timers has
// ended, each shard gives back the storage its wheel no longer needs
// (stats.Shard.NodesAllocated states the bound).
//
// # The execution tracer
//
// While runtime/trace is on, each pass of a shard goroutine is a region of
// type TraceRegionPass, with what the pass did logged in it: go tool trace
// shows a late tick beside the goroutine that held the CPU meanwhile.
package shardwheel
