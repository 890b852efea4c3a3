package shard

import (
	"fmt"
	"slices"
	"sync/atomic"
)

// verify checks the wheel's invariants and panics, through badNode or with
// a "shardwheel: wheel:" message, on the first one broken. The holder
// only, and not in the middle of a pass, when no slot is half taken. With
// the build tag shardwheel_verify (debug, verify_on.go) the shard goroutine
// runs it after every pass; tests call it directly.
//
//   - each slot's list is well formed: its ends name the slot, every inner
//     link is mirrored, and it holds only pending, cancelling, cancelled
//     or stopped nodes (never a running one);
//   - a level's occupancy bit is set exactly for its non-empty slots;
//   - count is the number of nodes linked, and each slot's filed at least
//     its length;
//   - no slot lies behind elapsed, and none at it but level 0's, which
//     holds the timers filed due since the last pass (insertDue):
//     everything due before has been processed;
//   - no higher-level slot is past its cascade deadline;
//   - placement: a pending node that is not queued for re-filing is due no
//     earlier than its slot's start, or is overdue and in the next tick's
//     slot (producers may move deadlines later, or earlier with the node
//     queued, at any time);
//   - coarse slots (slack.go) follow the same rules, but for cascade
//     deadlines: they have none, and none is due now;
//   - the runners' (verifyRunners): the current one has every run handed
//     and is not left, every held key has a blocked run of its own, and
//     at most MaxBlocked runners are left.
func (sh *Shard) verify() {
	sh.verifyRunners()
	w := sh.h.w
	linked := 0
	for l := 0; l < w.levels; l++ {
		for slot := range w.size {
			linked += w.verifySlot(l, slot, false, linked)
		}
	}
	if w.coarseBase != 0 {
		for l := 0; l < w.levels; l++ {
			for slot := range w.size {
				linked += w.verifySlot(l, slot, true, linked)
			}
		}
	}
	if linked != w.count {
		w.fail("count %d, nodes linked %d", w.count, linked)
	}
}

// verifySlot checks level l's slot (a coarse slot if coarse) for verify
// and returns its length; linked is the nodes verify counted before it.
func (w *wheel) verifySlot(l int, slot uint64, coarse bool, linked int) int {
	si, occ, what := uint32(uint64(l)*w.size+slot), w.occupied[l], "level"
	if coarse {
		si, occ, what = w.coarseBase+si, w.occupied[w.levels+l], "coarse level"
	}
	sl := w.slots[si]
	occupied := occ[slot/64]&(1<<(slot%64)) != 0
	if occupied != (sl.head != 0) || (sl.head == 0) != (sl.tail == 0) {
		w.fail("%s %d slot %d: occupied %v, head %d, tail %d", what, l, slot, occupied, sl.head, sl.tail)
	}
	if sl.head == 0 {
		return 0
	}
	if coarse && l == 0 {
		w.fail("coarse level 0 slot %d holds nodes", slot)
	}
	cur := w.num(l, w.elapsed)
	// Coarse slots run when elapsed reaches their first tick: none is
	// due now.
	dueNow := l == 0 && slot == cur&(w.size-1) && !coarse
	if slot == cur&(w.size-1) && !dueNow {
		w.fail("%s %d slot %d holds elapsed %d", what, l, slot, w.elapsed)
	}
	num := cur + 1 + (slot-cur-1)&(w.size-1)
	start := num << (uint(l) * w.shift)
	if l > 0 && !coarse && num == cur+1 && w.elapsed > w.cascadeDeadline(l, num) {
		w.fail("level %d slot %d is past its cascade deadline %d at elapsed %d", l, slot, w.cascadeDeadline(l, num), w.elapsed)
	}
	length := 0
	prev := slotEnd | si
	for idx := sl.head; idx&slotEnd == 0; {
		n := w.arena.Node(idx)
		if n.Prev != prev {
			w.fail("node %d: Prev %#x, want %#x", idx, n.Prev, prev)
		}
		s := state(n.State.Load())
		switch {
		case s.status() == statusNew || s.status() == statusFired || s.status() == statusRunning:
			badNode(idx, s, "new, fired or running node in the wheel")
		case dueNow:
			// Filed due, or reset later since: both run or move
			// at the next pass.
		case s.status() == statusPending && !s.queued() && max(unwrapTicks(s.ticks38(), w.elapsed), w.elapsed+1) < start:
			w.fail("node %d due at tick %d sits in a slot starting at %d", idx, unwrapTicks(s.ticks38(), w.elapsed), start)
		}
		length++
		if linked+length > w.count {
			w.fail("more nodes linked than count %d (a cycle?)", w.count)
		}
		prev, idx = idx, n.Next
		if idx == slotEnd|si && sl.tail != prev {
			w.fail("%s %d slot %d: tail %d, list ends at %d", what, l, slot, sl.tail, prev)
		}
	}
	if uint32(length) > sl.filed {
		w.fail("%s %d slot %d: %d nodes, filed %d", what, l, slot, length, sl.filed)
	}
	return length
}

