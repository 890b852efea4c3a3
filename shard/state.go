package shard

import "time"

// A node's state is one 64-bit word, changed only by CAS (or a plain store by
// the producer that owns a node it has just taken from the pool):
//
//	bits 63..41  tag      low 23 bits of the node's generation
//	bit  40      queued   pending and later: the node is on the attention
//	                      stack; unresolved: the delay is in ticks, not ns
//	bits 39..38  status   see below
//	bits 37..0   ticks    pending and later: deadline tick modulo 2^38;
//	                      unresolved: the delay (ns, or ticks if bit 40)
//
// Keeping an unresolved timer's delay in the state word saves the node a
// field and the producer a store. Delays of 2^38 ns (4m34s) or more are kept
// in ticks, rounded up: the timer may run up to a tick later, never earlier.
//
// The tag makes a CAS from a stale handle fail even though the node was
// recycled: a handle's CAS expects its own tag, and the node's full 32-bit
// generation (pool.Node.Gen) is checked first, so a stale handle could only
// win if 2^23 recycles of one node happened between two of its instructions.
//
// Status transitions (who performs each):
//
//	unresolved -> pending     worker, on transfer (deadline = clock + delay)
//	unresolved -> pending     Reset (deadline computed by the caller)
//	pending    -> pending     Reset (new deadline), worker (queued bit)
//	unresolved -> cancelled   Cancel, Stop, or a Schedule undone by Stop
//	pending    -> cancelled   Cancel, Stop
//	pending    -> fired       worker, when the deadline tick is reached
//
// fired and cancelled are terminal for a generation: the status never
// changes again (the worker may still clear the queued bit), and the worker
// returns the node to the pool exactly once.
const (
	ticksBits  = 38
	ticksMask  = 1<<ticksBits - 1
	statusShft = ticksBits
	queuedBit  = 1 << 40
	tagShift   = 41
	tagBits    = 64 - tagShift
	tagMask    = 1<<tagBits - 1
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

// to returns s moved to status, keeping the queued bit only where it means
// queued (an unresolved node's bit 40 is a delay unit, not a queue mark).
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

// unresolvedState returns the state a producer stores for a new timer.
func unresolvedState(gen uint32, delay time.Duration, tick int64) state {
	if delay < 1<<ticksBits {
		return makeState(gen, statusUnresolved, uint64(delay))
	}
	ticks := (int64(delay) + tick - 1) / tick
	return makeState(gen, statusUnresolved, uint64(ticks)) | queuedBit
}

// delay returns an unresolved state's delay: in nanoseconds, or in ticks
// (inTicks) for long delays.
func (s state) delay() (v int64, inTicks bool) {
	return int64(s.ticks38()), uint64(s)&queuedBit != 0
}

// unwrapTicks returns the full tick whose low 38 bits are t38 and which lies
// within 2^37 of ref.
func unwrapTicks(t38, ref uint64) uint64 {
	diff := int64((t38-ref)<<(64-ticksBits)) >> (64 - ticksBits)
	return ref + uint64(diff)
}
