package shard

import (
	"cmp"
	"slices"

	"github.com/shardwheel/shardwheel/pool"
)

// Keys held back behind a blocked task (see runner.go): while a routed
// timer's task blocks, the shard goroutine keeps the key's later due
// timers pending, out of the wheel, and puts them in the due-now slot, in
// deadline order, when the task and the key's runs kept behind it have
// returned. Held timers stay pending: a Cancel or Reset of one works as
// in the wheel, and Stop claims them.

// heldOut is Node.Prev of a timer held back behind a blocked task of its
// key: out of the wheel, on its key's held list (linked through Next).
const heldOut = detached - 1

// heldKey is a key held back behind a blocked task of its: the timers met
// due meanwhile, oldest first, linked through Next. The shard goroutine's.
type heldKey struct{ head, tail uint32 }

// holdKey holds key back. The shard goroutine.
func (sh *Shard) holdKey(key uint64) {
	sh.assertGoroutine()
	if sh.heldKeys == nil {
		sh.heldKeys = map[uint64]*heldKey{}
	}
	if sh.heldKeys[key] == nil {
		sh.heldKeys[key] = &heldKey{}
	}
}

// heldFor returns the held list of key if it is held back and the timer in
// state s has a key (routed), else nil: a map lookup only while some key
// is held. The shard goroutine.
func (sh *Shard) heldFor(s state, key uint64) *heldKey {
	if len(sh.heldKeys) == 0 || !s.routed() {
		return nil
	}
	return sh.heldKeys[key]
}

// holdBack keeps node idx (n), a timer of a held key met due and out of
// every slot, pending on the key's held list. The shard goroutine, holding
// the wheel.
func (sh *Shard) holdBack(hk *heldKey, idx uint32, n *pool.Node) {
	sh.assertHolder()
	n.Prev, n.Next = heldOut, 0
	if hk.tail == 0 {
		hk.head = idx
	} else {
		sh.arena.Node(hk.tail).Next = idx
	}
	hk.tail = idx
}

// releaseKey lets key go: its held timers go to the due-now slot in
// deadline order (a Reset may have moved one since it was met; equal
// deadlines keep the order they were met in), where the next pass meets
// them first. The shard goroutine, holding the wheel.
func (sh *Shard) releaseKey(key uint64) {
	sh.assertGoroutine()
	sh.assertHolder()
	hk := sh.heldKeys[key]
	if hk == nil {
		return
	}
	delete(sh.heldKeys, key)
	w := sh.h.w
	type heldTimer struct {
		idx  uint32
		tick uint64 // read once: a Reset may move it meanwhile
	}
	var held []heldTimer
	for idx := hk.head; idx != 0; {
		n := sh.arena.Node(idx)
		held = append(held, heldTimer{idx, unwrapTicks(state(n.State.Load()).ticks38(), w.elapsed)})
		idx = n.Next
	}
	slices.SortStableFunc(held, func(a, b heldTimer) int { return cmp.Compare(a.tick, b.tick) })
	for _, h := range held {
		n := sh.arena.Node(h.idx)
		n.Prev, n.Next = 0, 0
		w.insertDue(h.idx)
	}
}
