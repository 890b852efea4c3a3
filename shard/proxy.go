package shard

import (
	"github.com/shardwheel/shardwheel/internal/stress"
	"github.com/shardwheel/shardwheel/pool"
)

// Proxies: the nodes that stand, on a key's shard, for the routed timers
// other shards crossed to it (see cross.go).

// source returns the node a proxy's Key names, with its shard.
func (sh *Shard) source(pn *pool.Node) (*Shard, uint32, *pool.Node) {
	a := sh.cfg.Group.Shards[pn.Key>>32]
	idx := uint32(pn.Key)
	return a, idx, a.arena.Node(idx)
}

// placeProxy files proxy pidx (pn, pending in state ps, in no list) by
// its timer's state: at its deadline while handed (the next tick while a
// Reset's push is on its way), or frees it, handing the timer back, once
// the timer has ended. It returns the tick it filed the proxy at. Holder
// only.
func (sh *Shard) placeProxy(pidx uint32, pn *pool.Node, ps state) (uint64, bool) {
	sh.assertHolder()
	a, aidx, an := sh.source(pn)
	s := state(an.State.Load())
	w := sh.h.w
	var t uint64
	switch st := s.status(); {
	case s.queued() || st == statusCancelling:
		t = w.elapsed + 1 // met again once the push or the Cancel is done
	case st == statusHanded:
		t = unwrapTicks(s.ticks38(), w.elapsed)
	default:
		sh.endProxy(pidx, pn, a, aidx, s)
		return 0, false
	}
	if !moveProxy(pn, ps, ps.withTicks(t)) {
		return 0, false // Drain claimed it
	}
	sh.file(pidx, pn, t)
	return t, true
}

// endProxy frees proxy pidx (pn) of a timer that has ended in state s, and
// hands the timer's node (aidx, shard a) back to a unless Stop claimed
// either. Handing back pushes the node on a's attention queue and takes it
// in at once if nobody holds a's wheel (whoever does takes it in as it lets
// go): a's goroutine is not woken for it. Holder only.
func (sh *Shard) endProxy(pidx uint32, pn *pool.Node, a *Shard, aidx uint32, s state) {
	sh.assertHolder()
	ps := state(pn.State.Load())
	fs := ps.to(statusFired) // a proxy ends as if it ran
	if ps.status() == statusStopped || !moveProxy(pn, ps, fs) {
		// Drain claimed it (Stop is under way), before the load or
		// after: a stopped node is never freed (Drain reads its flags).
		return
	}
	sh.freeNode(pidx, pn, fs)
	if s.status() != statusStopped {
		stress.Point()
		a.wrote(lineAttention)
		a.attention.Push(aidx, a.arena.Link(aidx))
		a.holdAndTakeIn()
	}
}

// expireProxy handles proxy pidx (pn), whose level-0 slot came due: it
// fires the timer it stands for if that is due and handed, and hands its
// task to the runner, files the proxy again if a Reset moved the deadline
// later (or a push or a Cancel is on its way), or frees it once the timer
// has ended. Shard goroutine, holding the wheel.
func (sh *Shard) expireProxy(pidx uint32, pn *pool.Node) {
	a, aidx, an := sh.source(pn)
	w := sh.h.w
	for {
		s := state(an.State.Load())
		if s.status() != statusHanded || s.queued() {
			sh.placeProxy(pidx, pn, state(pn.State.Load()))
			return
		}
		tick := unwrapTicks(s.ticks38(), w.elapsed)
		if tick > w.elapsed {
			if ps := state(pn.State.Load()); !moveProxy(pn, ps, ps.withTicks(tick)) {
				return // Drain claimed it
			}
			sh.h.counts[cRefiled]++
			sh.work.refiled++
			w.insert(pidx, tick)
			return
		}
		gen := genOf(an, s)
		x, fs, again := sh.fireDue(an, s, a.ref(aidx, gen), pidx, pn)
		if again {
			continue // Cancel or Reset won the race
		}
		if x == nil {
			return // held back behind its key's blocked task
		}
		x.task, x.key, x.keyed, x.tick, x.idx, x.gen, x.series = a.arena.Slot(aidx).Task(), an.Key, true, tick, aidx, gen, false
		// Counted before the token goes back: Pending never reads a
		// timer twice.
		a.wrote(lineRuns)
		a.crossedFired.Add(1)
		a.releaseToken()
		sh.work.fired++
		sh.endProxy(pidx, pn, a, aidx, fs)
		sh.hand(x)
		return
	}
}

// attendProxy handles proxy pidx (pn), taken off the attention queue: a
// new proxy its timer's crossing pushed, which it settles (new to
// pending), or one a Reset that moved the timer's deadline earlier pushed,
// whose timer's queued bit it clears. Either way it then files the proxy
// by the timer's state (placeProxy). Settling comes first, then reading
// the timer: a Reset that saw the proxy new has changed the deadline
// before it looked, and one that sees it pending pushes it again (see the
// file comment). Holder only.
func (sh *Shard) attendProxy(pidx uint32, pn *pool.Node) {
	sh.assertHolder()
	ps := state(pn.State.Load())
	switch ps.status() {
	case statusStopped:
		return // Drain claimed it
	case statusNew:
		ns := ps.to(statusPending)
		if !moveProxy(pn, ps, ns) {
			return
		}
		sh.h.counts[cProxied]++
		ps = ns
	default:
		_, _, an := sh.source(pn)
		dequeue(an)
		if pn.Prev == heldOut {
			return // held back behind its key's blocked task: met at the release
		}
		if pn.Prev != 0 {
			sh.h.w.unlink(pidx)
		}
	}
	if t, ok := sh.placeProxy(pidx, pn, ps); ok {
		sh.wakeFor(t)
	}
}
