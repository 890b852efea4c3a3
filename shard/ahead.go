package shard

import (
	"time"

	"github.com/shardwheel/shardwheel/pool"
)

// Waking for timers still pending.
//
// A Cancel only marks its timer (state.go): the node stays in its slot,
// and a goroutine that planned its sleep by the slots' occupancy alone
// would wake for timers cancelled long before, as a proxy's request
// timeouts nearly all are. A Cancel never changes the plan the goroutine
// made (its caller does not re-plan, hold the wheel for it, or re-arm the
// alarm), so a timer cancelled while the goroutine sleeps for it still
// wakes it; but before each plan the shard goroutine frees
// the ended timers at the heads of the slots it would wake for next
// (pruneAhead): the next occupied slots of level 0 and of the coarse
// slots, until one's head is a timer still pending, and the next occupied
// slot of each higher level, whose cascade window it would wake for. A
// slot whose head is pending is due: the goroutine wakes for it, and
// whatever ended behind that head goes when the slot is met. At most
// pruneBudget nodes a pass: a slot of a million cancelled timers is freed
// over several passes, each a few tens of microseconds.
//
// Housekeeping (a running sweep, free nodes a review left to sort) rides
// on the passes that happen anyway, a share each, and wakes an idle
// goroutine at most every housekeepEvery for a larger share (housekeepStep,
// taken only by a pass with no tick due soon: passStep), never every tick:
// a shard whose timers were all cancelled frees them within about a
// second, and then sleeps until its next timer.

// pruneBudget bounds the nodes pruneAhead frees in one pass.
const pruneBudget = 4096

// housekeepEvery is the least time between two housekeeping passes.
const housekeepEvery = 100 * time.Millisecond

// pruneAhead frees the ended timers at the heads of the slots the shard
// goroutine would wake for next (see the top of this file). The shard
// goroutine, holding the wheel, before it plans.
func (sh *Shard) pruneAhead() {
	budget := pruneBudget
	sh.prune(&budget)
}

// prune is pruneAhead within budget nodes, which it counts down. Holder
// only.
func (sh *Shard) prune(budget *int) {
	sh.assertHolder()
	w := sh.h.w
	for l := range w.levels {
		for *budget > 0 {
			num, ok := w.nextOccupied(l)
			// A level-0 slot holds one tick: a timer reset past it
			// moves on (pruneSlot).
			if !ok || sh.pruneSlot(w.slotIndex(l, num), l == 0, num, budget) {
				break // empty, or its head is pending
			}
		}
		if w.coarseBase == 0 || l == 0 {
			continue
		}
		for *budget > 0 {
			num, ok := w.nextOccupiedIn(w.occupied[w.levels+l], l)
			if !ok || sh.pruneSlot(w.coarseBase+w.slotIndex(l, num), true, num<<(uint(l)*w.shift), budget) {
				break
			}
		}
	}
}

// pruneSlot frees the ended timers at the head of slot si, counting them
// against budget, and reports whether the slot still holds a node (its
// head is pending, or the budget ran out). When exact, the slot runs at
// tick start (a level-0 or a coarse slot), and a plain timer at its head
// that a Reset moved later is filed again at its deadline, as expire would
// when the slot came due.
func (sh *Shard) pruneSlot(si uint32, exact bool, start uint64, budget *int) bool {
	w := sh.h.w
	for ; *budget > 0; *budget-- {
		idx := w.slots[si].head
		if idx == 0 {
			return false
		}
		slot := sh.arena.Slot(idx)
		n := slot.Node()
		s := state(n.State.Load())
		if slot.Flags()&pool.FlagProxy != 0 {
			a, aidx, an := sh.source(n)
			as := state(an.State.Load())
			if st := as.status(); st == statusHanded || st == statusCancelling || as.queued() {
				return true
			}
			w.popHead(si)
			sh.endProxy(idx, n, a, aidx, as)
			continue
		}
		if s.queued() {
			return true
		}
		switch s.status() {
		case statusCancelled:
			w.popHead(si)
			sh.freeNode(idx, n, s)
		case statusPending:
			t := unwrapTicks(s.ticks38(), w.elapsed)
			if !exact || t <= start || s.routed() || slot.FindSeries() != nil {
				return true // due here (routed and periodic timers: see expire)
			}
			w.popHead(si)
			w.insertNode(idx, n, t)
			sh.h.counts[cRefiled]++
		default:
			return true
		}
	}
	return true
}

