// Package ring holds the lock-free lists by which timer nodes reach the
// goroutine that holds a shard's wheel: Stack, a multi-producer stack whose
// consumer takes everything at once, and Queue, a Stack with the consumer's
// backlog, which hands nodes out oldest first. Both are threaded through
// the nodes' links (pool.Arena.Link), so they never fill, never drop, never
// make a producer wait for the consumer, and cost no memory beyond a small
// header: their capacity is the node pool's.
//
// It is part of shardwheel's engine: its API serves package shard and
// carries no compatibility promise. Users use package shardwheel.
//
// # Algorithm
//
// A push is one CAS on the head (Treiber's stack); the consumer takes the
// whole stack with one Swap. Since nothing but that Swap ever removes a
// node, a push needs no ABA tag: if the head it loaded is the head again
// when its CAS runs, the node it names is on the stack, whatever happened
// in between, and linking to it is right.
//
// # Ordering
//
//  1. A producer writes the node's fields, then its link, then the CAS that
//     publishes it.
//  2. The consumer's Swap takes the stack; Go's atomics are sequentially
//     consistent, so every write of step 1 for every node it took is
//     visible to the consumer after the Swap, links included.
//
// # Ownership
//
// head is written by producers (CAS) and the consumer (Swap), on a cache
// line of its own. Queue's backlog (first, last) belongs to the consumer,
// on another line, so that pops do not invalidate the line every push
// writes. In package shard the consumer is whoever holds the wheel: holders
// follow one another through the wheel's owner word, whose CAS and Swap
// order each holder's use of the backlog after the previous one's.
package ring

import (
	"sync/atomic"

	"github.com/shardwheel/shardwheel/internal/pad"
	"github.com/shardwheel/shardwheel/internal/stress"
	"github.com/shardwheel/shardwheel/pool"
)

// Stack is a lock-free stack of pool nodes that its consumer empties at
// once. Any number of goroutines may Push and call Waiting concurrently;
// TakeAll may run concurrently with them, by one goroutine at a time. The
// zero Stack is empty. A node may be on at most one list at a time. A Stack
// must not be copied after first use.
type Stack struct {
	head atomic.Uint32 // index of the node pushed last; 0 when empty
	_    [pad.CacheLineSize - 4]byte
}

// Push puts node idx on the stack; link is its link (pool.Arena.Link(idx)).
// It never blocks and never fails: a CAS that loses to another push or a
// take retries.
func (s *Stack) Push(idx uint32, link *atomic.Uint32) {
	for {
		h := s.head.Load()
		link.Store(h) // before the CAS that publishes the node (ordering step 1)
		stress.Point()
		if s.head.CompareAndSwap(h, idx) {
			return
		}
	}
}

// Waiting reports whether nodes were pushed that no TakeAll has taken yet.
// Any goroutine may call it.
func (s *Stack) Waiting() bool { return s.head.Load() != 0 }

// TakeAll empties the stack and returns the node pushed last, whose links
// lead to the first, or 0 if the stack was empty.
func (s *Stack) TakeAll() uint32 {
	if s.head.Load() == 0 {
		return 0 // a load is cheaper than a Swap on an empty stack
	}
	stress.Point()
	return s.head.Swap(0)
}

// Queue is an unbounded lock-free multi-producer queue of pool nodes with
// one consumer at a time: a Stack whose consumer reverses what it takes
// into a backlog and hands nodes out oldest first. Any number of
// goroutines may call Push and Waiting concurrently; only one goroutine at
// a time may call TryPop and Empty, and successive consumers must be
// ordered by a happens-before edge (see the package comment). The zero
// Queue is empty. It must not be copied after first use.
type Queue struct {
	in Stack // producers' line
	// Consumer's line: the backlog, oldest first, linked through the
	// nodes' links; 0 when empty.
	first, last uint32
	_           [pad.CacheLineSize - 8]byte
}

// Push appends node idx, whose link is link. It never blocks and never
// fails.
func (q *Queue) Push(idx uint32, link *atomic.Uint32) { q.in.Push(idx, link) }

// Waiting reports whether nodes were pushed that the consumer has not
// taken into its backlog yet. Any goroutine may call it; it does not look
// at the backlog, which only the consumer sees.
func (q *Queue) Waiting() bool { return q.in.Waiting() }

// TryPop removes and returns the oldest element, or reports false if the
// queue is empty. Elements pushed by one goroutine come out in the order it
// pushed them. Consumer only.
func (q *Queue) TryPop(a *pool.Arena) (uint32, bool) {
	if q.first == 0 && !q.take(a) {
		return 0, false
	}
	idx := q.first
	if idx == q.last {
		q.first, q.last = 0, 0
	} else {
		q.first = a.Link(idx).Load()
	}
	return idx, true
}

// take moves the stack into the (empty) backlog, oldest first, and reports
// whether there was anything to move.
func (q *Queue) take(a *pool.Arena) bool {
	top := q.in.TakeAll()
	if top == 0 {
		return false
	}
	// Reverse the chain: the stack's top is the newest.
	var prev uint32
	q.last = top
	for idx := top; idx != 0; {
		link := a.Link(idx)
		next := link.Load()
		link.Store(prev)
		prev, idx = idx, next
	}
	q.first = prev
	return true
}

// Backlogged reports whether the consumer's backlog holds nodes it took
// but has not popped. Consumer only.
func (q *Queue) Backlogged() bool { return q.first != 0 }

// Empty reports whether the queue holds no element. Consumer only.
func (q *Queue) Empty() bool { return q.first == 0 && !q.in.Waiting() }
