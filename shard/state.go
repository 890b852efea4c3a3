package shard

import (
	"fmt"
	"time"

	"github.com/shardwheel/shardwheel/pool"
)

// # The node state machine
//
// A node's state word is one 64-bit value, changed only by CAS (or a plain
// store by the producer that owns a node it has just taken from the pool):
//
//	bits 63..42  tag      low 22 bits of the node's generation
//	bit  41      indexed  set by ScheduleIndexed; cleared only by CancelUnindexed
//	bit  40      flag     queuedBit for pending and terminal states (the
//	                      node is on the attention stack); delayInTicksBit
//	                      for unresolved ones (the delay is in ticks)
//	bits 39..38  status   unresolved, pending, fired, cancelled
//	bits 37..0   ticks    pending and later: deadline tick modulo 2^38;
//	                      unresolved: the delay (ns, or ticks)
//
// Where the node is, the worker knows from two worker-only fields: Prev (0:
// not in the wheel; detached: out of the wheel but still on the attention
// stack; anything else: linked in a slot) and whether it still sits in a
// lane's incoming queue or the batch being transferred (then Prev is 0).
// Together, the states a node goes through in one life are:
//
//	name          status      flag    Prev      in queue  free-list link
//	free          (old)       -       0         no        next free node
//	new           unresolved  ticks?  0         yes       -
//	reset-new     pending     queued? 0         yes       attention if queued
//	filed         pending     queued? slot      no        attention if queued
//	ended-new     fired/canc. queued? 0         yes       attention if queued
//	ended-filed   cancelled   queued? slot      no        attention if queued
//	detached      fired/canc. queued  detached  no        attention
//
// and the transitions, each a named function below:
//
//	free -> new                 schedule     producer (plain store)
//	new -> reset-new            reset        any goroutine
//	new -> filed                resolve      worker, on transfer
//	reset-new -> filed          (file)       worker, on transfer
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

	// queuedBit, in a pending or terminal state, marks a node that is on
	// the attention stack.
	queuedBit = 1 << 40
	// delayInTicksBit, in an unresolved state, says that the delay field
	// counts ticks rather than nanoseconds. It is the same bit as
	// queuedBit: an unresolved node is never queued.
	delayInTicksBit = queuedBit
	// indexedBit marks a timer that Config.Unindex must hear of when the
	// worker frees its node.
	indexedBit = 1 << 41
)

// Status values. The zero value, unresolved, is what a producer writes when
// it takes a node: the node carries a relative delay, not yet a deadline.
const (
	statusUnresolved = iota
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
func (s state) queued() bool {
	return uint64(s)&queuedBit != 0 && s.status() != statusUnresolved
}

// to returns s moved to status, keeping the flag bit only where it means
// queued.
func (s state) to(status uint64) state {
	return s.with(status).withQueued(s.queued())
}

func (s state) with(status uint64) state {
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

// newState returns the state a producer stores for a new timer (schedule).
// Delays of 2^38 ns (4m34s) or more are kept in ticks, rounded up: the timer
// may run up to a tick later, never earlier.
func newState(gen uint32, delay time.Duration, tick int64) state {
	if delay < 1<<ticksBits {
		return makeState(gen, statusUnresolved, uint64(delay))
	}
	ticks := (int64(delay) + tick - 1) / tick
	return makeState(gen, statusUnresolved, uint64(ticks)) | delayInTicksBit
}

// delay returns an unresolved state's delay: in nanoseconds, or in ticks
// (inTicks) for long delays.
func (s state) delay() (v int64, inTicks bool) {
	return int64(s.ticks38()), uint64(s)&delayInTicksBit != 0
}

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
// may sit in the wheel: a pending node that is not queued already (an
// unresolved one is still in a queue, where the worker will find it
// cancelled).
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
	ns := s.withTicks(statusPending, t).withQueued(s.queued() || needsQueue)
	return n.State.CompareAndSwap(uint64(s), uint64(ns)), needsQueue
}

// resolve gives an unresolved timer its deadline tick t. Worker only.
func resolve(n *pool.Node, s state, t uint64) (state, bool) {
	ns := s.withTicks(statusPending, t).withQueued(false)
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
