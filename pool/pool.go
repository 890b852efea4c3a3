// Package pool stores timeout nodes for one shard: an arena addressed by
// 32-bit index that grows in blocks as timers arrive, with lock-free free
// lists so that steady-state scheduling allocates nothing.
//
// Layout. Block 0 holds the first nodes New was given (rounded up to a
// power of two); each later block is as large as all the blocks before it
// (so the arena doubles) until blocks reach 2^18 nodes, or block 0's size if
// that is larger, after which they stay that size. An empty arena holds no
// block at all: a shard that never gets a timer costs only the Arena header
// here (about 2 KiB, mostly the table of block pointers). Each block keeps
// its nodes in one pointer-free array and their tasks in a separate
// []func() array, so the garbage collector never scans node memory; links
// between nodes are indices, not pointers, for the same reason. A timer's
// task is either a closure (in the task array) or a handler: a small
// number naming a function the shard keeps (in a pointer-free uint16
// array). A block makes each of those two arrays when the first timer of
// that kind lands in it, so a shard whose timers all use handlers holds no
// pointer per timer at all, and the GC has nothing of it to mark.
//
// Index 0 is never handed out, so that 0 can mean "no node" in every link.
// An arena therefore holds at most Capacity = MaxNodes-1 timers.
//
// Ownership. Nodes are taken by Get, which any goroutine may call, and
// returned by PutChain, which only the arena's owner (the shard worker)
// calls, or by Put, which the one goroutine that holds a node nobody else
// can reach may call (a Cancel that took its timer back from the shard's
// queue). Between Get and Put a node belongs to one timer; the fields' rules
// are on Node. Get bumps the node's generation when it hands the node out,
// so a handle that remembers (index, generation) can tell a recycled node
// from its own. Every node is put back at most once per generation: that is
// the caller's invariant, which the shard's state machine upholds.
//
// The owner does not need to write a node's own memory to free it: free-list
// links live in a separate array and the generation is bumped by Get, in the
// taking producer's cache. Freeing usually costs the owner a read of the
// node's cache line, not a write that the next producer would have to fetch
// back.
//
// Free nodes sit on one of several free lists (lanes), so that producers on
// different CPUs do not contend for one list head, or in a lane's spare
// slot (one node; see freeList.spare): a producer takes its own lane's
// spare, else pops its own lane's list, and steals from the other lanes'
// lists and then their spares only when its own has nothing, before it
// grows the arena: it grows only when no lane holds a free node. Each free list is a Treiber stack whose head packs
// (index+1, tag). The tag counts pops, so a pop that read a stale head fails
// its CAS even if the same index was popped and pushed back meanwhile (the
// ABA case). PutChain pushes a whole chain with one CAS, so the worker pays
// one contended operation per lane per pass, not one per node.
package pool

import (
	"math/bits"
	"sync/atomic"

	"github.com/shardwheel/shardwheel/internal/pad"
)

const (
	// MaxNodes bounds node indices: every index is below it.
	MaxNodes = 1 << 26
	// Capacity is the most timers one arena holds (index 0 is reserved):
	// Get fails beyond it.
	Capacity = MaxNodes - 1
	// MaxFirst is the largest first block New accepts.
	MaxFirst = 1 << 22
	// NodeBytes is the most memory one node costs: the node, its
	// free-list link, its task slot and its handler slot. The last two
	// arrays of a block are made only when a timer of their kind first
	// lands in it (see Slot.SetTask): BaseNodeBytes always, +TaskBytes
	// with a closure task, +HandlerBytes with a handler.
	NodeBytes = BaseNodeBytes + TaskBytes + HandlerBytes
	// TaskBytes is a task slot: a func value, one pointer (8 bytes on
	// 64-bit platforms, 4 on 32-bit ones).
	TaskBytes = bits.UintSize / 8
	// HandlerBytes is a handler slot: a 16-bit handler number.
	HandlerBytes = 2
	// BaseNodeBytes is the memory every node costs: the node and its
	// free-list link.
	BaseNodeBytes = 32 + 4

	minFirst     = 64
	maxBlockBits = 18 // blocks stop doubling at 2^18 nodes (11.5 MB)
	maxBlocks    = maxBlockBits + 1 + MaxNodes>>maxBlockBits
)

