package shard

import "fmt"

// debug turns on the invariant checks: verify after every pass, and
// assertions where the worker relies on a property it could otherwise only
// assume (time never moves backwards). Tests call verify directly.
const debug = false

// verify checks the wheel's invariants and panics, through badNode or with
// a "shardwheel: wheel:" message, on the first one broken. Worker only, and
// only between passes, when no slot is half taken:
//
//   - each slot's list is well formed: its ends name the slot, every inner
//     link is mirrored, and it holds only pending or cancelled nodes;
//   - a level's occupancy bit is set exactly for its non-empty slots;
//   - count is the number of nodes linked;
//   - no slot lies at or behind elapsed: everything due has been processed;
//   - placement: a pending node that is not queued for re-filing is due no
//     earlier than its slot's start, or is overdue and in the next tick's
//     slot (producers may move deadlines later, or earlier with the node
//     queued, at any time).
func (sh *Shard) verify() {
	w := sh.w
	linked := 0
	for l := 0; l < w.levels; l++ {
		for slot := range w.size {
			si := uint32(uint64(l)*w.size + slot)
			sl := w.slots[si]
			occupied := w.occupied[l][slot/64]&(1<<(slot%64)) != 0
			if occupied != (sl.head != 0) || (sl.head == 0) != (sl.tail == 0) {
				w.fail("level %d slot %d: occupied %v, head %d, tail %d", l, slot, occupied, sl.head, sl.tail)
			}
			if sl.head == 0 {
				continue
			}
			start := w.slotStart(l, slot)
			if start <= w.elapsed {
				w.fail("level %d slot %d starts at tick %d, not after elapsed %d", l, slot, start, w.elapsed)
			}
			prev := slotEnd | si
			for idx := sl.head; idx&slotEnd == 0; {
				n := w.arena.Node(idx)
				if n.Prev != prev {
					w.fail("node %d: Prev %#x, want %#x", idx, n.Prev, prev)
				}
				s := state(n.State.Load())
				switch {
				case s.status() == statusUnresolved || s.status() == statusFired:
					badNode(idx, s, "unresolved or fired node in the wheel")
				case s.status() == statusPending && !s.queued() && max(unwrapTicks(s.ticks38(), w.elapsed), w.elapsed+1) < start:
					w.fail("node %d due at tick %d sits in a slot starting at %d", idx, unwrapTicks(s.ticks38(), w.elapsed), start)
				}
				linked++
				if linked > w.count {
					w.fail("more nodes linked than count %d (a cycle?)", w.count)
				}
				prev, idx = idx, n.Next
				if idx == slotEnd|si && sl.tail != prev {
					w.fail("level %d slot %d: tail %d, list ends at %d", l, slot, sl.tail, prev)
				}
			}
		}
	}
	if linked != w.count {
		w.fail("count %d, nodes linked %d", w.count, linked)
	}
}

func (w *wheel) fail(format string, args ...any) {
	panic("shardwheel: wheel: " + fmt.Sprintf(format, args...))
}
