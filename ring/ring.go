// Package ring is the queue by which new timeouts reach a shard's worker: an
// unbounded, lock-free, multi-producer single-consumer queue threaded
// through the timeout nodes themselves (pool.Node.QNext), so that it never
// fills, never drops, never makes a producer wait, and costs no memory of its
// own beyond one small header: its capacity is the node pool's.
//
// The algorithm is Dmitry Vyukov's intrusive MPSC node-based queue
// (https://www.1024cores.net/home/lock-free-algorithms/queues/intrusive-mpsc-node-based-queue),
// with 32-bit node indices for pointers and a stub element that lives in the
// Queue header (index Stub) rather than in the pool.
//
// Elements run from first (the consumer's end) to last (the producers' end),
// each linked to the next by its QNext word; 0 ends the chain. A push is one
// atomic exchange of last and one store into the previous element's link:
//
//	push(x): x.next = 0; prev = swap(last, x); prev.next = x
//
// Between the exchange and the store the chain is broken at prev: the
// consumer sees prev without a successor and stops there until the producer
// finishes (it never waits for it: TryPop reports false and the worker looks
// again on its next pass). The stub keeps the queue non-empty, so a producer
// always has a prev to link from and the consumer never has to hand back an
// element that a producer may still link from: TryPop returns an element
// only once its link is set, after which nobody writes that link again
// until the element is pushed anew.
//
// Ownership: last and stubNext are shared by producers (atomic);
// first is the consumer's alone, on a cache line of its own so that pops do
// not invalidate the line every push writes.
package ring

import (
	"sync/atomic"

	"github.com/shardwheel/shardwheel/internal/pad"
	"github.com/shardwheel/shardwheel/pool"
)

// Stub is the index by which a Queue names its stub element. Node indices
// are below pool.MaxNodes, so it never names a node.
const Stub uint32 = 1 << 31

// Queue is an unbounded MPSC queue of pool nodes. Any number of goroutines
// may call Push concurrently; only one goroutine at a time may call the
// consumer methods (TryPop, Empty). A node may be in at most one queue at a
// time. A Queue must be initialised with Init and must not be copied after.
type Queue struct {
	// Producers' line.
	last     atomic.Uint32 // the most recently pushed element
	stubNext atomic.Uint32 // the stub's link
	_        [pad.CacheLineSize - 8]byte
	// Consumer's line.
	first uint32 // the oldest element not yet popped (or Stub)
	_     [pad.CacheLineSize - 4]byte
}

// Init makes q an empty queue. It must be called before any other method,
// and never concurrently with them.
func (q *Queue) Init() {
	q.last.Store(Stub)
	q.stubNext.Store(0)
	q.first = Stub
}

func (q *Queue) link(a *pool.Arena, idx uint32) *atomic.Uint32 {
	if idx == Stub {
		return &q.stubNext
	}
	return &a.Node(idx).QNext
}

// Push appends node idx of arena a; n is that node (a.Node(idx)), which the
// caller has at hand. It never blocks and never fails; it is safe for
// concurrent use by many goroutines. The node must not be in any queue.
func (q *Queue) Push(a *pool.Arena, idx uint32, n *pool.Node) { q.push(a, idx, &n.QNext) }

// push appends idx, whose link is own.
func (q *Queue) push(a *pool.Arena, idx uint32, own *atomic.Uint32) {
	// Why this order: (1) the node's link is cleared before the exchange
	// publishes it as last, so a producer that links after it, and the
	// consumer that reads the link, never see a link from its previous
	// life; (2) the store into prev's link is what makes idx reachable to
	// the consumer, and it follows every write the caller made to the node
	// before Push (Go atomics are sequentially consistent), so a consumer
	// that loads the link sees the node's fields. TryPop mirrors this.
	own.Store(0)
	prev := q.last.Swap(idx)
	q.link(a, prev).Store(idx)
}

// TryPop removes and returns the oldest element, or reports false if the
// queue is empty or its oldest element's producer is between its two
// steps. Elements from one producer come out in the order it pushed them.
// Consumer only.
func (q *Queue) TryPop(a *pool.Arena) (uint32, bool) {
	first := q.first
	next := q.link(a, first).Load()
	if first == Stub {
		if next == 0 {
			return 0, false
		}
		first = next
		q.first = next
		next = q.link(a, next).Load()
	}
	if next != 0 {
		q.first = next
		return first, true
	}
	if q.last.Load() != first {
		return 0, false // a producer swapped last and has not linked yet
	}
	// first is the only element: put the stub behind it so that it gets a
	// successor and can leave without producers ever linking from it.
	q.push(a, Stub, &q.stubNext)
	if next = q.link(a, first).Load(); next != 0 {
		q.first = next
		return first, true
	}
	return 0, false // a producer got in between and has not linked yet
}

// Empty reports whether the queue holds no element and no push is in
// progress. Consumer only.
func (q *Queue) Empty() bool {
	return q.first == Stub && q.last.Load() == Stub
}
