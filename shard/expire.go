package shard

import (
	"math"

	"github.com/shardwheel/shardwheel/pool"
)

// Expiry: the shard goroutine, holding the wheel, fires the timers that
// come due, hands their tasks to the runner (runner.go) and moves higher
// levels down. Everything here is the shard
// goroutine's.

// advance processes every tick up to target: it expires the level-0
// slots that come due and, before elapsed passes a higher slot's cascade
// deadline, moves what is left of that slot down (normally nothing:
// cascadeAhead has moved it in shares). When the runner's backlog is full
// (runList), it stops at the tick it reached, the rest of that tick's
// timers in its due-now slot: the next pass goes on from there.
//
// Coarse slots (slack.go) come due at their first tick, where they run
// like a level-0 slot: after that tick's level-0 slot, before a cascade
// whose deadline is that tick.
func (sh *Shard) advance(target uint64) {
	w := sh.h.w
	if w.dueNow() && !sh.runSlot(w.elapsed) { // the timers filed due already (see wheel.insertDue)
		return
	}
	for {
		due, okDue := w.nextDue()
		c, okC := w.nextCascade()
		cs, okCs := w.nextCoarse()
		if okC && c.deadline <= target && (!okDue || c.deadline < due) && (!okCs || c.deadline < cs) {
			w.setElapsed(c.deadline)
			sh.cascade(c.level, c.num, math.MaxInt) // all of it: filed may be short after a wrap
			continue
		}
		next, okNext := due, okDue
		if okCs && (!okDue || cs < due) {
			next, okNext = cs, true
		}
		if !okNext || next > target {
			break
		}
		w.setElapsed(next)
		ran := true
		if okDue && due == next {
			ran = sh.runSlot(due)
		}
		if okCs && cs == next {
			ran = sh.runCoarse(next) && ran
		}
		if !ran {
			return
		}
	}
	w.setElapsed(target)
}

// runSlot expires the nodes of level-0 slot number due (the tick elapsed
// just reached, or elapsed itself for the timers filed due), handing the
// due tasks to the runner; false if the runner's backlog filled first.
func (sh *Shard) runSlot(due uint64) bool { return sh.runList(sh.h.w.take(due)) }

// runList expires the nodes of a list that take (or takeCoarse) removed
// from its slot, first to last, and publishes the runs it handed
// (flushRuns): the runner starts them while the pass goes on. Once the
// runner has runBacklog runs it has not started, the rest of the list
// waits in the due-now slot (putBackDue: O(1)) and runList reports false:
// those tasks would only wait behind the others, and a blocked runner must
// not make the shard hold a run record for every timer that comes due.
func (sh *Shard) runList(first, last uint32) bool {
	w := sh.h.w
	for idx := first; idx != 0; {
		if sh.room <= 0 && !sh.makeRoom() {
			w.putBackDue(idx, last)
			sh.full = true
			return false
		}
		n := sh.arena.Node(idx)
		next := w.detach(n)
		sh.expire(idx, n)
		idx = next
	}
	sh.flushRuns()
	return true
}

// cascadeAhead moves down a share of each higher-level slot whose window
// is open, after advance has brought elapsed to the pass's target: in
// proportion to the ticks since the last pass that paced (within the
// window) out of those left before the slot's cascade deadline, and at
// least cascadeChunk nodes, so that a small slot moves in one go and the
// shard goroutine need not tick for it. Passes again within the same tick
// move nothing more.
func (sh *Shard) cascadeAhead() {
	w := sh.h.w
	e := w.elapsed
	if e == sh.pacedTick || w.count == 0 {
		sh.pacedTick = e
		return
	}
	for l := w.levels - 1; l >= 1; l-- {
		num := w.num(l, e) + 1
		sl := &w.slots[w.slotIndex(l, num)]
		if sl.head == 0 {
			continue
		}
		// advance has moved every slot whose deadline it reached.
		d := w.cascadeDeadline(l, num)
		covered := e - max(sh.pacedTick, w.windowOpen(l, num)-1)
		filed := uint64(sl.filed)
		share := filed
		if covered < d-e+1 {
			share = (filed*covered + d - e) / (d - e + covered)
		}
		share = max(share, min(filed, cascadeChunk))
		sh.cascade(l, num, int(share))
	}
	sh.pacedTick = e
}

// cascadeChunk is the least cascadeAhead moves of a slot in a pass: a few
// tens of microseconds of work.
const cascadeChunk = 1024

