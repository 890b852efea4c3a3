// Package pool stores timeout nodes for one shard: an arena addressed by
// 32-bit index that grows in blocks as timers arrive and gives whole blocks
// back when a spike has passed, with lock-free free lists so that
// steady-state scheduling allocates nothing.
//
// It is part of shardwheel's engine: its API serves package shard and
// carries no compatibility promise. Users use package shardwheel.
//
// # Layout
//
// Indices below 2^BigBits (BigBits: log2 of max(first block, 2^14)) live
// in small blocks: block 0 holds the first nodes New was given (rounded up
// to a power of two), and each later small block is as large as all the
// blocks before it, so the arena doubles until it holds 2^BigBits nodes.
// Every index above lives in a big block of 2^BigBits nodes (16,384 with the
// default first block, 704 KiB with closures). An empty arena holds no block
// at all: a shard that never gets a timer costs only the Arena header
// (under 1 KiB), and the table of big blocks is made when the first big
// block is.
//
// Each block keeps its nodes in one pointer-free array and their tasks in a
// separate []func() array, so the garbage collector never scans node
// memory; links between nodes are indices, not pointers, for the same
// reason. A timer's task is either a closure (in the task array) or a
// handler: a small number naming a function the shard keeps (in a
// pointer-free uint16 array). A block makes each of those two arrays when
// the first timer of that kind lands in it, so a shard whose timers all use
// handlers holds no pointer per timer at all, and the GC has nothing of it
// to mark.
//
// Index 0 is never handed out, so that 0 can mean "no node" in every link:
// every list in the engine (free lists, the shard's queue and attention
// stack, wheel slots) stores a node by its plain index and ends at 0. An
// arena therefore holds at most Capacity = MaxNodes-1 timers.
//
// # Ownership
//
// Nodes are taken by Get and returned by PutChain, both of which any
// goroutine may call; a caller may also keep freed nodes on a list of its
// own (package shard keeps one for whoever holds its wheel, linked through
// Node.Next) and hand them out again without the arena. Between a Get and a
// return a node belongs to one timer; the fields' rules are on Node. Every
// node is returned at most once per life: that is the caller's invariant,
// which the shard's state machine upholds. The arena does not count lives:
// the shard keeps each node's generation in its state word and Node.Epoch.
//
// # Giving memory back
//
// A big block whose nodes are all free can be released (Release): its
// arrays go to the garbage collector, and its table entry is cleared, so
// that a stale handle into it finds nothing. Park and Unpark are the
// bookkeeping a caller keeps for that, on the block itself: the caller
// parks the free nodes of the blocks it wants to empty instead of handing
// them out again, and a block whose every node is parked holds no timer
// and is on no list, so it can go. Re-creating it (Recreate) starts every
// node's Epoch above any it had, so a handle from before the release never
// matches a later life. Package shard decides which blocks to empty (see
// its reserve.go).
//
// # Free lists
//
// Free nodes the caller does not keep sit on one of several free lists
// (lanes), so that producers on different CPUs do not contend for one list
// head: a producer pops its own lane's list, and steals from the other
// lanes' lists only when its own has nothing, before it grows the arena: it
// grows only when no lane holds a free node. Each free list is a Treiber
// stack whose head packs (index, tag). The tag counts pops, so a pop that
// read a stale head fails its CAS even if the same index was popped and
// pushed back meanwhile (the ABA case). PutChain pushes a whole chain with
// one CAS, so freeing costs one contended operation per chain, not one per
// node.
package pool

import (
	"math/bits"
	"sync/atomic"

	"github.com/shardwheel/shardwheel/internal/pad"
	"github.com/shardwheel/shardwheel/internal/stress"
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

	minFirst = 64
	// minBigBits is log2 of the smallest big block: 2^14 nodes, 576 KiB
	// of nodes and links, the unit in which an arena gives memory back.
	minBigBits = 14
	// maxSmall bounds the small blocks: block 0, then one per doubling up
	// to 2^minBigBits.
	maxSmall = minBigBits - 6 + 1
)

