// Package pool stores timeout nodes for one shard: an arena addressed by
// 32-bit index, grown in fixed chunks and never shrunk, with a lock-free free
// list so that steady-state scheduling allocates nothing.
//
// Layout. Each chunk holds ChunkSize nodes in one pointer-free array and their
// tasks in a separate []func() array. The garbage collector therefore never
// scans node memory; it only scans the task pointers. Links between nodes are
// indices, not pointers, for the same reason.
//
// Ownership. Nodes are taken by Get, which any goroutine may call, and
// returned by PutChain, which only the arena's owner (the shard worker)
// calls.
// Between Get and Put a node belongs to one timer; the fields' rules are on
// Node. Get bumps the node's generation when it hands the node out, so a
// handle that remembers (index, generation) can tell a recycled node from its
// own. Every node is put back at most once per generation: that is the
// caller's invariant, which the shard's state machine upholds.
//
// The owner does not need to write a node's own memory to free it: links
// live in a separate array and the generation is bumped by Get, in the
// taking producer's cache. Freeing usually costs the owner a read of the
// node's cache line, not a write that the next producer would have to fetch
// back.
//
// Free nodes sit on one of several free lists (lanes), so that producers on
// different CPUs do not contend for one list head: a producer takes from its
// own lane and steals from the others only when its lane is empty, before it
// grows the arena. Each free list is a Treiber stack whose head packs
// (index+1, tag). The tag counts pops, so a pop that read a stale head fails
// its CAS even if the same index was popped and pushed back meanwhile (the
// ABA case). PutChain pushes a whole chain with one CAS, so the worker pays
// one contended operation per lane per pass, not one per node.
package pool

import (
	"sync/atomic"
)

const (
	chunkBits = 14
	// ChunkSize is the number of nodes allocated at a time.
	ChunkSize = 1 << chunkBits
	chunkMask = ChunkSize - 1
	maxChunks = 1 << 12
	// MaxNodes is the most nodes one arena can hold (64M): Get fails beyond it.
	MaxNodes = maxChunks * ChunkSize
)

// Node is one timeout's storage: 32 bytes, no pointers.
//
// Field ownership:
//   - State: atomic; its encoding belongs to package shard. Stored by the
//     producer that took the node, then changed only by CAS.
//   - Key: written by the producer before it stores State; read only by
//     goroutines ordered after that store (the worker after a ring pop,
//     Drain after a successful CAS on State).
//   - Gen: atomic; bumped only by Get, before it returns the node, so a
//     node's generation changes exactly when it starts a new life.
//     Readers use it to validate handles.
//   - Next, Prev: worker only (bucket list links).
type Node struct {
	State atomic.Uint64
	Key   uint64
	Gen   atomic.Uint32
	Next  uint32
	Prev  uint32
}

type chunk struct {
	nodes *[ChunkSize]Node   // pointer-free: the GC never scans it
	tasks *[ChunkSize]func() // the only pointers an arena holds per node
	// links holds, per node, index+1 of the next node on the free list
	// while the node is free, or on the shard's attention stack while it
	// is queued there (a queued node is never freed until the shard has
	// taken it off the stack, so the uses never overlap).
	// 0 ends a list.
	links *[ChunkSize]atomic.Uint32
}

// Arena is a growable store of Nodes with a lock-free free list. It must be
// created with New and must not be copied.
type Arena struct {
	// chunks[i] is installed once, by CAS, and never changes afterwards.
	chunks [maxChunks]atomic.Pointer[chunk]
	// fresh is the number of indices ever handed out or reserved: the
	// high-water mark. Producers FAA it when the free list is empty.
	fresh    atomic.Uint64
	reserved uint32     // immutable after New
	lanes    []freeList // immutable slice after New
}

// freeList is one lane's Treiber stack, on a cache line of its own.
type freeList struct {
	// head is (index+1)<<32 | tag. Producers CAS it in Get; the owner
	// CASes it in PutChain.
	head atomic.Uint64
	_    [cacheLineSize - 8]byte
}

const cacheLineSize = 64

// New returns an arena with the given number of free-list lanes (at least
// one) whose first reserved indices are taken at once and never handed out
// by Get (the shard uses them as list sentinels).
func New(reserved, lanes int) *Arena {
	a := &Arena{reserved: uint32(reserved), lanes: make([]freeList, max(lanes, 1))}
	a.fresh.Store(uint64(reserved))
	for i := 0; i < reserved; i += ChunkSize {
		a.chunkFor(uint32(i))
	}
	return a
}

// Reserved returns the number of reserved indices.
func (a *Arena) Reserved() uint32 { return a.reserved }

