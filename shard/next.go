package shard

import "math/bits"

// What the wheel needs next: its next due slot, cascade and wake-up tick,
// which advance and plan read (see wheel.go).

// nextOccupied returns the number of level l's first occupied slot after
// the one holding elapsed, or false if the level is empty. No occupied slot
// lies at or behind elapsed's (verify checks it), so the ring scan from the
// next slot finds the earliest.
func (w *wheel) nextOccupied(l int) (uint64, bool) { return w.nextOccupiedIn(w.occupied[l], l) }

// nextOccupiedIn is nextOccupied for a ring of level l whose occupancy
// bits are occ: the level's slots, or its coarse slots.
func (w *wheel) nextOccupiedIn(occ []uint64, l int) (uint64, bool) {
	base := w.num(l, w.elapsed) + 1
	from := base & (w.size - 1)
	nw := uint64(len(occ))
	wi := from / 64
	var slot uint64
	if m := occ[wi] &^ (1<<(from%64) - 1); m != 0 {
		slot = wi*64 + uint64(bits.TrailingZeros64(m))
	} else {
		found := false
		for i := uint64(1); i <= nw; i++ {
			if j := (wi + i) % nw; occ[j] != 0 {
				slot, found = j*64+uint64(bits.TrailingZeros64(occ[j])), true
				break
			}
		}
		if !found {
			return 0, false
		}
	}
	return base + (slot-from)&(w.size-1), true
}

// nextDue returns the earliest tick with a level-0 slot occupied.
func (w *wheel) nextDue() (uint64, bool) {
	if w.count == 0 {
		return 0, false
	}
	return w.nextOccupied(0)
}

// windowOpen returns the tick from which level l's slot num may be moved
// down: the start of slot num-1.
func (w *wheel) windowOpen(l int, num uint64) uint64 {
	return (num - 1) << (uint(l) * w.shift)
}

// cascadeDeadline returns the last elapsed value at which level l's slot num
// may still hold nodes: the tick before its first for level 1, or the tick
// before the window of its first lower slot opens.
func (w *wheel) cascadeDeadline(l int, num uint64) uint64 {
	return num<<(uint(l)*w.shift) - 1<<(uint(l-1)*w.shift)
}

// nextCascade returns the occupied higher-level slot with the earliest
// cascade deadline.
func (w *wheel) nextCascade() (cascade, bool) {
	var best cascade
	found := false
	if w.count == 0 {
		return best, false
	}
	for l := 1; l < w.levels; l++ {
		if num, ok := w.nextOccupied(l); ok {
			if d := w.cascadeDeadline(l, num); !found || d < best.deadline {
				best, found = cascade{l, num, d}, true
			}
		}
	}
	return best, found
}

// nextWake returns the tick the shard goroutine must process next for the
// wheel's
// sake: the earliest due level-0 slot or coarse slot, or the opening of a
// higher slot's cascade window, or the next tick while an open window
// still holds nodes.
func (w *wheel) nextWake() (uint64, bool) {
	next, found := w.nextDue()
	if w.count == 0 {
		return 0, false
	}
	if t, ok := w.nextCoarse(); ok && (!found || t < next) {
		next, found = t, true
	}
	for l := 1; l < w.levels; l++ {
		if num, ok := w.nextOccupied(l); ok {
			t := max(w.windowOpen(l, num), w.elapsed+1)
			if !found || t < next {
				next, found = t, true
			}
		}
	}
	return next, found
}
