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
// Slots are circular doubly-linked lists threaded through pool.Node.Next and
// Prev, each with a sentinel node reserved in the arena (index 1+l*size+s;
// index 0 is never a valid link, so Prev == 0 means "not in the wheel").
// An occupancy bitmap per level finds the next occupied slot without walking
// empty ones.
type wheel struct {
	arena    *pool.Arena
	bits     uint   // log2(size)
	size     uint64 // slots per level, a power of two
	levels   int
	elapsed  uint64     // every deadline <= elapsed has been processed
	occupied [][]uint64 // occupied[l] has one bit per slot of level l
	count    int        // nodes linked in the wheel
}

// detached marks a node the worker has finished with structurally but must
// not free yet, because it is still queued on the attention stack.
const detached = ^uint32(0)

// wheelLevels returns how many levels of size slots cover 2*maxDelayTicks.
func wheelLevels(size int) int {
	b := bits.Len(uint(size)) - 1
	need := bits.Len64(2 * maxDelayTicks) // strictly more than twice: a margin for every size
	return (need + b - 1) / b
}

// reservedNodes is the number of arena indices a wheel needs for sentinels,
// plus index 0.
func reservedNodes(size int) int { return 1 + wheelLevels(size)*size }

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
	for i := uint32(1); i < uint32(reservedNodes(size)); i++ {
		n := a.Node(i)
		n.Next, n.Prev = i, i
	}
	return w
}

func (w *wheel) sentinel(level int, slot uint64) uint32 {
	return 1 + uint32(uint64(level)*w.size+slot)
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
	s := w.sentinel(l, slot)
	sn := w.arena.Node(s)
	n := w.arena.Node(idx)
	n.Next, n.Prev = s, sn.Prev
	w.arena.Node(sn.Prev).Next = idx
	sn.Prev = idx
	w.occupied[l][slot/64] |= 1 << (slot % 64)
	w.count++
}

// unlink removes node idx from its slot list. It must be linked.
func (w *wheel) unlink(idx uint32) {
	n := w.arena.Node(idx)
	w.arena.Node(n.Prev).Next = n.Next
	w.arena.Node(n.Next).Prev = n.Prev
	if n.Prev == n.Next && n.Prev < w.arena.Reserved() {
		// The list is down to its sentinel: clear the occupancy bit.
		l, slot := w.slotOf(n.Prev)
		w.occupied[l][slot/64] &^= 1 << (slot % 64)
	}
	n.Next, n.Prev = 0, 0
	w.count--
}

func (w *wheel) slotOf(sentinel uint32) (int, uint64) {
	i := uint64(sentinel - 1)
	return int(i >> w.bits), i & (w.size - 1)
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
		shift := uint(l) * w.bits
		cur := w.elapsed >> shift & (w.size - 1)
		slot, ok := w.nextOccupied(l, cur)
		if !ok {
			continue
		}
		levelRange := w.size << shift
		start := w.elapsed&^(levelRange-1) + slot<<shift
		if start < w.elapsed&^(1<<shift-1) {
			// The slot lies behind elapsed's own slot: it is the next lap.
			start += levelRange
		}
		return expiration{level: l, slot: slot, deadline: start}, true
	}
	panic("shardwheel: wheel count is positive but no slot is occupied")
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

// take empties the slot of e and returns its former list as (first, end):
// the caller walks Next from first until it reaches end (the slot's
// sentinel), calling detach on each node before it re-files or frees it.
// Nodes re-filed meanwhile never land in this slot: a level-0 slot holds one
// tick, and a higher slot's nodes move to lower levels.
func (w *wheel) take(e expiration) (first, end uint32) {
	s := w.sentinel(e.level, e.slot)
	sn := w.arena.Node(s)
	first = sn.Next
	sn.Next, sn.Prev = s, s
	w.occupied[e.level][e.slot/64] &^= 1 << (e.slot % 64)
	return first, s
}

// detach accounts for a node that take removed from its slot.
func (w *wheel) detach(n *pool.Node) {
	n.Next, n.Prev = 0, 0
	w.count--
}
