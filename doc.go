// Package shardwheel is a sharded, lock-free timer scheduler for programs
// that keep millions of timeouts: proxies, RPC clients, connection pools.
//
// It keeps the semantics of Netty's HashedWheelTimer (a tick, a wheel of
// buckets, new timeouts moved into the wheel at most WithTransferCap per
// tick, a cancel path, unprocessed timeouts returned on stop, a pending limit)
// and removes its single-thread ceiling: a Scheduler runs N hierarchical
// wheels (shards), by default one per P, each driven by a goroutine of its
// own. A shard's goroutine never runs a task: it hands the due ones, in
// deadline order, to a runner, a goroutine that runs them one at a time
// (WithExecutor hands them elsewhere).
//
// # Scheduling
//
// AfterFunc runs a closure once, Every periodically; a Handler, a function
// registered once and called with each timer's argument, has the same two
// and holds no closure per timer. Options on the call place and time that
// one timer, without allocating: by default it lives on the caller's
// shard, exact to the tick; ByKey(k) runs it on k's shard, a one-shot
// timer's task one at a time, in deadline order, with k's other one-shot
// tasks; Slack(d) lets a one-shot timer run up to d
// late, where it costs the wheel least; OnMissed says what a series does
// with the grid points it missed. OnPlan runs a closure at the points a
// Plan of the caller's gives (a calendar, a backoff). The Timer returned
// cancels, resets and
// describes its timer. An Index (NewIndex) keeps at most one timer per key
// of any comparable type, so that Cancel, Reset and Lookup reach it by
// key alone, and All lists them.
// WithTimeout, WithDeadline and their Cause variants are the context
// package's functions with the deadline kept in the wheel, at two
// allocations and no goroutine per context.
//
// # Guarantees
//
//   - Never early: a task runs no earlier than its call (or Reset) plus
//     its delay, on the monotonic clock.
//   - Bounded lateness: a task starts less than a tick after its deadline
//     (deadlines round up to the tick grid) plus its shard's tick lag and
//     its wait behind the tasks handed to its runner before it, which
//     WithBlockedAfter bounds for every key but a blocked task's own;
//     Stats reports it (Lateness).
//   - Exactly once: every timer accepted ends in exactly one way: its task
//     ran once, one Cancel returned true for it, or Stop claimed it (see
//     Stop for a series whose run is handed out).
//   - Stale handles are inert: once a timer has ended, Cancel and Reset on
//     its Timer return false, even after its node was reused.
//   - A panicking task, or one that calls runtime.Goexit, is reported to
//     the panic handler; the tasks behind it run. No task touches a wheel.
//
// # Cost
//
// AfterFunc, Cancel and Reset are lock-free and allocate nothing in steady
// state (the caller's closure aside): nodes live in per-shard pools,
// pointer-free so that the garbage collector skips them. A timer set and
// cancelled on one goroutine usually stays on its core; a one-shot timer
// with a key crosses to its key's shard only as it comes near its
// deadline. An idle
// shard sleeps until its next due slot, or parks, and after a spike each
// shard gives back the storage it no longer needs.
//
// While runtime/trace is on, each pass of a shard goroutine is a region of
// type TraceRegionPass: go tool trace shows a late tick beside the
// goroutine that held the CPU meanwhile.
package shardwheel