// HighWater returns one past the largest index ever handed out: every node in
// use has an index below it.
func (a *Arena) HighWater() uint32 {
	n := a.fresh.Load()
	if n > MaxNodes {
		return MaxNodes
	}
	return uint32(n)
}

// Node returns the node at idx. idx must be below HighWater.
func (a *Arena) Node(idx uint32) *Node {
	return &a.chunks[idx>>chunkBits].Load().nodes[idx&chunkMask]
}

// Link returns the list link of the node at idx (see chunk.links).
func (a *Arena) Link(idx uint32) *atomic.Uint32 {
	return &a.chunks[idx>>chunkBits].Load().links[idx&chunkMask]
}

// Allocated reports whether the chunk holding idx exists. HighWater can run
// ahead of chunk installation for a moment while a producer grows the arena.
func (a *Arena) Allocated(idx uint32) bool {
	return a.chunks[idx>>chunkBits].Load() != nil
}

// Task returns the task slot of the node at idx. Only the node's current
// owner may read or write it: the producer before publishing the node, the
// worker afterwards.
func (a *Arena) Task(idx uint32) *func() {
	return &a.chunks[idx>>chunkBits].Load().tasks[idx&chunkMask]
}

// Lanes returns the number of free-list lanes.
func (a *Arena) Lanes() int { return len(a.lanes) }

// Get takes a node, preferably from the free list of lane (taken modulo
// Lanes), bumps its generation and returns its index and new generation, or
// false if the arena already holds MaxNodes. Safe for concurrent use.
func (a *Arena) Get(lane int) (idx, gen uint32, ok bool) {
	for i := range a.lanes {
		if idx, ok = a.pop(&a.lanes[uint(lane+i)%uint(len(a.lanes))]); ok {
			break
		}
	}
	if !ok {
		if idx, ok = a.grow(); !ok {
			return 0, 0, false
		}
	}
	return idx, a.Node(idx).Gen.Add(1), true
}

func (a *Arena) pop(l *freeList) (uint32, bool) {
	for {
		h := l.head.Load()
		top := uint32(h >> 32)
		if top == 0 {
			return 0, false
		}
		idx := top - 1
		next := a.Link(idx).Load()
		// The tag (low half) changes on every pop, so this CAS fails if idx
		// was popped, reused and pushed back since we loaded h.
		if l.head.CompareAndSwap(h, uint64(next)<<32|uint64(uint32(h)+1)) {
			return idx, true
		}
	}
}

// grow hands out a never-used index.
func (a *Arena) grow() (uint32, bool) {
	n := a.fresh.Add(1) - 1
	if n >= MaxNodes {
		a.fresh.Store(MaxNodes) // keep the counter from creeping toward overflow
		return 0, false
	}
	idx := uint32(n)
	a.chunkFor(idx)
	return idx, true
}

// chunkFor makes sure the chunk holding idx exists. Producers that race to
// create the same chunk both allocate; the CAS loser drops its copy.
func (a *Arena) chunkFor(idx uint32) {
	p := &a.chunks[idx>>chunkBits]
	if p.Load() != nil {
		return
	}
	p.CompareAndSwap(nil, &chunk{
		nodes: new([ChunkSize]Node),
		tasks: new([ChunkSize]func()),
		links: new([ChunkSize]atomic.Uint32),
	})
}

// Chain collects freed nodes so the owner can return them with one CAS. The
// zero value is an empty chain. A Chain belongs to the arena's owner.
type Chain struct {
	head, tail uint32 // index+1; 0 when empty
	n          int
}

// Len returns the number of nodes in the chain.
func (c *Chain) Len() int { return c.n }

// Add clears the task of the node at idx and appends the node to c. The
// node must have ended its life (handles to it no longer validate), and
// must not be touched until Get returns it again. Owner only.
func (a *Arena) Add(c *Chain, idx uint32) {
	*a.Task(idx) = nil // let the GC take the closure now, not at reuse
	a.Link(idx).Store(c.head)
	c.head = idx + 1
	if c.tail == 0 {
		c.tail = idx + 1
	}
	c.n++
}

// PutChain returns every node in c to the free list of lane (modulo Lanes)
// and empties c. Owner only.
func (a *Arena) PutChain(lane int, c *Chain) {
	if c.n == 0 {
		return
	}
	l := &a.lanes[uint(lane)%uint(len(a.lanes))]
	last := a.Link(c.tail - 1)
	for {
		h := l.head.Load()
		last.Store(uint32(h >> 32))
		// Pushes keep the tag: only pops need to change it to defeat ABA.
		if l.head.CompareAndSwap(h, uint64(c.head)<<32|uint64(uint32(h))) {
			break
		}
	}
	*c = Chain{}
}