// Node is one timeout's storage: 32 bytes, no pointers.
//
// Field ownership:
//   - State: atomic; its encoding belongs to package shard. Stored by the
//     producer that took the node, then changed only by CAS.
//   - Key: written by the producer before it stores State; read only by
//     goroutines ordered after that store (the worker after it takes the
//     node from its incoming queue, Drain after a successful CAS on State).
//   - Gen: atomic; bumped only by Get, before it returns the node, so a
//     node's generation changes exactly when it starts a new life.
//     Readers use it to validate handles.
//   - Next, Prev: worker only (wheel slot links).
//   - QNext: the link of the shard's incoming queue (package ring): stored
//     by the producer that pushes this node or the next one, read by the
//     worker that pops them.
type Node struct {
	State atomic.Uint64
	Key   uint64
	Gen   atomic.Uint32
	Next  uint32
	Prev  uint32
	QNext atomic.Uint32
}

type block struct {
	nodes []Node // pointer-free elements: the GC never scans them
	// tasks (closures: the only pointers an arena holds per node) and
	// handlers (pointer-free) are each installed once, by CAS, by the
	// first SetTask of their kind in the block, and never change
	// afterwards. Element i belongs to node i's owner (see Arena.Task).
	tasks    atomic.Pointer[[]func()]
	handlers atomic.Pointer[[]uint16]
	// links holds, per node, index+1 of the next node on the free list
	// while the node is free, or on the shard's attention stack while it
	// is queued there (a queued node is never freed until the shard has
	// taken it off the stack, so the uses never overlap). 0 ends a list.
	links []atomic.Uint32
}

// Arena is a growable store of Nodes with lock-free free lists. It must be
// created with New and must not be copied.
type Arena struct {
	// blocks[i] is installed once, by CAS, and never changes afterwards.
	blocks [maxBlocks]atomic.Pointer[block]
	// fresh is the number of indices ever handed out, plus the reserved
	// index 0: the high-water mark. Producers FAA it when the free lists
	// are empty.
	fresh     atomic.Uint64
	firstBits uint       // log2 of block 0's size; immutable after New
	bigBits   uint       // log2 of the largest block size; immutable
	bigFirst  uint32     // the first index held by a full-size block
	bigBlock0 uint32     // the block number of that index
	lanes     []freeList // immutable slice after New
}

// freeList is one lane's Treiber stack, on a cache line of its own.
type freeList struct {
	// head is (index+1)<<32 | tag. Producers CAS it in Get; the owner
	// CASes it in PutChain.
	head atomic.Uint64
	// spare is index+1 of one free node kept off the stack, 0 if none:
	// Put parks a node here and the lane's next Get takes it, so a node
	// that a producer frees and takes again stays on that producer's
	// core without a write to the links array (whose lines nodes of
	// other lanes share). Swapped and CASed by Get and Put.
	spare atomic.Uint32
	_     [pad.CacheLineSize - 12]byte
}

// New returns an empty arena with the given number of free-list lanes (at
// least one) whose first block, allocated by the first Get, holds first
// nodes (rounded up to a power of two, at least 64 and at most MaxFirst).
func New(first, lanes int) *Arena {
	first = min(max(first, minFirst), MaxFirst)
	fb := uint(bits.Len(uint(first - 1)))
	a := &Arena{firstBits: fb, bigBits: max(fb, maxBlockBits), lanes: make([]freeList, max(lanes, 1))}
	a.bigFirst = 1 << a.bigBits
	a.bigBlock0 = uint32(a.bigBits-a.firstBits) + 1
	a.fresh.Store(1) // index 0 is reserved
	return a
}

