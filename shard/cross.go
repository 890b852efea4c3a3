package shard

import (
	"time"

	"github.com/shardwheel/shardwheel/internal/stress"
	"github.com/shardwheel/shardwheel/pool"
)

// Routed timers: filed where they are scheduled, run where their key
// routes.
//
// A routed timer (Request.Routed) belongs to the shard its key routes to
// (Group.Route): its task runs on that shard's goroutine, so that the
// tasks of one key run one at a time, in deadline order (unless an
// executor, Config.Run, runs them on goroutines of its own). But it is filed
// in the wheel of the shard it was scheduled on, the caller's, like any
// timer without a key: most routed timers are request timeouts, cancelled
// long before they are due, and a timer that never runs need not cross to
// another core. It crosses only when it comes near its deadline: when a
// holder of its wheel would file it in level 0 (its deadline less than
// WheelSize ticks away, at its Schedule or when a cascade moves it down),
// or meets it due. Below, A is the shard whose arena holds the timer's
// node a, K the shard its key routes to (never A: a timer routed to its
// own shard is filed and run like any other).
//
// Crossing (cross, A's holder): take a node p from K's arena, by the
// shared lists any producer uses, and make it a proxy: its Key names a
// (A's number and a's index), FlagProxy marks it, and its state is new,
// with a's deadline. Store p's index in a's link (a is in no list now),
// CAS a from pending to handed, push p on K's attention queue, and wake
// K's goroutine for a's deadline. K's holder takes p in with the queue's
// other nodes, before any transfer cap applies, and files it at a's
// deadline (attendProxy), reading a's state after it has settled p (new
// to pending).
//
// A handed timer is live: Cancel, Reset, Pending, Deadline and Stop act on
// a as on any timer, and p stands for it in K's wheel until a has ended:
//
//   - Cancel ends a as usual (its task dropped, a cancelled), setting a's
//     queued bit in the same CAS, and pushes p on K's attention queue
//     (cancelHanded): K's next holder meets p with a cancelled and frees
//     both, rather than at a's deadline, which a Reset may have moved an
//     hour away. If p is still new, K has not read a's state yet: the
//     Cancel clears the bit instead, and K frees p when it settles it.
//   - Reset to a later deadline rewrites a's ticks: K meets p at the old
//     tick and files it again at the new one (expireProxy).
//   - Reset to an earlier deadline rewrites a's ticks, then looks at p: if
//     p is still new, K has not read a's deadline yet and reads the new
//     one (wakeFor makes K come in time); else it sets a's queued bit, by
//     CAS, while a is still handed, and pushes p on K's attention queue,
//     so that K files p again (attendProxy). The queued bit, set only while
//     a is handed (by such a Reset, a Cancel or the crossing itself) and
//     cleared by K when it takes p off its queue (or by the Cancel that
//     pushed nothing), makes the push happen once, and K never frees p
//     while it is set: the push may be on its way.
//   - Stop claims a (A's Drain); K's Drain skips proxies, and a holder of
//     K's that meets p with a stopped frees p alone.
//
// K's holder that meets p due with a handed and not queued fires a (CAS
// handed to fired, the task read from A's slot), hands the task to K's
// runner, frees p, and hands a back to A; so does one that meets p with a
// cancelled (and not queued), without running anything. Handing back pushes a on A's
// attention queue, whose holder frees it (attend): only A's holders free
// A's nodes. The timer counts in A's Stats throughout (Scheduled, Fired by
// crossedFired, Cancelled, Stopped), so each shard's figures add up.
//
// Order: K files the timers of a key by their deadlines, and runs them in
// that order, one at a time, when each has crossed before K reaches its
// tick: a timer filed from WheelSize ticks out or more crosses at least a
// tick before it is due (the cascade moves it down by then), or later if
// its wheel's goroutine falls behind by more than that.

// Group is the shards of one Scheduler, among which routed timers cross.
// Shards[i] is the shard whose Config.ID is i, and Route(key) the number
// of the shard key routes to. Set up before any shard of it starts;
// immutable afterwards.
//
// Its shards count ticks from one origin, Origin, a reading of their
// shared clock: a routed timer's deadline tick means the same tick in
// every one of them.
type Group struct {
	Shards []*Shard
	Route  func(key uint64) int
	Origin time.Duration
}

