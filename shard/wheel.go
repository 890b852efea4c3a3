package shard

import (
	"math/bits"

	"github.com/shardwheel/shardwheel/pool"
)

// wheel is a hierarchical timing wheel over arena nodes, owned by the shard
// worker: no field is touched by any other goroutine.
//
// Level l has size slots, each size^l ticks wide. A node due at tick t is
// filed at the level of the highest bit group in which t differs from
// elapsed (the last tick fully processed), so every node in level 0 is due
// within the current level-1 slot, every node in level 1 within the current
// level-2 slot, and so on. Hence the earliest occupied slot is found by
// scanning levels from 0 upward and taking the first hit (next).
//
// When a slot at level l > 0 comes due, its nodes are re-filed: each lands at
// a lower level, so a node is moved at most once per level over its life
// (levels-1 times in all), never once per wheel revolution as in a single
// wheel with round counters. Deadlines that cross a boundary above the top
// level are filed in the top level, whose slots are read as a ring: next
// adds one level range to a slot start that lies behind elapsed. Keeping
// every deadline within maxDelayTicks < size^levels / 2 of elapsed makes that
// unambiguous.
//
// Slots are doubly-linked lists threaded through pool.Node.Next and Prev,
// whose ends live in slots, outside the arena, so that the wheel takes no
// node the user could have. A list's first node has Prev = slotEnd|slot and
// its last node Next = slotEnd|slot (slot = level*size + index), so either
// end finds its slot without a search. Prev == 0 means "not in the wheel".
// An occupancy bitmap per level finds the next occupied slot without walking
// empty ones.
type wheel struct {
	arena    *pool.Arena
	bits     uint   // log2(size)
	size     uint64 // slots per level, a power of two
	levels   int
	elapsed  uint64     // every deadline <= elapsed has been processed
	occupied [][]uint64 // occupied[l] has one bit per slot of level l
	slots    []slotList // level*size + slot
	count    int        // nodes linked in the wheel
}

// slotList holds the ends of one slot's list: node indices, 0 when empty.
type slotList struct{ head, tail uint32 }

const (
	// slotEnd marks a Next or Prev link that names a slot, not a node:
	// node indices are below pool.MaxNodes < slotEnd.
	slotEnd = 1 << 31
	// detached marks a node the worker has finished with structurally but
	// must not free yet, because it is still on the attention stack. It is
	// never a slot link: slot numbers stay far below 2^31-1.
	detached = ^uint32(0)
)

// wheelLevels returns how many levels of size slots cover 2*maxDelayTicks.
func wheelLevels(size int) int {
	b := bits.Len(uint(size)) - 1
	need := bits.Len64(2 * maxDelayTicks) // strictly more than twice: a margin for every size
	return (need + b - 1) / b
}

func newWheel(a *pool.Arena, size int) *wheel {
	w := &wheel{
		arena:  a,
		bits:   uint(bits.Len(uint(size)) - 1),
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

// levelFor returns the level a deadline t > elapsed is filed at.
func (w *wheel) levelFor(t uint64) int {
	masked := (w.elapsed ^ t) | (w.size - 1)
	l := (bits.Len64(masked) - 1) / int(w.bits)
	return min(l, w.levels-1)
}

// insert files node idx, due at tick t, in the wheel. t must be > elapsed.
func (w *wheel) insert(idx uint32, t uint64) {
	l := w.levelFor(t)
	slot := t >> (uint(l) * w.bits) & (w.size - 1)
	si := uint32(uint64(l)*w.size + slot)
	sl := &w.slots[si]
	n := w.arena.Node(idx)
	n.Next = slotEnd | si
	if sl.tail == 0 {
		n.Prev = slotEnd | si
		sl.head = idx
	} else {
		n.Prev = sl.tail
		w.arena.Node(sl.tail).Next = idx
	}
	sl.tail = idx
	w.occupied[l][slot/64] |= 1 << (slot % 64)
	w.count++
}

// unlink removes node idx from its slot list. It must be linked.
func (w *wheel) unlink(idx uint32) {
	n := w.arena.Node(idx)
	p, nx := n.Prev, n.Next
	var sl *slotList
	if p&slotEnd != 0 {
		sl = &w.slots[p&^slotEnd]
		sl.head = nx
		if nx&slotEnd != 0 {
			sl.head = 0
		}
	} else {
		w.arena.Node(p).Next = nx
	}
	if nx&slotEnd != 0 {
		sl = &w.slots[nx&^slotEnd]
		sl.tail = p
		if p&slotEnd != 0 {
			sl.tail = 0
		}
	} else {
		w.arena.Node(nx).Prev = p
	}
	if sl != nil && sl.head == 0 {
		si := uint64(nx &^ slotEnd) // the list is empty: idx was its only node
		l, slot := si>>w.bits, si&(w.size-1)
		w.occupied[l][slot/64] &^= 1 << (slot % 64)
	}
	n.Next, n.Prev = 0, 0
	w.count--
}

// expiration names the earliest occupied slot and the tick it comes due.
type expiration struct {
	level    int
	slot     uint64
	deadline uint64
}

// next returns the earliest occupied slot, or false if the wheel is empty.
func (w *wheel) next() (expiration, bool) {
	if w.count == 0 {
		return expiration{}, false
	}
	for l := 0; l < w.levels; l++ {
		if slot, ok := w.nextOccupied(l, w.elapsed>>(uint(l)*w.bits)&(w.size-1)); ok {
			return expiration{level: l, slot: slot, deadline: w.slotStart(l, slot)}, true
		}
	}
	panic("shardwheel: wheel count is positive but no slot is occupied")
}

// slotStart returns the first tick that slot of level l stands for, given
// elapsed: the slot at or after elapsed's own slot in the current lap, or in
// the next lap if it lies behind.
func (w *wheel) slotStart(l int, slot uint64) uint64 {
	shift := uint(l) * w.bits
	levelRange := w.size << shift
	start := w.elapsed&^(levelRange-1) + slot<<shift
	if start < w.elapsed&^(1<<shift-1) {
		start += levelRange
	}
	return start
}

// nextOccupied finds the first occupied slot of level l at or after from,
// wrapping around.
func (w *wheel) nextOccupied(l int, from uint64) (uint64, bool) {
	occ := w.occupied[l]
	nw := uint64(len(occ))
	wi := from / 64
	// First word: ignore bits below from.
	if m := occ[wi] &^ (1<<(from%64) - 1); m != 0 {
		return wi*64 + uint64(bits.TrailingZeros64(m)), true
	}
	for i := uint64(1); i <= nw; i++ {
		j := (wi + i) % nw
		if occ[j] != 0 {
			s := j*64 + uint64(bits.TrailingZeros64(occ[j]))
			return s, true
		}
	}
	return 0, false
}

// take empties the slot of e and returns the first node of its former list:
// the caller walks it with detach, which returns each node's successor (0
// at the end), before it re-files or frees the node. Nodes re-filed
// meanwhile never land in this slot: a level-0 slot holds one tick, and a
// higher slot's nodes move to lower levels.
func (w *wheel) take(e expiration) uint32 {
	sl := &w.slots[uint64(e.level)*w.size+e.slot]
	first := sl.head
	*sl = slotList{}
	w.occupied[e.level][e.slot/64] &^= 1 << (e.slot % 64)
	return first
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