// housekeepTicks returns housekeepEvery in ticks, at least one.
func (sh *Shard) housekeepTicks() uint64 {
	return uint64(max(int64(housekeepEvery)/sh.tick, 1))
}

// housekeeping reports whether a sweep runs or free nodes wait to be
// sorted: work that wakes an idle goroutine every housekeepEvery. Holder
// only.
func (sh *Shard) housekeeping() bool {
	sh.assertHolder()
	return sh.h.sweep.next != 0 || sh.h.sort != 0 || sh.h.back != 0
}

// housekeepSlack is the fewest ticks to the wheel's next wake that let a
// housekeeping pass take its larger step: that step takes milliseconds (a
// free node sorted costs about a quarter of a microsecond, a cache miss),
// and every timer due meanwhile would wait for it.
const housekeepSlack = 8

// passStep returns the nodes the pass at tick target sweeps and sorts. A
// pass's share is sweepPerPass of each, but of sorting (a cache miss a
// node) only busySortShare while the runner works through a burst's runs
// (busyRuns or more not started, and it is moving: runnerMoving): they
// wait for a CPU that sorting would hold. Every housekeepEvery while there
// is housekeeping a pass takes the larger housekeepStep of both, unless
// the wheel needs a tick t within housekeepSlack (a timer, or a cascade
// window), when the larger step is owed to the first pass after t
// (housekeepAt), which plan wakes for if nothing else does, never at every
// tick in between; or unless the runner is moving with runs not started,
// when it is owed to a pass housekeepSlack ticks later. A runner held by
// its task (blocked, or on a CPU of its own) defers nothing. The shard
// goroutine, holding the wheel, after its hand-offs.
func (sh *Shard) passStep(target uint64) (sweep, sort int) {
	if !sh.housekeeping() {
		return sweepPerPass, sweepPerPass
	}
	waiting := sh.runsWaiting()
	moving := waiting > 0 && sh.runnerMoving()
	sort = sweepPerPass
	if moving && waiting >= busyRuns {
		sort = sh.busySortShare()
	}
	t, soon := sh.h.w.nextWake()
	switch {
	case target < sh.housekeepAt:
	case soon && t <= target+housekeepSlack:
		sh.housekeepAt = t + 1
	case moving:
		sh.housekeepAt = target + housekeepSlack
	default:
		sh.housekeepAt = target + sh.housekeepTicks()
		step := sh.housekeepStep()
		return step, step
	}
	return sweepPerPass, sort
}

// busySortShare returns the free nodes a pass sorts while the runner works
// through a burst's runs: about an eighth of a tick's time at sortNodeCost a
// node, at least sortShareMin and at most sweepPerPass.
func (sh *Shard) busySortShare() int {
	return int(min(max(sh.tick/(8*int64(sortNodeCost)), sortShareMin), sweepPerPass))
}

const (
	// busyRuns is the runs waiting for the runner that make a pass sort
	// less: a burst's (a million timers over two seconds hand about 250
	// a tick to each of two shards), not the few a proxy's churn fires,
	// whose passes sort at the full share so that a spike's memory
	// comes back as fast with the churn running as without.
	busyRuns = 64
	// sortNodeCost is about what sorting a free node costs: a cache miss.
	sortNodeCost = 250 * time.Nanosecond
	// sortShareMin is the fewest free nodes a pass sorts while the
	// runner has a burst's runs waiting: half a million a second at 1ms
	// ticks.
	sortShareMin = 512
)

// housekeepStep returns the nodes a housekeeping pass sweeps or sorts: an
// eighth of the nodes a sweep visits, so that about a second of
// housekeeping passes visits them all, but at least sweepStep and at most
// 2^18: a millisecond or two of sweeping, tens of milliseconds of sorting
// (a cache miss a node), which is why it waits for a pass with no tick due
// soon and no runs waiting (passStep). Holder only.
func (sh *Shard) housekeepStep() int {
	return int(min(max(sh.sweptNodes()/8, sweepStep), 1<<18))
}