// locate returns the block holding idx and idx's offset in it. Blocks up to
// bigFirst double: block k > 0 holds [2^(firstBits+k-1), 2^(firstBits+k)),
// which bits.Len finds; beyond, blocks are all 2^bigBits long.
func (a *Arena) locate(idx uint32) (blk, off uint32) {
	if idx < a.bigFirst {
		blk = uint32(bits.Len32(idx >> a.firstBits))
		size := uint32(1) << (a.firstBits + uint(max(blk, 1)) - 1)
		return blk, idx & (size - 1)
	}
	return a.bigBlock0 + (idx-a.bigFirst)>>a.bigBits, idx & (a.bigFirst - 1)
}

// blockSize returns the number of nodes block blk holds.
func (a *Arena) blockSize(blk uint32) int {
	if blk >= a.bigBlock0 {
		return 1 << a.bigBits
	}
	return 1 << (a.firstBits + uint(max(blk, 1)) - 1)
}

// HighWater returns one past the largest index ever handed out: every node in
// use has an index below it.
func (a *Arena) HighWater() uint32 {
	return uint32(min(a.fresh.Load(), MaxNodes))
}

// Node returns the node at idx. idx must be below HighWater and Allocated.
func (a *Arena) Node(idx uint32) *Node { return a.Slot(idx).Node() }

// Slot is where one node's storage lives: its block and its offset there.
// Finding it costs a little arithmetic and a load, so a caller that needs
// more than one of a node's node, task and link finds the slot once.
type Slot struct {
	b   *block
	off uint32
}

// Slot returns the storage of the node at idx. idx must be below HighWater
// and its block installed (every index Get returned qualifies).
func (a *Arena) Slot(idx uint32) Slot {
	blk, off := a.locate(idx)
	return Slot{a.blocks[blk].Load(), off}
}

// Node returns the slot's node.
func (s Slot) Node() *Node { return &s.b.nodes[s.off] }

// SetTask stores what the node's timer runs: task, or when task is nil,
// handler h (non-zero). The node must be fresh from Get (or from Add, which
// clears both), and only its owner may call it (see Arena.Task). The first
// SetTask of a kind in a block makes that kind's array for the block.
func (s Slot) SetTask(task func(), h uint16) {
	if task != nil {
		(*lazyArray(&s.b.tasks, len(s.b.nodes)))[s.off] = task
		return
	}
	(*lazyArray(&s.b.handlers, len(s.b.nodes)))[s.off] = h
}

// Task returns what SetTask stored: a task, or nil and a handler; nil and
// 0 once Add has cleared the node.
func (s Slot) Task() (task func(), h uint16) {
	if p := s.b.tasks.Load(); p != nil {
		task = (*p)[s.off]
	}
	if p := s.b.handlers.Load(); p != nil {
		h = (*p)[s.off]
	}
	return task, h
}

// lazyArray returns the array p points to, making it (n elements) if it
// does not exist yet. Producers that race to make it both allocate; the
// CAS loser drops its copy and uses the winner's.
func lazyArray[T any](p *atomic.Pointer[[]T], n int) *[]T {
	if a := p.Load(); a != nil {
		return a
	}
	a := make([]T, n)
	if p.CompareAndSwap(nil, &a) {
		return &a
	}
	return p.Load()
}

// Link returns the slot's list link (see block.links).
func (s Slot) Link() *atomic.Uint32 { return &s.b.links[s.off] }

// Find returns the node at idx, or nil if no node was ever handed out there
// (idx 0, idx at or beyond HighWater, or its block not yet installed).
// Unlike Node it accepts any index, such as one read from a handle.
func (a *Arena) Find(idx uint32) *Node {
	if idx == 0 || idx >= a.HighWater() {
		return nil
	}
	blk, off := a.locate(idx)
	b := a.blocks[blk].Load()
	if b == nil {
		return nil
	}
	return &b.nodes[off]
}

// Link returns the list link of the node at idx (see block.links).
func (a *Arena) Link(idx uint32) *atomic.Uint32 { return a.Slot(idx).Link() }

// Task returns the task of the node at idx, or nil and its handler (see
// Slot.SetTask). Only the node's current owner may read or write its task:
// the producer before publishing the node, the worker afterwards (and
// Drain, for a node it claimed).
func (a *Arena) Task(idx uint32) (func(), uint16) { return a.Slot(idx).Task() }