// cascade moves up to limit nodes of level l's slot num down the wheel,
// where their deadlines now fit, and frees those whose timer has ended.
func (sh *Shard) cascade(l int, num uint64, limit int) {
	w := sh.h.w
	si := w.slotIndex(l, num)
	moved := 0
	for ; moved < limit; moved++ {
		idx := w.popHead(si)
		if idx == 0 {
			break
		}
		n := sh.arena.Node(idx)
		s := state(n.State.Load())
		switch s.status() {
		case statusPending, statusCancelling:
			// Not file: a Reset may have made it due already, and
			// advance may be past its due-now slot. Its attention
			// entry files it again at the next pass, if it is not run
			// at the next tick first. A cancelling node is met again
			// once its Cancel has finished.
			t := max(unwrapTicks(s.ticks38(), w.elapsed), w.elapsed+1)
			if s.status() == statusPending && !s.queued() {
				if k := sh.crossing(n, s, t); k != nil && sh.cross(k, idx, n, s) {
					break
				}
			}
			w.insert(idx, t)
		case statusCancelled:
			sh.releaseNode(idx, n, s)
		case statusStopped:
			// Stop claimed it: out of the wheel, never freed.
		default:
			badNode(idx, s, "new or fired node in the wheel")
		}
	}
	sh.h.counts[cRefiled] += uint64(moved)
	sh.work.refiled += moved
	sh.work.cascaded += moved
}

// expire handles a node whose level-0 slot came due: file it again if a
// Reset moved its deadline later, else fire it and hand its task to the
// runner.
func (sh *Shard) expire(idx uint32, n *pool.Node) {
	w := sh.h.w
	for {
		s := state(n.State.Load())
		switch s.status() {
		case statusPending:
			slot := sh.arena.Slot(idx)
			if f := slot.Flags(); f&pool.FlagProxy != 0 {
				sh.expireProxy(idx, n)
				return
			} else if s.routed() && !s.queued() {
				// A routed timer met here (filed due, or reset earlier
				// into level 0) crosses now; the next tick tries again
				// if it cannot.
				tick := max(unwrapTicks(s.ticks38(), w.elapsed), w.elapsed)
				if k := sh.routeOf(n.Key); k != nil {
					if !sh.cross(k, idx, n, s) {
						w.insert(idx, max(tick, w.elapsed+1))
					}
					return
				}
			}
			if rec := slot.FindSeries(); rec != nil {
				if sh.expireSeries(idx, n, slot, rec, s) {
					continue
				}
				return
			}
			tick := unwrapTicks(s.ticks38(), w.elapsed)
			if tick > w.elapsed {
				sh.h.counts[cRefiled]++
				sh.work.refiled++
				w.insert(idx, tick)
				return
			}
			gen := genOf(n, s)
			x, fs, again := sh.fireDue(n, s, sh.ref(idx, gen), idx, n)
			if again {
				continue // Cancel or Reset won the race
			}
			if x == nil {
				return // held back behind its key's blocked task
			}
			sh.h.counts[cFired]++
			// Published at once, and before its token goes back (see
			// Outs): Live must not count it pending once it is fired.
			sh.wrote(lineGoroutine)
			sh.stats.published[cFired].Store(sh.h.counts[cFired])
			sh.releaseToken()
			sh.work.fired++
			x.task, x.key, x.keyed, x.tick, x.idx, x.gen, x.series = slot.Task(), n.Key, s.routed(), tick, idx, gen, false
			sh.releaseNode(idx, n, fs)
			sh.hand(x)
		case statusCancelled:
			sh.releaseNode(idx, n, s)
		case statusCancelling:
			w.insert(idx, w.elapsed+1) // met again next tick, cancelled
		case statusStopped:
			// Stop claimed it: out of the wheel, never freed.
		default:
			badNode(idx, s, "new or fired node in the wheel")
		}
		return
	}
}

// fireDue fires a due timer, in state s on node n, whose handle is r: the
// shard goroutine met it here on node hidx (hn), which is n itself, or for
// a timer that crossed to this shard its proxy (expireProxy). If the
// timer's key has a task blocked (runner.go), it holds hn back behind it
// and returns a nil run. Else it publishes the run (openRun) and fires the
// timer (fire): it returns the run to fill and hand over and the fired
// state, or, when a Cancel or Reset won the race, withdraws the run
// (dropRun) and reports again: look at the timer again.
func (sh *Shard) fireDue(n *pool.Node, s state, r Ref, hidx uint32, hn *pool.Node) (x *execRun, fs state, again bool) {
	if hk := sh.heldFor(s, n.Key); hk != nil {
		sh.holdBack(hk, hidx, hn)
		return nil, 0, false
	}
	x = sh.openRun(r)
	fs, fired := fire(n, s)
	if !fired {
		sh.dropRun(x)
		return nil, 0, true
	}
	return x, fs, false
}
