package shard

import (
	"math"
	"math/bits"

	"github.com/shardwheel/shardwheel/internal/pad"
	"github.com/shardwheel/shardwheel/pool"
)

// wheel is a hierarchical timing wheel over arena nodes, owned by the
// goroutine holding the shard's wheel (own.go): no field is touched by any
// other.
//
// Every level has size slots and is read as a ring. Level l's slots are
// h^l ticks wide, h = size/2, so slot number N of level l (N = t >> l*shift)
// holds the deadlines in [N*h^l, (N+1)*h^l), and the ring covers twice a
// slot of the level above. A node due at tick t is filed at the lowest level
// whose ring reaches it: the first l with N_l(t) - N_l(elapsed) < size,
// elapsed being the last tick fully processed. Level 0 then holds exactly
// the nodes due within size ticks, one tick a slot.
//
// Cascades happen ahead of time and in pieces, as in Erlang's timer wheel:
// because a level's ring is twice as long as a slot of the level above, the
// nodes of level l's slot N fit into level l-1 as soon as elapsed enters
// slot N-1 (its window opens), long before the first of them is due. The
// shard goroutine moves them down a share at a time over the window
// (cascadeAhead), and must have moved them all before its deadline
// (cascadeDeadline): the
// tick before the slot's first tick for level 1, or before the window of
// the first slot they land in opens, for higher levels. A node filed by
// insert never lands in a slot whose window is open (its level would be
// lower), so a window's work is known when it opens. Each node moves at
// most once per level over its life.
//
// Deadlines more than 2^37 ticks from elapsed do not occur: every delay is
// clamped to maxDelayTicks, and the top level reaches past twice that.
//
// Slots are doubly-linked lists threaded through pool.Node.Next and Prev,
// whose ends live in slots, outside the arena, so that the wheel takes no
// node the user could have. A list's first node has Prev = slotEnd|slot and
// its last node Next = slotEnd|slot (slot = level*size + index), so either
// end finds its slot without a search. Prev == 0 means "not in the wheel".
// An occupancy bitmap per level finds the next occupied slot without walking
// empty ones.
//
// The wheel is its own allocation, written on every Schedule and Cancel
// that files or unlinks a node: the pads keep whatever the allocator puts
// beside it (another shard's wheel, say, written from another P) off its
// cache lines.
type wheel struct {
	_        [pad.CacheLineSize]byte
	arena    *pool.Arena
	shift    uint   // log2(size/2): level l's slots are 2^(l*shift) ticks wide
	size     uint64 // slots per level, a power of two >= 4
	levels   int
	elapsed  uint64     // every deadline <= elapsed has been processed
	occupied [][]uint64 // occupied[l] has one bit per slot of level l
	slots    []slotList // level*size + slot
	count    int        // nodes linked in the wheel
	// coarseBase is the index in slots of the coarse slots (slack.go),
	// levels*size, or 0 until the first timer with slack lands in one:
	// coarse slot (l, slot) is slots[coarseBase + l*size + slot], its
	// occupancy bit in occupied[levels+l].
	coarseBase uint32
	_          [pad.CacheLineSize]byte
}

// slotList holds the ends of one slot's list (node indices, 0 when empty)
// and filed, the nodes inserted since it was last empty: an upper bound of
// its length (a node unlinked from the middle does not find its slot), which
// paces cascades.
type slotList struct{ head, tail, filed uint32 }

const (
	// slotEnd marks a Next or Prev link that names a slot, not a node:
	// node indices are below pool.MaxNodes < slotEnd.
	slotEnd = 1 << 31
	// detached marks a node the holder has finished with structurally but
	// must not free yet, because it is still on the attention stack. It is
	// never a slot link: slot numbers stay far below 2^31-1.
	detached = ^uint32(0)
	// minWheelSize is the smallest ring a level can have: two slots of the
	// level above.
	minWheelSize = 4
)