// Node is one timeout's storage: 32 bytes, no pointers.
//
// Field ownership:
//   - State: atomic; its encoding belongs to package shard. Stored by the
//     producer that took the node, then changed by CAS (and by the stores
//     package shard documents for the node it owns alone).
//   - Key: written by the producer before it publishes the node (its
//     State store, then a link into the wheel or a push on a queue); read
//     only by goroutines ordered after that.
//   - Epoch: atomic; the high part of the node's generation, whose low
//     part is a tag in State (package shard): stored when a life starts
//     whose tag wrapped around, and by Recreate. Readers use it to
//     validate handles.
//   - Next, Prev: the wheel's slot links, read and written only by the
//     goroutine holding the shard's wheel; Next also links that
//     goroutine's own free lists while the node is free.
type Node struct {
	State atomic.Uint64
	Key   uint64
	Epoch atomic.Uint64
	Next  uint32
	Prev  uint32
}

type block struct {
	nodes []Node // pointer-free elements: the GC never scans them
	// tasks (closures: the only pointers an arena holds per node) and
	// handlers (pointer-free) are each installed once, by CAS, by the
	// first SetTask of their kind in the block, and never change
	// afterwards. Element i belongs to node i's owner (see Arena.Task).
	tasks    atomic.Pointer[[]func()]
	handlers atomic.Pointer[[]uint16]
	// series (periodic timers' records) and flags are installed the
	// same way, by the first timer that needs them (see series.go).
	series atomic.Pointer[[]atomic.Pointer[Series]]
	flags  atomic.Pointer[[]uint8]
	// spare holds, per node, the Series record of its last periodic
	// life, kept for its next one (series.go); installed the same way.
	// Element i belongs to node i's owner.
	spare atomic.Pointer[[]*Series]
	// links holds, per node, the index of the next node on whichever
	// list the node is on outside the wheel: a free list while it is
	// free, the shard's queue while it waits there new, or the shard's
	// attention stack while it is queued there. A node is on at most one
	// of them at a time (package shard's state machine), so the uses never
	// overlap. 0 ends a list.
	links []atomic.Uint32
	// The parked nodes (see Park), linked through Node.Next: the caller's
	// who parks, one goroutine at a time.
	parked, parkedTail uint32
	nparked            int
}

// bigEntry is a big block's place in the table: the block, nil while none
// is made or after Release, and floor, the Epoch a re-created block's
// nodes start at (one above any its released nodes had).
type bigEntry struct {
	b     atomic.Pointer[block]
	floor atomic.Uint64
}

// Arena is a growable store of Nodes with lock-free free lists. It must be
// created with New and must not be copied.
type Arena struct {
	// small[i] and the big table's entries are installed by CAS; small
	// blocks never change afterwards, big blocks change only by Release
	// and Recreate.
	small [maxSmall]atomic.Pointer[block]
	// big is the table of big blocks, made by the first goroutine that
	// needs it (CAS) and never changed afterwards: big block k holds
	// indices [(k+1)<<bigBits, (k+2)<<bigBits).
	big atomic.Pointer[[]bigEntry]
	// fresh is the number of indices ever handed out, plus the reserved
	// index 0: the high-water mark. Producers FAA it when the free lists
	// are empty.
	fresh     atomic.Uint64
	firstBits uint       // log2 of block 0's size; immutable after New
	bigBits   uint       // log2 of a big block's size; immutable
	bigFirst  uint32     // 1 << bigBits, the first big block's first index
	capacity  uint64     // MaxNodes, or less for tests (LimitCapacity)
	lanes     []freeList // immutable slice after New
	// made and released count the nodes of big blocks made and of those
	// given back (Release), for Stats: made - released are allocated.
	made, released atomic.Uint64
}

// freeList is one lane's Treiber stack, on a cache line of its own.
type freeList struct {
	// head is index<<32 | tag, index 0 when empty. CASed by Get's pops and
	// by PutChain's pushes.
	head atomic.Uint64
	_    [pad.CacheLineSize - 8]byte
}

// New returns an empty arena with the given number of free-list lanes (at
// least one) whose first block, allocated by the first Get, holds first
// nodes (rounded up to a power of two, at least 64 and at most MaxFirst).
func New(first, lanes int) *Arena {
	first = min(max(first, minFirst), MaxFirst)
	fb := uint(bits.Len(uint(first - 1)))
	a := &Arena{firstBits: fb, bigBits: max(fb, minBigBits), capacity: MaxNodes, lanes: make([]freeList, max(lanes, 1))}
	a.bigFirst = 1 << a.bigBits
	a.fresh.Store(1) // index 0 is reserved
	return a
}