// proxyKey packs the Key of a proxy for node idx of shard id.
func proxyKey(id int, idx uint32) uint64 { return uint64(id)<<32 | uint64(idx) }

// RouteOf returns the shard a routed timer with key, filed on this shard,
// runs on, or nil if that is this one. Any goroutine.
func (sh *Shard) RouteOf(key uint64) *Shard { return sh.routeOf(key) }

// routeOf returns the shard a routed timer with key runs on, or nil if
// that is this one.
func (sh *Shard) routeOf(key uint64) *Shard {
	g := sh.cfg.Group
	if g == nil {
		return nil
	}
	if k := g.Shards[g.Route(key)]; k != sh {
		return k
	}
	return nil
}

// crossing reports whether node n, pending in state s at tick t, must
// cross now rather than be filed at t: it is routed to another shard and t
// is within level 0's reach (or past). It returns that shard. Holder
// only.
func (sh *Shard) crossing(n *pool.Node, s state, t uint64) *Shard {
	sh.assertHolder()
	if !s.routed() || t >= sh.h.w.elapsed+sh.h.w.size {
		return nil
	}
	return sh.routeOf(n.Key)
}

// cross hands the routed timer on node idx (n), pending in state s and in
// no list, over to shard k (see the file comment). It reports false if it
// could not: a Cancel or Reset changed s first (the caller reloads and
// decides again), or k's arena is full (the caller files the timer for the
// next tick, and it tries again then). Holder only.
func (sh *Shard) cross(k *Shard, idx uint32, n *pool.Node, s state) bool {
	sh.assertHolder()
	p := CurrentP()
	pidx, pslot, ok := k.takeShared(p, &k.lanes[p&k.laneMask])
	if !ok {
		return false
	}
	pn := pslot.Node()
	pn.Key = proxyKey(sh.id, idx)
	pslot.SetFlags(pool.FlagProxy)
	t := unwrapTicks(s.ticks38(), sh.h.w.elapsed)
	startLife(pn, statusNew, t, 0)
	stress.Point()
	// Handed and queued at once: the queued bit keeps every other
	// pusher off a's link (a Reset of a filed timer pushes it on the
	// attention stack) until p's index is stored there, and resetHanded
	// from reading it before.
	if !n.State.CompareAndSwap(uint64(s), uint64(s.to(statusHanded).withQueued(true))) {
		// p was never published: end its life and give it back to the
		// lane it came from, unless k's Drain (Stop) claimed it
		// meanwhile, the only other goroutine that can see it: a
		// stopped node is never freed, and Drain reads its flags.
		ps := state(pn.State.Load())
		if ps.status() != statusNew || !pn.State.CompareAndSwap(uint64(ps), uint64(ps.to(statusCancelled))) {
			return false
		}
		var c pool.Chain
		k.arena.Add(&c, pidx)
		k.arena.PutChain(p, &c)
		return false
	}
	n.Prev = detached // out of the wheel, back by the attention stack
	sh.arena.Link(idx).Store(pidx)
	stress.Point()
	for {
		// A Reset may have moved the deadline, a Cancel ended the timer:
		// either keeps the bit, and k reads the state when it takes p in.
		s = state(n.State.Load())
		if n.State.CompareAndSwap(uint64(s), uint64(s.withQueued(false))) {
			break
		}
	}
	sh.h.counts[cCrossed]++
	stress.Point()
	k.wrote(lineAttention)
	k.attention.Push(pidx, pslot.Link())
	// The deadline as it is now: a Reset during the hand-over may not
	// have woken k (it found the bit set).
	k.wakeFor(min(t, unwrapTicks(s.ticks38(), sh.h.w.elapsed)))
	return true
}

