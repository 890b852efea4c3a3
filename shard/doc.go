// Package shard is one timer wheel, the goroutine that drives it, and the
// lock-free ways in: the unit that package shardwheel runs once per P.
//
// It is part of shardwheel's engine: its API serves package shardwheel and
// carries no compatibility promise. Users use package shardwheel.
//
// # Reading order
//
// shard.go is the Shard and New, config.go its Config; own.go says who may
// touch the wheel: whoever holds it, having taken the owner word with one
// CAS. producer.go is what any goroutine calls to file a timer (Schedule,
// Pending, Deadline), cancel.go to end or move one (Cancel, Reset);
// tokens.go the pending limit; stop.go Stop's side (Close, Drain);
// stats.go the counters and what readers see. A holder files timers
// (node.go), takes its free nodes from its own list, sized by reserve.go,
// takes in the queue (transfer.go) and earlier Resets (attention.go), pays
// the sweep its share (sweep.go, ahead.go), and hands timers with a key to
// their key's shard (cross.go), where proxies stand for them (proxy.go).
// The shard goroutine runs loop.go (its pass, plan and sleep) and
// expire.go (due slots, cascades), periodic.go for series, slack.go for
// timers with slack, and passes.go, which records its passes (and shows
// them to the execution tracer). It never runs a task: it hands each due
// one to the shard's runner (runner.go), which runs it (run.go, with the
// table of Handler tasks), the run published for CancelWait first
// (cancelwait.go, runtable.go); a runner held up by a blocked task is left
// behind it, the task's key held back (blocked.go). wheel.go is the wheel
// itself and next.go what it needs next, state.go the node state machine
// every side shares, clock.go the clocks and the tick arithmetic, Refs
// among it, gtoken.go goroutine identities and the P a goroutine runs on,
// verify*.go the invariants and who writes which cache line.
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
// Package shardwheel gives each P a shard of its own: a timer goes to the
// wheel of the P its Schedule runs on, where its whole life usually
// stays, with a key or without. The wheel is held by one goroutine at a
// time (own.go): a Schedule takes it with one CAS, files its own timer,
// and lets go. Nobody waits for it: a Schedule that finds it held pushes
// its node on the shard's queue, a lock-free stack, and the holder takes
// the queue in before it lets go, or the shard's own P at its next
// Schedule, or the shard goroutine at its next pass, at most TransferCap
// timers per tick.
//
// A timer with a key (Request.Routed) belongs to the shard its key routes
// to: its task runs on that shard's runner. It is filed on the
// caller's wheel all the same, and crosses only when it comes near its
// deadline (cross.go): most such timers are cancelled long before, and
// never cross. Periodic timers with a key (Every) are filed on their
// key's shard from the start, through its queue.
//
// Cancel is two CASes on the node's state word (to cancelling, then to
// cancelled, the closure dropped in between so that the garbage collector
// may take it): no lock, no queue, nothing for the shard goroutine to do.
// The node stays where it is until a holder meets it: in its slot, in a
// cascade, or in the sweep (sweep.go), a linear walk of the arena that the
// holders pay for a few nodes per timer they file, which bounds the
// cancelled nodes a wheel holds. A Cancel right after its Schedule, from
// the same P, takes the node straight back instead (takeBack). Reset to a
// later deadline rewrites the state word: the holder finds the node in its
// old slot and moves it on. Reset to an earlier one pushes it on the
// attention stack, which holders take in like the queue.
//
// The shard goroutine holds the wheel for its passes: it fires what is due
// and hands the tasks to the runner, moves higher slots down, takes in the
// queue and pays a share of the sweep. No user code runs in a pass, so a
// pass's work is bounded, and the shard goroutine is one goroutine for the
// shard's whole life. It sleeps until the next tick the wheel needs (a due slot, or a
// cascade window's opening and the ticks in it while the window holds more
// than one share), or parks untimed with nothing filed; a holder that files
// a timer due before the goroutine's planned wake re-arms its alarm
// (wakeFor). Nothing else moves the plan: a Cancel or a later Reset of the
// timer it sleeps for leaves it, the goroutine wakes at that tick, frees
// what ended and plans again, as a stopped runtime timer still wakes its
// P. An idle shard costs nothing.
//
// # Who touches which cache line
//
// A Shard is one allocation of over 32 KiB, so the runtime places it at
// the start of a page: its fields' cache lines follow from their offsets.
// They are grouped by who writes them, each group on lines of its own
// (TestLineTable reads this table and checks it against the offsets, and
// TestLineWriters, with the verify tag, its writers against those that a
// mixed load recorded: verify.go):
//
//	group      fields                      written by
//	fixed      cfg tick ticks origin       New; Close (closed), from any goroutine;
//	           lanes home id closed g      the goroutine as it starts and ends (g)
//	           lines alarm ownerExited
//	owner      own                         holders: the shard's P's Schedules and
//	                                       take-backs, the goroutine's passes; any
//	                                       goroutine that takes the wheel to file what
//	                                       it pushed (an earlier Reset, an indexed
//	                                       Cancel) or to take a timer back
//	queue      queue.in                    producers that find the wheel held; holders
//	                                       (the goroutine among them) taking it in
//	backlog    queue.first queue.last      holders, the goroutine among them
//	           attention.first
//	           attention.last
//	attention  attention.in                any goroutine: earlier Resets, indexed
//	                                       Cancels, runs of periodic timers,
//	                                       other shards' holders crossing timers here
//	                                       or handing them back; holders (the
//	                                       goroutine among them) taking it in
//	plan       sleepUntil plannedAt        the goroutine, each pass; holders and any
//	           runnerUntil                 goroutine whose wakeFor lowers sleepUntil
//	starved    starved                     producers whose lane ran low (other shards'
//	                                       holders crossing timers here among them);
//	                                       the holder that feeds it, the goroutine too
//	runs       stopped crossedFired        Stop; other shards' goroutines; CancelWait
//	           waiters notify claimed      callers (waiters, notify); the goroutines
//	           blockedNow refused          that run tasks (notify); the goroutine
//	           goroutines runners          (blockedNow, refused, runners)
//	executor   runTab runFree aborts       the goroutine, and the goroutines that run
//	           returned                    tasks (runner.go): once per run
//	holder     h                           holders: whoever holds the wheel, the
//	                                       goroutine too
//	goroutine  stats work lastTick         the goroutine; holders (the published
//	           lastPass                    count of timers filed at once, every 2^20);
//	                                       Stats readers (stats.scheduledSeen, by CAS)
//
// Beside the Shard: each lane (lane, one line, 64-byte aligned) is the
// counters and pending tokens of the goroutines on one P, which they
// write; the wheel (its own allocation, padded) is the holder's; the
// arena's header is written when it grows (its high-water mark, its block
// table) and read on every Schedule, Cancel, Reset and Pending, which find
// their node through it; each of its lanes' free lists is a line of its
// own, popped by the producers of that lane's P and fed by holders
// (share); nodes, their task slots and their links are the lines of the
// timers themselves.
//
// Per step, on the delayed-cancel load shardwheel is judged on (a request
// timeout cancelled tens of milliseconds later), from the P whose shard
// files the timer:
//
//   - Schedule (AfterFunc, or with a key): the fixed lines and plan (read),
//     owner (CAS, Swap), queue, attention and starved (read), the holder's
//     and the wheel's lines, a node from the holder's own free list and
//     its task slot, the slot's last node; the P's lane (read; written
//     when it takes a token, with WithMaxPending). All last written on
//     this P, but owner and plan by the goroutine once per pass, and
//     starved when a lane ran low.
//   - Cancel: the node (two CASes) and its task slot, the P's lane
//     (cancels); owner (read). From another P (a goroutine that
//     migrated), the node and task slot were last written there.
//     Take-back, from the shard's P: owner (CAS, Swap) and the holder's
//     lines too.
//   - Sweep: the holder walks the arena (lines last written on this P, or
//     by a Cancel on another), unlinks cancelled nodes (their neighbours'
//     lines) and frees them onto its own free list, where the next
//     Schedule on this P takes them.
//   - Expire: the shard goroutine (on whichever P runs it: it follows
//     whoever wakes it) holds the wheel: owner, the holder's and wheel's
//     lines, the nodes due (written by their schedulers), their task
//     slots, a run record and its slot of the run table, the runner's ring;
//     the runner (another goroutine, often on another P) the run record,
//     the task, and the executor lines as it gives the record back.
//   - A timer with a key, near its deadline, crossing to shard K: a node
//     of K's arena from the crossing P's lane of K's free lists, K's queue
//     (a CAS), K's plan (wakeFor); K's holder takes it in (its backlog,
//     the proxy's line, the timer's node), and K's goroutine runs it and
//     hands the node back on this shard's attention stack. Timers
//     cancelled before they come near touch nothing of K's.
//   - An Index's AfterFunc and Every add their key's entries: a bucket
//     of the part of the Index of the shard the key's hash routes to, and
//     one of the part of the shard the timer is filed on, wherever the
//     caller runs (package shardwheel's index.go).
//   - Readers (Pending, Stats): every shard's owner, runs and goroutine
//     lines (its published counts) and lanes, read only: they write
//     nothing a Schedule or Cancel writes. Stats may signal an idle shard
//     goroutine to publish its counts.
//
// # Lateness
//
// Rounding to the tick grid adds less than one tick: with the shard
// goroutine on time, a timer fires between 0 and 1 tick after its
// deadline. What comes on top is that goroutine's own lateness (tick lag):
// its timer's wake-up latency and the processor it waits for, the large
// one when producers keep every P busy, since Go preempts a running
// goroutine only after 10ms: a producer that finds the shard goroutine
// behind a tick therefore yields its P, once per tick (see yieldIfBehind).
// As the holders file, cancel and sweep, the shard goroutine's work is
// only the timers that come due, so it keeps up however many goroutines
// schedule. Then a task waits on its runner behind the tasks handed before
// it: runner.go bounds that wait for other keys' tasks.
package shard
