package shard

import (
	"fmt"

	"github.com/shardwheel/shardwheel/pool"
)

// # The node state machine
//
// A node's state word is one 64-bit value, changed only by CAS (or a plain
// store by the producer that owns a node it has just taken from the pool):
//
//	bits 63..42  tag      low 22 bits of the node's generation
//	bit  41      indexed  set by ScheduleIndexed; cleared only by CancelUnindexed
//	bit  40      queued   the node is on the attention stack
//	bits 39..38  status   new, pending, fired, cancelled
//	bits 37..0   ticks    deadline tick modulo 2^38
//
// The producer computes the deadline tick from its own clock reading when
// it schedules, as Netty, Go's runtime and tokio do: a deadline is anchored
// at the call, however late the worker picks the timer up. "new" means
// "not yet in the wheel": Cancel and Reset of a new timer need not tell the
// worker, which files or frees it when it takes it off its queue.
//
// Where the node is, the worker knows from two worker-only fields: Prev (0:
// not in the wheel; detached: out of the wheel but still on the attention
// stack; anything else: linked in a slot) and whether it still sits in a
// lane's incoming queue or the batch being transferred (then Prev is 0).
// Together, the states a node goes through in one life are:
//
//	name          status      queued  Prev      in queue  free-list link
//	free          (old)       -       0         no        next free node
//	new           new         no      0         yes       -
//	filed         pending     ?       slot      no        attention if queued
//	ended-new     cancelled   no      0         yes       -
//	ended-filed   cancelled   ?       slot      no        attention if queued
//	detached      fired/canc. yes     detached  no        attention
//
// and the transitions, each a named function below:
//
//	free -> new                 schedule     producer (plain store)
//	new -> new                  reset        any goroutine (deadline only)
//	new -> filed                settle       worker, on transfer
//	filed -> filed              reset        any goroutine (deadline, queued)
//	*-new, filed -> ended-*     cancel       any goroutine; Drain; Schedule undone by Stop
//	filed -> fired, detached    fire         worker, when its tick comes
//	any with queued -> same     dequeue      worker, taking it off the attention stack
//	ended-*, detached -> free   (free)       worker, exactly once, when it is in
//	                                         no list: not queued, not in a queue
//
// fired and cancelled are terminal for a generation: the status never
// changes again (the worker may still clear the queued bit).
//
// The tag makes a CAS from a stale handle fail even though the node was
// recycled: a handle's CAS expects its own tag, and the node's full 32-bit
// generation (pool.Node.Gen) is checked first, so a stale handle could only
// win if 2^22 recycles of one node happened between two of its instructions.
//
// indexedBit is written by the producer's store and kept by every
// transition but a cancel from CancelUnindexed, which clears it: the worker
// reads it when it frees the node, to call Config.Unindex (see free).
const (
	ticksBits  = 38
	ticksMask  = 1<<ticksBits - 1
	statusShft = ticksBits
	tagShift   = 42
	tagBits    = 64 - tagShift
	tagMask    = 1<<tagBits - 1

	// queuedBit marks a node that is on the attention stack.
	queuedBit = 1 << 40
	// indexedBit marks a timer that Config.Unindex must hear of when the
	// worker frees its node.
	indexedBit = 1 << 41
)

// Status values. new is what a producer writes when it takes a node.
const (
	statusNew = iota
	statusPending
	statusFired
	statusCancelled
)

// maxDelayTicks bounds every deadline's distance from the wheel's elapsed
// tick so that 38-bit modular ticks compare unambiguously (|diff| < 2^37) and
// so that the wheel's top level never wraps onto a live slot.
const maxDelayTicks = 1 << 36

type state uint64

func makeState(gen uint32, status uint64, ticks uint64) state {
	return state(uint64(gen&tagMask)<<tagShift | status<<statusShft | ticks&ticksMask)
}

func (s state) status() uint64  { return uint64(s) >> statusShft & 3 }
func (s state) ticks38() uint64 { return uint64(s) & ticksMask }
func (s state) live() bool      { return s.status() <= statusPending }
func (s state) tagOK(g uint32) bool {
	return uint64(s)>>tagShift == uint64(g&tagMask)
}

// queued reports whether the node is on the attention stack.
func (s state) queued() bool { return uint64(s)&queuedBit != 0 }

// to returns s moved to status; the queued bit stays as it was.
func (s state) to(status uint64) state {
	return state(uint64(s)&^(3<<statusShft) | status<<statusShft)
}

func (s state) withTicks(status, ticks uint64) state {
	return state(uint64(s)&^(3<<statusShft|ticksMask) | status<<statusShft | ticks&ticksMask)
}

func (s state) withQueued(q bool) state {
	if q {
		return s | queuedBit
	}
	return s &^ queuedBit
}

// newState returns the state a producer stores for a new timer due at
// tick t (schedule).
func newState(gen uint32, t uint64) state { return makeState(gen, statusNew, t) }

// unwrapTicks returns the full tick whose low 38 bits are t38 and which lies
// within 2^37 of ref.
func unwrapTicks(t38, ref uint64) uint64 {
	diff := int64((t38-ref)<<(64-ticksBits)) >> (64 - ticksBits)
	return ref + uint64(diff)
}

// Transitions. Each is one CAS from the state s the caller loaded; false
// means another goroutine changed the state first, and the caller reloads.

// cancel moves a live timer to cancelled, clearing the bits in drop (0, or
// indexedBit). It asks for the attention stack (needsQueue) when the node
// may sit in the wheel: a pending node that is not queued already (a new
// one is still in a queue, where the worker will find it cancelled).
func cancel(n *pool.Node, s state, drop state) (ok, needsQueue bool) {
	needsQueue = s.status() == statusPending && !s.queued()
	ns := s.to(statusCancelled).withQueued(s.queued() || needsQueue) &^ drop
	return n.State.CompareAndSwap(uint64(s), uint64(ns)), needsQueue
}

// reset gives a live timer the deadline tick t. It asks for the attention
// stack when the deadline moves earlier than where a pending node may be
// filed; a later deadline is found lazily when the old slot comes due.
func reset(n *pool.Node, s state, t uint64) (ok, needsQueue bool) {
	if s.status() == statusPending {
		needsQueue = t < unwrapTicks(s.ticks38(), t) && !s.queued()
	}
	ns := s.withTicks(s.status(), t).withQueued(s.queued() || needsQueue)
	return n.State.CompareAndSwap(uint64(s), uint64(ns)), needsQueue
}

// settle marks a new timer as filed in the wheel, so that from now on a
// Cancel or an earlier Reset tells the worker. Worker only.
func settle(n *pool.Node, s state) (state, bool) {
	ns := s.to(statusPending)
	return ns, n.State.CompareAndSwap(uint64(s), uint64(ns))
}

// fire moves a pending timer whose tick has come to fired. Worker only.
func fire(n *pool.Node, s state) (state, bool) {
	ns := s.to(statusFired)
	return ns, n.State.CompareAndSwap(uint64(s), uint64(ns))
}

// dequeue clears the queued bit of a node the worker took off the attention
// stack and returns the state it left. Worker only.
func dequeue(n *pool.Node) state {
	for {
		s := state(n.State.Load())
		ns := s.withQueued(false)
		if n.State.CompareAndSwap(uint64(s), uint64(ns)) {
			return ns
		}
	}
}

// badNode reports a node in a state the worker can never legally see: the
// state machine is corrupt and continuing would lose or duplicate timers.
// Every corruption check ends here.
func badNode(idx uint32, s state, why string) {
	panic(fmt.Sprintf("shardwheel: corrupt timer node %d in status %d: %s", idx, s.status(), why))
}