// fileOrCross files node idx (n, pending in state s at tick t, in no list)
// at t, or crosses it if it is a routed timer due within level 0's reach.
// Holder only.
func (sh *Shard) fileOrCross(idx uint32, n *pool.Node, s state, t uint64) {
	sh.assertHolder()
	for {
		k := sh.crossing(n, s, t)
		if k == nil {
			sh.file(idx, n, t)
			return
		}
		if sh.cross(k, idx, n, s) {
			return
		}
		s = state(n.State.Load())
		switch s.status() {
		case statusPending:
			if s.queued() {
				// An earlier Reset pushed it meanwhile: filed, the
				// attention stack's holder moves it.
				sh.file(idx, n, max(t, sh.h.w.elapsed+1))
				return
			}
			if t2 := unwrapTicks(s.ticks38(), sh.h.w.elapsed); t2 != t {
				t = t2 // reset meanwhile
				continue
			}
			// k's arena is full: the next tick tries again.
			sh.file(idx, n, sh.h.w.elapsed+1)
			return
		case statusCancelling:
			sh.file(idx, n, sh.h.w.elapsed+1) // met again, cancelled
			return
		case statusCancelled:
			sh.releaseNode(idx, n, s)
			return
		case statusStopped:
			return // Stop claimed it: out of the wheel, never freed
		default:
			badNode(idx, s, "a timer being filed ended in an impossible state")
		}
	}
}

// cancelHanded lets the shard the timer on node idx (n) is routed to know
// that a Cancel just ended it, having set its queued bit (see cancel): it
// pushes the timer's proxy on that shard's attention queue, whose next
// holder meets it ended, frees it and hands the node back, rather than
// at the timer's deadline, which a Reset may have moved an hour away. It
// takes no wheel: the key's shard holds the proxy in its wheel, so its
// goroutine comes by the proxy's tick at the latest, and it is signalled
// only if it plans to sleep for longer than its sweep check (as a lane's
// every cancelCheck-th Cancel signals it). The node's Key and link are the
// cancelled life's until the node is handed back, which the queued bit
// holds off. Any goroutine; never waits.
func (sh *Shard) cancelHanded(idx uint32, n *pool.Node) {
	k := sh.routeOf(n.Key)
	pidx := sh.arena.Link(idx).Load()
	stress.Point()
	if pn := k.arena.Find(pidx); pn == nil || state(pn.State.Load()).status() == statusNew {
		// k has not settled the proxy yet (it is on k's attention queue
		// already): it reads the timer's state once it has, and must
		// find it cancelled and not queued, so that it frees the proxy.
		dequeue(n)
		return
	}
	k.wrote(lineAttention)
	k.attention.Push(pidx, k.arena.Link(pidx))
	if k.sleepsLong() {
		k.signal()
	}
}

// resetHanded is Reset for the handed timer r (node n, state s), routed
// to shard k, which is to run at tick t (see the file comment). done is
// false if the state changed first (the caller reloads); ok is Reset's
// answer.
func (sh *Shard) resetHanded(k *Shard, r Ref, n *pool.Node, s state, t uint64) (done, ok bool) {
	idx := r.idx
	stress.Point()
	if !n.State.CompareAndSwap(uint64(s), uint64(s.withTicks(t))) {
		return false, false // the caller reloads
	}
	if t >= unwrapTicks(s.ticks38(), t) {
		return true, true // later: k meets the proxy and moves it on
	}
	stress.Point()
	pn := k.arena.Find(sh.arena.Link(idx).Load())
	if pn == nil || state(pn.State.Load()).status() == statusNew {
		// k has not read the deadline yet; it will read this one.
		k.wakeFor(t)
		return true, true
	}
	for {
		var mine bool
		s, mine = load(n, r.gen)
		if !mine || s.status() != statusHanded || s.queued() {
			return true, true // ended, or a push is on its way already
		}
		if n.State.CompareAndSwap(uint64(s), uint64(s.withQueued(true))) {
			break
		}
	}
	pidx := sh.arena.Link(idx).Load()
	stress.Point()
	k.wrote(lineAttention)
	k.attention.Push(pidx, k.arena.Link(pidx))
	k.holdAndTakeIn()
	return true, true
}
