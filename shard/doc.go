// Package shard is one timer wheel, the goroutine that drives it, and the
// lock-free ways in: the unit that package shardwheel runs once per P.
//
// It is part of shardwheel's engine: its API serves package shardwheel and
// carries no compatibility promise. Users use package shardwheel.
//
// # Reading order
//
// own.go says who may touch the wheel: whoever holds it, having taken the
// owner word with one CAS. producer.go is what any goroutine calls
// (Schedule, Cancel, Reset, Pending, Deadline); tokens.go the pending
// limit; stop.go Stop's side (Close, Drain). A holder files timers
// (node.go), takes in the queue (transfer.go) and earlier Resets
// (attention.go), and pays the sweep its share (sweep.go). The shard
// goroutine runs loop.go (its pass and sleep) and expire.go (due slots,
// tasks, cascades). wheel.go is the wheel itself, state.go the node state
// machine every side shares, ticks.go the clock arithmetic, verify.go the
// invariants.
//
// # Time and the wheel
//
// Time is counted in ticks from the shard's origin: tick k starts at
// origin + k*Tick. A timer due at time D is filed at tick ceil(D/Tick) and
// runs when the shard goroutine processes that tick, which it does only
// after its clock has reached the tick's start. Rounding up is what makes
// the headline guarantee hold: a timer never fires before its deadline. D
// is the clock reading Schedule (or Reset) takes plus the delay: the
// deadline is anchored at the call, not at the moment the wheel files it.
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
// level below one slot-width before the first of them is due; the shard
// goroutine moves them in shares over that window (as Erlang's timer wheel
// moves its "later" slots into its "soon" wheel), so no pass stalls on a
// cascade.
//
// # A wheel per P
//
// Package shardwheel gives each P a shard of its own: a timer without a
// key (AfterFunc, the context functions) goes to the wheel of the P its
// Schedule runs on, where its whole life usually stays. The wheel is held
// by one goroutine at a time (own.go): a Schedule takes it with one CAS,
// files its own timer, and lets go. Nobody waits for it: a Schedule that
// finds it held, or that comes from another P (a keyed timer routed here),
// pushes its node on the shard's queue, a lock-free stack, and the holder
// takes the queue in before it lets go, or the shard's own P at its next
// Schedule, or the shard goroutine at its next pass, at most TransferCap
// timers per tick.
//
// Cancel is one CAS on the node's state word (to cancelling), the closure
// dropped so that the garbage collector may take it, and a CAS to
// cancelled: no lock, no queue, nothing for the shard goroutine to do. The
// node stays where it is until a holder meets it: in its slot, in a
// cascade, or in the sweep (sweep.go), a linear walk of the arena that the
// holders pay for a few nodes per timer they file, which bounds the
// cancelled nodes a wheel holds. A Cancel right after its Schedule, from
// the same P, takes the node straight back instead (takeBack). Reset to a
// later deadline rewrites the state word: the holder finds the node in its
// old slot and moves it on. Reset to an earlier one pushes it on the
// attention stack, which holders take in like the queue.
//
// The shard goroutine holds the wheel for its passes: it runs what is due,
// moves higher slots down, takes in the queue and pays a share of the
// sweep. It sleeps until the next tick the wheel needs (a due slot, or a
// cascade window's opening and the ticks in it while the window holds more
// than one share), or parks untimed with nothing filed; a holder that files
// a timer due before the goroutine's planned wake wakes it (wakeFor). An
// idle shard costs nothing.
//
// # Who touches which cache line
//
// Per step of a timer's life, on the delayed-cancel load shardwheel is
// judged on (a request timeout cancelled tens of milliseconds later): the
// lines touched and who wrote them last. "Own P" is the P whose shard
// holds the wheel; the shard goroutine usually runs there too.
//
//	step      without a key (own P's wheel)               with a key, from another P
//	schedule  own (CAS, Swap), the node (state, task),    the node, taken from this P's lane of the
//	          the slot's tail node and slot list, the     shard's arena (lane line: this P's); the
//	          free list head: all last written by this    queue head (CAS): last written by pushers
//	          P (its holders, its goroutine's frees).     of any P. One cross-core line.
//	file      (in the schedule, above)                    the shard's own P or goroutine takes the
//	                                                      queue in: the node's line, written by the
//	                                                      pusher on its P. One miss there.
//	cancel    the node's state (2 CAS) and task slot;     the same two lines, last written by the
//	          this P's lane counter. Take-back: own too.  node's P: two misses.
//	sweep     the holder walks the arena (lines last      the same, on the shard's own P.
//	          written by this P, or by a canceller's
//	          CAS on another P) and unlinks cancelled
//	          nodes (neighbours' lines).
//	free      the holder's free list (Next, in the node), the same, on the shard's own P.
//	          on the holder's P.
//	reuse     the next Schedule on this P takes the node  the pusher takes from its own lane of the
//	          from the holder's list: written by this P.  arena's shared lists, which holders feed
//	          Past ownFreeMax nodes, that list spills     when they run dry (share) and when their
//	          to the arena's shared lists.                own lists grow long (spill).
//	expire    the shard goroutine: the slot list and the  the same: the key's shard's goroutine.
//	          nodes due (written by their schedulers or
//	          the last cascade), the task.
//
// A timer that stays on its P touches no line another core wrote, but when
// a Cancel comes from another P (a goroutine that migrated), or the shard
// goroutine runs on another core. A keyed timer crosses twice: its push
// and its Cancel.
//
// # Lateness
//
// Rounding to the tick grid adds less than one tick: with the shard
// goroutine on time, a timer runs between 0 and 1 tick after its deadline.
// What comes on top is that goroutine's own lateness (tick lag): its
// timer's wake-up latency, the tasks it runs, and the processor it waits
// for. The last is the large one when producers keep every P busy, since
// Go preempts a running goroutine only after 10ms: a producer that finds
// the shard goroutine behind a tick therefore yields its P, once per tick
// (see yieldIfBehind). As the holders file, cancel and sweep, the shard
// goroutine's work is only the timers that come due, so it keeps up however
// many goroutines schedule.
package shard