// LimitCapacity lowers the number of indices the arena hands out to n
// (Capacity+1 is the default: index 0 is reserved), so that tests can
// fill an arena without gigabytes. Call it before the first Get.
func (a *Arena) LimitCapacity(n int) {
	a.capacity = uint64(min(max(n, 2), MaxNodes))
}

// BigBits returns log2 of a big block's size: big blocks are the unit in
// which the arena gives memory back.
func (a *Arena) BigBits() uint { return a.bigBits }

// locateSmall returns the small block holding idx < bigFirst and idx's
// offset in it: block k > 0 holds [2^(firstBits+k-1), 2^(firstBits+k)),
// which bits.Len finds.
func (a *Arena) locateSmall(idx uint32) (blk, off uint32) {
	blk = uint32(bits.Len32(idx >> a.firstBits))
	size := uint32(1) << (a.firstBits + uint(max(blk, 1)) - 1)
	return blk, idx & (size - 1)
}

// smallSize returns the number of nodes small block blk holds.
func (a *Arena) smallSize(blk uint32) int {
	return 1 << (a.firstBits + uint(max(blk, 1)) - 1)
}

// table returns the big block table, making it if make is set.
func (a *Arena) table(create bool) []bigEntry {
	if t := a.big.Load(); t != nil || !create {
		if t == nil {
			return nil
		}
		return *t
	}
	t := make([]bigEntry, MaxNodes>>a.bigBits-1)
	if a.big.CompareAndSwap(nil, &t) {
		return t
	}
	return *a.big.Load()
}

// HighWater returns one past the largest index ever handed out: every node in
// use has an index below it.
func (a *Arena) HighWater() uint32 {
	return uint32(min(a.fresh.Load(), a.capacity))
}

// Node returns the node at idx. idx must be below HighWater and its block
// installed (see Slot).
func (a *Arena) Node(idx uint32) *Node { return a.Slot(idx).Node() }

// Slot is where one node's storage lives: its block and its offset there.
// Finding it costs a little arithmetic and a load or two, so a caller that
// needs more than one of a node's node, task and link finds the slot once.
type Slot struct {
	b   *block
	off uint32
}

// Slot returns the storage of the node at idx. idx must be below HighWater
// and its block installed: every index Get returned qualifies until the
// node is freed, and a freed node's until its block is released.
func (a *Arena) Slot(idx uint32) Slot {
	if idx >= a.bigFirst {
		return Slot{(*a.big.Load())[idx>>a.bigBits-1].b.Load(), idx & (a.bigFirst - 1)}
	}
	blk, off := a.locateSmall(idx)
	return Slot{a.small[blk].Load(), off}
}

// Node returns the slot's node.
func (s Slot) Node() *Node { return &s.b.nodes[s.off] }

// At returns the slot i nodes after s in the same block: i must be below
// the length Span returned with s.
func (s Slot) At(i int) Slot { return Slot{s.b, s.off + uint32(i)} }

// Nodes returns the m nodes from s on, in its block: m must not exceed
// the length Span returned with s. A walk over them pays no lookup per
// node.
func (s Slot) Nodes(m int) []Node { return s.b.nodes[s.off : int(s.off)+m] }

// Task is what a timer runs: a closure, or the handler numbered Handler
// (1..65535), a function the shard keeps and calls with the timer's key.
// Exactly one of the two is set in a timer's task; the zero Task is none.
type Task struct {
	Func    func()
	Handler uint16
}

// IsZero reports whether t names nothing to run.
func (t Task) IsZero() bool { return t.Func == nil && t.Handler == 0 }

// SetTask stores what the node's timer runs. The node must be fresh from
// Get (or from Add, which clears the slot), and only its owner may call it
// (see Arena.Task). The first SetTask of a kind in a block makes that
// kind's array for the block.
func (s Slot) SetTask(t Task) {
	if t.Func != nil {
		(*lazyArray(&s.b.tasks, len(s.b.nodes)))[s.off] = t.Func
		return
	}
	(*lazyArray(&s.b.handlers, len(s.b.nodes)))[s.off] = t.Handler
}