// wheelLevels returns how many levels of size slots (rounded up to
// minWheelSize) reach twice maxDelayTicks.
func wheelLevels(size int) int {
	b := bits.Len(uint(max(size, minWheelSize))) - 1
	need := bits.Len64(2 * maxDelayTicks) // strictly more than twice: a margin for every size
	return 1 + (max(need-b, 0)+b-2)/(b-1)
}

func newWheel(a *pool.Arena, size int) *wheel {
	size = max(size, minWheelSize)
	w := &wheel{
		arena:  a,
		shift:  uint(bits.Len(uint(size)) - 2),
		size:   uint64(size),
		levels: wheelLevels(size),
	}
	words := (size + 63) / 64
	w.occupied = make([][]uint64, w.levels)
	for l := range w.occupied {
		w.occupied[l] = make([]uint64, words)
	}
	w.slots = make([]slotList, w.levels*size)
	return w
}

// setElapsed records that every tick up to t has been processed. Time never
// moves backwards.
func (w *wheel) setElapsed(t uint64) {
	if debug && t < w.elapsed {
		panic("shardwheel: wheel elapsed moved backwards")
	}
	w.elapsed = t
}

// num returns the number of level l's slot that holds tick t.
func (w *wheel) num(l int, t uint64) uint64 { return t >> (uint(l) * w.shift) }

// levelFor returns the level a deadline t > elapsed is filed at.
func (w *wheel) levelFor(t uint64) int {
	// A level l with t-elapsed >= size<<(l*shift) cannot hold t: start at
	// the first that may, and check from there (at most one step more).
	s := int(w.shift)
	l := max(0, (bits.Len64(t-w.elapsed)-s-1+s-1)/s)
	for l < w.levels-1 && w.num(l, t)-w.num(l, w.elapsed) >= w.size {
		l++
	}
	return min(l, w.levels-1)
}

// slotIndex returns the index in slots of level l's slot number num.
func (w *wheel) slotIndex(l int, num uint64) uint32 {
	return uint32(uint64(l)*w.size + num&(w.size-1))
}

// insert files node idx, due at tick t, in the wheel. t must be > elapsed.
func (w *wheel) insert(idx uint32, t uint64) { w.insertNode(idx, w.arena.Node(idx), t) }

// insertNode is insert for a caller that has the node at hand.
func (w *wheel) insertNode(idx uint32, n *pool.Node, t uint64) {
	l := w.levelFor(t)
	w.link(idx, n, w.slotIndex(l, w.num(l, t)))
}

// insertDue files node idx, due at or before elapsed, in elapsed's own
// level-0 slot, the due-now slot: every tick up to elapsed has been
// processed, and the next pass's advance runs what is there before
// anything else.
func (w *wheel) insertDue(idx uint32) {
	w.link(idx, w.arena.Node(idx), w.slotIndex(0, w.elapsed))
}

// insertDueFirst files node idx at the head of the due-now slot, ahead of
// what it holds: a held key's timers, due before whatever a full backlog
// left there (releaseKey).
func (w *wheel) insertDueFirst(idx uint32) {
	si := w.slotIndex(0, w.elapsed)
	sl := &w.slots[si]
	n := w.arena.Node(idx)
	if sl.head == 0 {
		w.link(idx, n, si)
		return
	}
	n.Prev, n.Next = slotEnd|si, sl.head
	w.arena.Node(sl.head).Prev = idx
	sl.head = idx
	sl.filed = min(sl.filed+1, math.MaxUint32)
	w.count++
}

// dueNow reports whether the due-now slot holds anything.
func (w *wheel) dueNow() bool {
	return w.slots[w.slotIndex(0, w.elapsed)].head != 0
}

// link appends node idx (n) to slot si's list.
func (w *wheel) link(idx uint32, n *pool.Node, si uint32) {
	sl := &w.slots[si]
	n.Next = slotEnd | si
	if sl.tail == 0 {
		n.Prev = slotEnd | si
		sl.head = idx
		w.mark(si, true)
	} else {
		n.Prev = sl.tail
		w.arena.Node(sl.tail).Next = idx
	}
	sl.tail = idx
	sl.filed = min(sl.filed+1, math.MaxUint32) // an upper bound: saturate, never wrap
	w.count++
}

