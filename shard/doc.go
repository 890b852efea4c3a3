// Package shard is one timer wheel and the goroutine that drives it: the unit
// that package shardwheel replicates once per CPU.
//
// # Reading order
//
// Producers (any goroutine) call the methods in producer.go (Schedule,
// Cancel, Reset, Pending, Deadline), quota.go (pending tokens) and stop.go
// (Close, Drain). The worker goroutine runs loop.go (the pass and its sleep),
// transfer.go (new timers into the wheel), attention.go (cancels and early
// resets of filed timers), expire.go (due slots and tasks) and wheel.go (the
// wheel, which only it touches). state.go is the node state machine both
// sides share; ticks.go the clock arithmetic; verify.go the invariants.
//
// # Time and the wheel
//
// Time is counted in ticks from the shard's origin: tick k starts at
// origin + k*Tick. A timer due at time D is filed at tick ceil(D/Tick) and
// runs when the worker processes that tick, which it does only after its
// clock has reached the tick's start. Rounding up is what makes the headline
// guarantee hold: a timer never fires before its deadline.
//
// The wheel is hierarchical (see wheel): WheelSize slots per level, enough
// levels to cover twice maxDelayTicks = 2^36 ticks; longer delays are
// clamped to that horizon. With the default 512 slots (the table is checked
// against the constants by TestRangeTable):
//
//	level  slot width    range at 1ms tick    range at 10ms tick
//	0      1 tick        512ms                5.12s
//	1      2^9 ticks     4m22s                43m41s
//	2      2^18 ticks    37h16m               15.5 days
//	3      2^27 ticks    795 days             21.8 years
//	4      2^36 ticks    (wrap guard only)    (wrap guard only)
//
// A timer is touched once when filed, at most once per level when its slot
// cascades, and once when it fires: the cost of a tick does not grow with
// timers that are not yet due, unlike Netty's single wheel whose every tick
// walks a bucket and decrements round counters.
//
// # Producers and the worker
//
// A producer takes a node from the shard's pool.Arena, fills it, and pushes
// it on its lane's incoming queue (ring.Queue, an unbounded intrusive MPSC
// list through the nodes): a push never blocks and never fails, so no
// Schedule, from any goroutine or task, waits for any worker. The node is
// "unresolved": it carries a delay, not a deadline, because reading the
// clock costs more than the rest of Schedule. The worker resolves it after
// taking it off the queue: it takes a batch first and reads the clock
// second, so the reading is later than every push it resolves, and
// deadline = reading + delay can only be late, never early. It moves at
// most TransferCap new timers into the wheel per tick; the rest wait in the
// queue, none lost.
//
// Cancel and Reset act on the node's state word with one CAS (see state.go)
// and never wait for the worker. When the node already sits in the wheel,
// Cancel (so that its memory is reclaimed now, not when its slot comes
// round) and a Reset to an earlier deadline (so that it is re-filed) push it
// on the attention stack, which the worker empties with one Swap per pass. A
// Reset to a later deadline only rewrites the state word: the worker finds
// the node in its old slot, sees the later deadline and re-files it, as
// tokio does.
//
// The worker sleeps until the earliest occupied slot; when nothing is due
// and the queues are empty it parks, and the first producer to see the
// parked flag wakes it. An idle shard therefore costs nothing.
//
// # Lateness
//
// A timer waits in its queue until the worker's next pass (at most one tick
// while the shard is ticking, or the wake-up latency when it was parked),
// then rounding to the tick grid adds less than one tick: a timer normally
// runs between 0 and 2 ticks after its deadline, plus any time the worker
// spends behind (tick lag).
package shard