// Task returns what SetTask stored; the zero Task once the slot has been
// cleared (Add, DropFunc for a closure).
func (s Slot) Task() (t Task) {
	if p := s.b.tasks.Load(); p != nil {
		t.Func = (*p)[s.off]
	}
	if p := s.b.handlers.Load(); p != nil {
		t.Handler = (*p)[s.off]
	}
	return t
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

// Find returns the node at idx, or nil if there is no node there now
// (idx 0, idx at or beyond HighWater, its block not yet installed or
// released). Unlike Node it accepts any index, such as one read from a
// handle.
func (a *Arena) Find(idx uint32) *Node {
	s, ok := a.FindSlot(idx)
	if !ok {
		return nil
	}
	return s.Node()
}

// FindSlot is Find for the node's whole storage: the slot of idx, and
// false where Find returns nil.
func (a *Arena) FindSlot(idx uint32) (Slot, bool) {
	if idx == 0 || idx >= a.HighWater() {
		return Slot{}, false
	}
	var b *block
	if idx >= a.bigFirst {
		t := a.table(false)
		if t == nil {
			return Slot{}, false // a producer is making the table
		}
		b = t[idx>>a.bigBits-1].b.Load()
		idx &= a.bigFirst - 1
	} else {
		var blk uint32
		blk, idx = a.locateSmall(idx)
		b = a.small[blk].Load()
	}
	return Slot{b, idx}, b != nil
}

// Link returns the list link of the node at idx (see block.links).
func (a *Arena) Link(idx uint32) *atomic.Uint32 { return a.Slot(idx).Link() }

// Task returns the task of the node at idx (see Slot.SetTask). Only the
// node's current owner may read or write its task: the producer before it
// publishes the node; afterwards whoever ended the timer with a CAS on its
// State (package shard: the goroutine that fired it, the Cancel that
// cancelled it, Stop for a timer it claimed).
func (a *Arena) Task(idx uint32) Task { return a.Slot(idx).Task() }

// Span returns the slot of idx and the number of nodes from idx to the end
// of its block, or a zero length if that block is not installed: a sweep
// walks the arena a block at a time. idx must be below HighWater.
func (a *Arena) Span(idx uint32) (Slot, int) {
	s, ok := a.FindSlot(idx)
	if !ok {
		if idx >= a.bigFirst {
			return s, int(a.bigFirst - idx&(a.bigFirst-1))
		}
		blk, off := a.locateSmall(idx)
		return s, a.smallSize(blk) - int(off)
	}
	return s, len(s.b.nodes) - int(s.off)
}

// Installed reports whether Span found a block.
func (s Slot) Installed() bool { return s.b != nil }

// Get takes a node from lane's free list (lane taken modulo the lane
// count), else from another lane's, else a never-used one, and returns its
// index and storage, or false if the arena already holds its capacity.
// Safe for concurrent use.
func (a *Arena) Get(lane int) (idx uint32, s Slot, ok bool) {
	idx, s, _, ok = a.GetOwn(lane)
	return idx, s, ok
}

// GetOwn is Get that also reports whether the node came from lane's own
// list (not stolen from another lane, nor grown).
func (a *Arena) GetOwn(lane int) (idx uint32, s Slot, own, ok bool) {
	for i := range a.lanes {
		if idx, ok = a.pop(&a.lanes[uint(lane+i)%uint(len(a.lanes))]); ok {
			return idx, a.Slot(idx), i == 0, true
		}
	}
	if idx, ok = a.Grow(); !ok {
		return 0, Slot{}, false, false
	}
	return idx, a.Slot(idx), false, true
}

func (a *Arena) pop(l *freeList) (uint32, bool) {
	for {
		h := l.head.Load()
		idx := uint32(h >> 32)
		if idx == 0 {
			return 0, false
		}
		next := a.Link(idx).Load()
		stress.Point()
		// The tag (low half) changes on every pop, so this CAS fails if idx
		// was popped, reused and pushed back since we loaded h.
		if l.head.CompareAndSwap(h, uint64(next)<<32|uint64(uint32(h)+1)) {
			return idx, true
		}
	}
}

// TakeLane empties lane's free list (lane taken modulo the lane count) and
// returns its first node, or 0 if it was empty: the caller owns the nodes,
// linked through their Link words, the last one's 0. It changes the tag as
// a pop does, so a concurrent Get that read the old head fails its CAS.
// Safe for concurrent use.
func (a *Arena) TakeLane(lane int) uint32 {
	l := &a.lanes[uint(lane)%uint(len(a.lanes))]
	for {
		h := l.head.Load()
		idx := uint32(h >> 32)
		if idx == 0 {
			return 0
		}
		stress.Point()
		if l.head.CompareAndSwap(h, uint64(uint32(h)+1)) {
			return idx
		}
	}
}

// Grow hands out a never-used index, making its block if need be, or
// reports false if the arena has handed out its capacity. Safe for
// concurrent use.
func (a *Arena) Grow() (uint32, bool) {
	n := a.fresh.Add(1) - 1
	if n >= a.capacity {
		a.fresh.Store(a.capacity) // keep the counter from creeping toward overflow
		return 0, false
	}
	idx := uint32(n)
	stress.Point() // HighWater counts idx, whose block may not exist yet
	a.blockFor(idx)
	return idx, true
}

// blockFor makes sure the block holding idx, a fresh index, exists.
// Producers that race to create the same block both allocate; the CAS
// loser drops its copy. A fresh index's big block was never released: the
// indices of a released block were all handed out.
func (a *Arena) blockFor(idx uint32) {
	if idx < a.bigFirst {
		blk, _ := a.locateSmall(idx)
		if p := &a.small[blk]; p.Load() == nil {
			p.CompareAndSwap(nil, newBlock(a.smallSize(blk)))
		}
		return
	}
	e := &a.table(true)[idx>>a.bigBits-1]
	if e.b.Load() == nil && e.b.CompareAndSwap(nil, newBlock(int(a.bigFirst))) {
		a.made.Add(uint64(a.bigFirst))
	}
}

func newBlock(size int) *block {
	return &block{nodes: make([]Node, size), links: make([]atomic.Uint32, size)}
}

// Chain collects freed nodes so that they return to a free list with one
// CAS. The zero value is an empty chain. A Chain belongs to the goroutine
// that fills it.
type Chain struct {
	head, tail uint32 // node indices; 0 when empty
}

// Add clears the task and handler of the node at idx and appends the node
// to c. The node must have ended its life (handles to it no longer
// validate), and must not be touched until Get returns it again. c belongs
// to its caller.
func (a *Arena) Add(c *Chain, idx uint32) {
	s := a.Slot(idx)
	s.Clear()
	s.Link().Store(c.head)
	c.head = idx
	if c.tail == 0 {
		c.tail = idx
	}
}

// Clear clears the slot's task, to let the GC take the closure now, not at
// reuse, and its handler: SetTask relies on both being clear. It resets the
// node's flags too, and keeps its Series record for the node's next
// periodic life (see series.go). Add does it; a
// caller that keeps freed nodes on a list of its own calls it. Only the
// node's owner may call it.
func (s Slot) Clear() {
	s.DropFunc()
	if p := s.b.handlers.Load(); p != nil {
		(*p)[s.off] = 0
	}
	s.clearExtra()
}

// ClearCancelled is Clear for a node whose timer a Cancel ended: that
// Cancel dropped the closure already, unless the timer was a periodic one
// whose run owned the task (package shard's rule), so the task array, a
// cache line of its own, is written only then.
func (s Slot) ClearCancelled() {
	if s.FindSeries() != nil {
		s.DropFunc()
	}
	if p := s.b.handlers.Load(); p != nil {
		(*p)[s.off] = 0
	}
	s.clearExtra()
}

// DropFunc clears the slot's closure, if it has one, so that the garbage
// collector may take it: a cancelled timer's task is unreachable from the
// moment its Cancel returns, not when its node is freed. Only the node's
// owner may call it (see Arena.Task).
func (s Slot) DropFunc() {
	if p := s.b.tasks.Load(); p != nil {
		(*p)[s.off] = nil
	}
}

// PutChain returns every node in c to the free list of lane (modulo the lane
// count) and empties c: one CAS that keeps the list's tag, safe beside
// concurrent pushes and pops.
func (a *Arena) PutChain(lane int, c *Chain) {
	if c.head == 0 {
		return
	}
	l := &a.lanes[uint(lane)%uint(len(a.lanes))]
	last := a.Link(c.tail)
	for {
		h := l.head.Load()
		last.Store(uint32(h >> 32))
		stress.Point()
		// Pushes keep the tag: only pops need to change it to defeat ABA.
		if l.head.CompareAndSwap(h, uint64(c.head)<<32|uint64(uint32(h))) {
			break
		}
	}
	*c = Chain{}
}