// mark sets or clears the occupancy bit of slot si.
func (w *wheel) mark(si uint32, occupied bool) {
	l, slot := uint64(si)>>(w.shift+1), uint64(si)&(w.size-1) // size = 2^(shift+1)
	if occupied {
		w.occupied[l][slot/64] |= 1 << (slot % 64)
	} else {
		w.occupied[l][slot/64] &^= 1 << (slot % 64)
	}
}

// unlink removes node idx from its slot list. It must be linked.
func (w *wheel) unlink(idx uint32) { w.unlinkNode(idx, w.arena.Node(idx)) }

// unlinkNode is unlink for a caller that has the node at hand.
func (w *wheel) unlinkNode(idx uint32, n *pool.Node) {
	p, nx := n.Prev, n.Next
	if p&slotEnd != 0 {
		sl := &w.slots[p&^slotEnd]
		sl.head = nx
		if nx&slotEnd != 0 {
			*sl = slotList{} // idx was its only node
			w.mark(p&^slotEnd, false)
		}
	} else {
		w.arena.Node(p).Next = nx
	}
	if nx&slotEnd != 0 {
		if sl := &w.slots[nx&^slotEnd]; sl.head != 0 {
			sl.tail = p
		}
	} else {
		w.arena.Node(nx).Prev = p
	}
	n.Next, n.Prev = 0, 0
	w.count--
}

// popHead unlinks and returns the first node of slot si, or 0 if it is
// empty.
func (w *wheel) popHead(si uint32) uint32 {
	idx := w.slots[si].head
	if idx != 0 {
		w.unlink(idx)
		if sl := &w.slots[si]; sl.head != 0 {
			sl.filed--
		}
	}
	return idx
}

// cascade names a higher-level slot whose nodes must move down.
type cascade struct {
	level    int
	num      uint64 // slot number
	deadline uint64 // the slot must be empty before elapsed passes this tick
}

// take empties level-0 slot number num and returns the first node of its
// former list: the caller walks it with detach, which returns each node's
// successor (0 at the end), before it re-files or frees the node. Nodes
// re-filed meanwhile never land in this slot, which holds one tick, now
// processed.
func (w *wheel) take(num uint64) (first, last uint32) { return w.takeSlot(w.slotIndex(0, num)) }

// takeSlot is take for slot si of slots: a level-0 slot, or a coarse slot
// whose first tick elapsed has reached. It returns the list's first and
// last nodes.
func (w *wheel) takeSlot(si uint32) (first, last uint32) {
	first, last = w.slots[si].head, w.slots[si].tail
	w.slots[si] = slotList{}
	w.mark(si, false)
	return first, last
}

// putBackDue appends to the due-now slot what is left of a list take
// removed (its nodes first to last, not detached yet, so still counted):
// O(1), the list's links kept.
func (w *wheel) putBackDue(first, last uint32) {
	si := w.slotIndex(0, w.elapsed)
	sl := &w.slots[si]
	fn, ln := w.arena.Node(first), w.arena.Node(last)
	ln.Next = slotEnd | si
	if sl.tail == 0 {
		fn.Prev = slotEnd | si
		sl.head = first
		w.mark(si, true)
	} else {
		fn.Prev = sl.tail
		w.arena.Node(sl.tail).Next = first
	}
	sl.tail = last
	sl.filed = math.MaxUint32 // an upper bound: its count is not known
}

// detach accounts for a node that take removed from its slot and returns
// the next node of the taken list, or 0 at its end.
func (w *wheel) detach(n *pool.Node) uint32 {
	next := n.Next
	if next&slotEnd != 0 {
		next = 0
	}
	n.Next, n.Prev = 0, 0
	w.count--
	return next
}
