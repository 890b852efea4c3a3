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
// guarantee hold: a timer never fires before its deadline. D is the clock
// reading Schedule (or Reset) takes plus the delay: the deadline is anchored
// at the call, not at the moment the worker sees the timer.
//
// The wheel is hierarchical (see wheel): WheelSize slots per level, read as
// rings; level l's slots are (WheelSize/2)^l ticks wide, and enough levels
// reach twice maxDelayTicks = 2^36 ticks; longer delays are clamped to that
// horizon. With the default 512 slots (the table is checked against the
// constants by TestRangeTable):
//
//	level  slot width    reach at 1ms tick    reach at 10ms tick
//	0      1 tick        512ms                5.12s
//	1      2^8 ticks     2m11s                21m50s
//	2      2^16 ticks    9h19m                93h12m
//	3      2^24 ticks    99.4 days            994 days
//	4      2^32 ticks    795 days (MaxDelay)  21.8 years (MaxDelay)
//
// A timer is touched once when filed, at most once per level as it moves
// down, and once when it fires: the cost of a tick does not grow with
// timers that are not yet due, unlike Netty's single wheel whose every tick
// walks a bucket and decrements round counters. A level's ring is twice as
// long as a slot of the level above, so a higher slot's timers fit into the
// level below one slot-width before the first of them is due; the worker
// moves them in shares over that window (as Erlang's timer wheel moves its
// "later" slots into its "soon" wheel), so no pass stalls on a cascade.
//
// # Producers and the worker
//
// A producer takes a node from the shard's pool.Arena, fills it (the
// deadline tick from its own clock reading), and pushes it on its lane's
// incoming queue (ring.Queue, an unbounded intrusive stack through the
// nodes, which the worker takes whole): a push never blocks and never
// fails, so no Schedule, from any goroutine or task, waits for any worker. The worker files new timers in
// the wheel on its passes: at most TransferCap per tick and passBudget per
// pass, passing again at once while more wait; the rest wait in the queue,
// none lost. A timer whose tick the worker has already processed (it waited
// in the queue, or was reset to an earlier deadline) runs at the start of
// the next pass, before elapsed moves on.
//
// Cancel and Reset act on the node's state word with one CAS (see state.go)
// and never wait for the worker. A Cancel of a new timer that is still the
// node its lane pushed last takes it back off the queue and frees it on its
// own core (takeBack): the worker never sees it. When the node already sits
// in the wheel, Cancel (so that its memory is reclaimed now, not when its
// slot comes round) and a Reset to an earlier deadline (so that it is
// re-filed) push it on the attention stack of the caller's lane, which the
// worker empties with one Swap per pass. A Reset to a later deadline only
// rewrites the state word: the worker finds the node in its old slot, sees
// the later deadline and re-files it, as tokio does.
//
// The worker sleeps until the next tick the wheel needs (a due slot, or a
// cascade window's opening and the ticks in it while the window holds more
// than one share). With no timers and empty queues it parks untimed, and
// the first producer to see the parked flag wakes it. An idle shard
// therefore costs nothing.
//
// # Lateness
//
// Rounding to the tick grid adds less than one tick: with the worker on
// time, a timer runs between 0 and 1 tick after its deadline. What comes on
// top is the worker's own lateness (tick lag): its timer's wake-up latency,
// the tasks it runs, and the processor it waits for. The last is the large
// one when producers keep every P busy, since Go preempts a running
// goroutine only after 10ms: a producer that finds the worker behind a
// tick therefore yields its P, once per tick (see yieldIfBehind).
package shard
