// Package ring is the queue by which new timeouts reach a shard's worker: an
// unbounded, lock-free, multi-producer single-consumer queue threaded
// through the timeout nodes themselves (pool.Node.QNext), so that it never
// fills, never drops, never makes a producer wait for the consumer, and
// costs no memory of its own beyond one small header: its capacity is the
// node pool's.
//
// The algorithm: producers push onto a Treiber stack (one CAS on its head);
// the consumer takes the whole stack with one CAS when it has nothing left
// of its last take, reverses it into a FIFO backlog of its own, and pops
// from there. A node pushed last and not yet taken can be taken back
// (Unpush, by any goroutine that knows the generation it was pushed in: in
// the shard, the Cancel that ended its timer): a timer cancelled before its shard saw it
// then never crosses to the shard's core at all, which is the common fate
// of a request timeout on a busy proxy (tokio's per-worker timers drop such
// entries without touching the wheel; Go's runtime timers stay on the
// creating P). A Vyukov queue, used here before, cannot give an element
// back: its consumer alone unlinks.
//
// The head packs (index, tag): index 0 (never a node: pool index 0 is
// reserved) means empty, and the tag grows with every change of the head,
// so a CAS that read an old head fails even if the same index is back on
// top (the ABA case; see Unpush for why that matters).
//
// Ordering: a producer writes the node and its link before the CAS that
// publishes it; the consumer reads links after the CAS that takes the
// stack; Go's atomics are sequentially consistent.
//
// Ownership: head is shared by producers and the consumer's take (atomic,
// on a line of its own); first and last, the backlog, are the consumer's
// alone, on another line, so that pops do not invalidate the line every push
// writes. A node's QNext is written by its pusher while it is on the stack
// and by the consumer once it is in the backlog.
package ring

import (
	"sync/atomic"

	"github.com/shardwheel/shardwheel/internal/pad"
	"github.com/shardwheel/shardwheel/pool"
)

// Queue is an unbounded MPSC queue of pool nodes. Any number of goroutines
// may call Push and Unpush concurrently; only one goroutine at a time may
// call the consumer methods (TryPop, Empty). A node may be in at most one
// queue at a time. The zero Queue is empty; Init empties one. A Queue must
// not be copied after first use.
type Queue struct {
	// Producers' line: index<<32 | tag.
	head atomic.Uint64
	_    [pad.CacheLineSize - 8]byte
	// Consumer's line: the backlog, oldest first, linked by QNext; 0 when
	// empty.
	first, last uint32
	_           [pad.CacheLineSize - 8]byte
}

// Init makes q an empty queue. It must not run concurrently with any other
// method.
func (q *Queue) Init() {
	q.head.Store(0)
	q.first, q.last = 0, 0
}

func top(h uint64) uint32 { return uint32(h >> 32) }

// Push appends node idx; n is that node, whose link it writes. It never
// blocks for the consumer and never fails; it is safe for concurrent use by
// many goroutines, lock-free (a CAS that loses to another push, an Unpush
// or a take retries). The node must not be in any queue.
func (q *Queue) Push(idx uint32, n *pool.Node) {
	for {
		h := q.head.Load()
		// The link is stored before the CAS that publishes the node,
		// so whoever takes it sees its link and every field the caller
		// wrote before Push.
		n.QNext.Store(top(h))
		if q.head.CompareAndSwap(h, uint64(idx)<<32|uint64(uint32(h)+1)) {
			return
		}
	}
}

// Unpush takes node idx (n, a.Node(idx)) back out of the queue if it is the
// node pushed last and nobody has taken it yet, and reports whether it did;
// then the node is in no queue and belongs to the caller. gen is the node's
// generation when it was pushed: Unpush fails if the node has been reused
// since (pool.Arena.Get bumps it), so a stale call never takes a node
// pushed in a later life. Any goroutine may call it.
//
// Why the generation and the tag: after the consumer took the node, it may
// be freed, reused and pushed again, by anyone, and be on top once more. If
// Gen, loaded after the head, still equals gen, the head was read in the
// node's life of gen, during which it is pushed once: so it was that push,
// and its link is the one read here. The CAS then succeeds only if the head
// has not changed since, as every change bumps the tag.
func (q *Queue) Unpush(idx uint32, n *pool.Node, gen uint32) bool {
	h := q.head.Load()
	if top(h) != idx || n.Gen.Load() != gen {
		return false
	}
	return q.head.CompareAndSwap(h, uint64(n.QNext.Load())<<32|uint64(uint32(h)+1))
}

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
		q.first = a.Node(idx).QNext.Load()
	}
	return idx, true
}

// take moves the stack into the (empty) backlog, oldest first, and reports
// whether there was anything to move.
func (q *Queue) take(a *pool.Arena) bool {
	var h uint64
	for {
		h = q.head.Load()
		if top(h) == 0 {
			return false
		}
		if q.head.CompareAndSwap(h, uint64(uint32(h)+1)) {
			break
		}
	}
	// Reverse the chain: the stack's top is the newest.
	var prev uint32
	q.last = top(h)
	for idx := top(h); idx != 0; {
		n := a.Node(idx)
		next := n.QNext.Load()
		n.QNext.Store(prev)
		prev, idx = idx, next
	}
	q.first = prev
	return true
}

// Empty reports whether the queue holds no element. Consumer only.
func (q *Queue) Empty() bool {
	return q.first == 0 && top(q.head.Load()) == 0
}