func (w *wheel) fail(format string, args ...any) {
	panic("shardwheel: wheel: " + fmt.Sprintf(format, args...))
}

// Who writes which of the Shard's cache lines, as doc.go's table says,
// recorded with the verify tag: every write of a field the table names
// goes with a call of wrote, which notes the role of the goroutine
// writing (the shard goroutine, another goroutine holding the wheel, or
// any other), and TestLineWriters holds the table's "written by" column
// to what a mixed load recorded. Without the tag wrote compiles to
// nothing.

// lineGroup is a group of doc.go's table: fields on lines of their own.
type lineGroup uint8

const (
	lineFixed lineGroup = iota
	lineOwner
	lineQueue
	lineBacklog
	lineAttention
	linePlan
	lineStarved
	lineRuns
	lineExecutor
	lineHolder
	lineGoroutine
	numLineGroups
)

// lineGroupNames are the groups as the table names them.
var lineGroupNames = [numLineGroups]string{
	"fixed", "owner", "queue", "backlog", "attention", "plan", "starved", "runs", "executor", "holder", "goroutine",
}

// Writer roles, as bits of lineWriters' words.
const (
	roleGoroutine = 1 << iota // the shard's own goroutine
	roleHolder                // another goroutine, holding the wheel
	roleOther                 // any other goroutine
)

// lineWriters holds, per group, the roles that wrote it: Or'ed in by any
// goroutine, read by tests. Made by New with the verify tag, nil without.
type lineWriters [numLineGroups]atomic.Uint32

// wrote records, with the verify tag, that the calling goroutine writes a
// field of group g. Any goroutine; never blocks.
func (sh *Shard) wrote(g lineGroup) {
	if debug {
		sh.lines[g].Or(sh.writerRole())
	}
}

// writerRole returns the role of the calling goroutine on this shard.
func (sh *Shard) writerRole() uint32 {
	switch me := goroutineToken(); {
	case me == sh.g.Load():
		return roleGoroutine
	case sh.h.by.Load() == me:
		return roleHolder
	}
	return roleOther
}

// verifyRunners checks the runners' invariants, for verify: the current
// runner has been handed (tail) every run the shard goroutine wrote, has
// claimed no more, and is not left; every held key is the key of a blocked
// run of its own, and the runners left are within MaxBlocked. The shard
// goroutine, between passes.
func (sh *Shard) verifyRunners() {
	if r := sh.runner; r != nil {
		w := r.word.Load()
		if t := r.tail.Load(); t != r.handed || w>>runShift > t || w&runLeft != 0 {
			panic(fmt.Sprintf("shardwheel: runner: handed %d, tail %d, word %#x", r.handed, t, w))
		}
	}
	for key := range sh.heldKeys {
		if !slices.ContainsFunc(sh.blocked, func(b *blockedRun) bool { return b.keyed && b.key == key }) {
			panic(fmt.Sprintf("shardwheel: runner: key %d held with no blocked run of its own", key))
		}
	}
	if sh.cfg.BlockedAfter > 0 && len(sh.blocked) > sh.cfg.MaxBlocked {
		panic(fmt.Sprintf("shardwheel: runner: %d runners left, MaxBlocked %d", len(sh.blocked), sh.cfg.MaxBlocked))
	}
}