// Get takes a node, preferably lane's spare or from its free list (lane
// taken modulo the lane count), else another lane's, else a never-used one;
// it bumps the node's generation and returns its index, new generation
// and storage, or false if the arena already holds Capacity nodes. Safe for
// concurrent use.
func (a *Arena) Get(lane int) (idx, gen uint32, s Slot, ok bool) {
	if idx, ok = a.takeSpare(&a.lanes[uint(lane)%uint(len(a.lanes))]); !ok {
		for i := range a.lanes {
			if idx, ok = a.pop(&a.lanes[uint(lane+i)%uint(len(a.lanes))]); ok {
				break
			}
		}
	}
	for i := 1; !ok && i < len(a.lanes); i++ {
		idx, ok = a.takeSpare(&a.lanes[uint(lane+i)%uint(len(a.lanes))])
	}
	if !ok {
		if idx, ok = a.grow(); !ok {
			return 0, 0, Slot{}, false
		}
	}
	s = a.Slot(idx)
	return idx, s.Node().Gen.Add(1), s, true
}

// takeSpare takes l's spare node, if it has one.
func (a *Arena) takeSpare(l *freeList) (uint32, bool) {
	if l.spare.Load() == 0 {
		return 0, false
	}
	top := l.spare.Swap(0)
	return top - 1, top != 0
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
	a.blockFor(idx)
	return idx, true
}

// blockFor makes sure the block holding idx exists. Producers that race to
// create the same block both allocate; the CAS loser drops its copy.
func (a *Arena) blockFor(idx uint32) {
	blk, _ := a.locate(idx)
	p := &a.blocks[blk]
	if p.Load() != nil {
		return
	}
	size := a.blockSize(blk)
	p.CompareAndSwap(nil, &block{
		nodes: make([]Node, size),
		links: make([]atomic.Uint32, size),
	})
}

// Chain collects freed nodes so the owner can return them with one CAS. The
// zero value is an empty chain. A Chain belongs to the arena's owner.
type Chain struct {
	head, tail uint32 // index+1; 0 when empty
}

// Add clears the task and handler of the node at idx and appends the node
// to c. The node must have ended its life (handles to it no longer
// validate), and must not be touched until Get returns it again. c belongs
// to its caller: the owner's chains, or Put's chain of one.
func (a *Arena) Add(c *Chain, idx uint32) {
	s := a.Slot(idx)
	clearTask(s)
	s.Link().Store(c.head)
	c.head = idx + 1
	if c.tail == 0 {
		c.tail = idx + 1
	}
}

// Put returns the node at idx to lane (modulo the lane count): as its
// spare if it has none, so that the lane's next Get takes it back without
// touching the free list, else onto its free list, as Add and PutChain
// would with a chain of one. Unlike them it may be called by any goroutine
// that holds the node alone: one that ended the node's life and took it
// back before the owner could see it (the shard's Cancel of a timer still
// on top of its queue). The push is a CAS that keeps the list's tag, safe
// beside concurrent pops and pushes.
func (a *Arena) Put(lane int, idx uint32) {
	l := &a.lanes[uint(lane)%uint(len(a.lanes))]
	if l.spare.Load() == 0 {
		clearTask(a.Slot(idx)) // before the CAS publishes the node
		if l.spare.CompareAndSwap(0, idx+1) {
			return
		}
	}
	var c Chain
	a.Add(&c, idx)
	a.PutChain(lane, &c)
}

// clearTask clears the slot's task, to let the GC take the closure now,
// not at reuse, and its handler: SetTask relies on both being clear.
func clearTask(s Slot) {
	if p := s.b.tasks.Load(); p != nil {
		(*p)[s.off] = nil
	}
	if p := s.b.handlers.Load(); p != nil {
		(*p)[s.off] = 0
	}
}

// PutChain returns every node in c to the free list of lane (modulo the lane
// count) and empties c. The owner calls it with the chains of a pass, Put
// with a chain of one: the push is a CAS that keeps the list's tag, safe
// beside concurrent pushes and pops.
func (a *Arena) PutChain(lane int, c *Chain) {
	if c.head == 0 {
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
