package shard

import (
	"time"

	"github.com/shardwheel/shardwheel/internal/stress"
	"github.com/shardwheel/shardwheel/pool"
)

// Periodic timers: one node serves a whole series.
//
// A periodic timer runs its task at the grid points Anchor + k*Period of
// its grid (pool.Grid; k = 1, 2, ...), computed in clock time, so that
// neither tick rounding nor task time makes it drift: each point is filed
// at the first tick at or after it, which keeps it never early. Its node
// points to a Series record (pool.Series, with the first grid in it),
// which holds the grid of the latest Reset (Grid), and the series'
// progress, which belongs to whoever owns the timer's schedule: the
// holder of the wheel while the node is filed or queued, the run of its
// task while that runs (see pool.Series). A life is periodic when its
// node points to a record: Every sets the pointer before it publishes the
// node, and freeing the node clears it and keeps the record with the
// node for its next periodic life (pool.Slot.TakeSeries), so ordinary
// timers never see one and Every allocates nothing once its nodes have
// held a series each; a block holds the pointers only once a periodic
// timer landed in it (16 bytes a node; a node that held a series keeps
// its 80-byte record too).
//
// # A run
//
// When its tick comes, the shard goroutine moves the node from pending to
// running (begin) instead of firing it, and hands the run to the runner
// (runner.go), the node staying out of the wheel (Prev detached). When the
// task has returned, the run applies the policy for grid points that
// passed meanwhile (step), and moves the node back to pending at the next
// grid point's tick (rearm, on the goroutine that ran the task, which
// pushes it on the attention stack for a holder to file). Only then can
// the next run begin: a series never runs concurrently with itself,
// whatever the executor does. A Cancel while it
// runs moves it from running to cancelled (true: the series was live);
// the run finishes, and its end frees the node instead of filing it. Stop
// claims a running series like a pending one.
//
// # Missed grid points
//
// A grid point is missed when it comes while the series is behind: its
// previous run had not started or not returned. step counts them (Stats:
// PeriodicMissed) and applies the policy:
//
//	SkipMissed   the run served them all: the next run is at the first grid point not
//	             yet come
//	BurstMissed  each gets a run, one a tick (each run files the series again when it
//	             returns), then the grid goes on
//	DelayMissed  the grid restarts at the run's return: the next run is one period
//	             after it
//
// # A plan of the caller's
//
// A series may follow a plan of the caller's (Request.Plan) rather than a
// grid: its record's Base is then the point its next run serves. The
// holder stores that point in the Plan as it hands a run over; the run's
// task (package shardwheel wraps the caller's) chooses the next point
// there, on the run's goroutine, and the run adopts it when the task has
// returned (step): user code never runs on the shard goroutine. A point
// already passed runs at the next tick; one beyond MaxDelay from the
// run's end is brought in to it; a task that chose none (the wrapper
// ends such a series with a Cancel) leaves the series waiting MaxDelay
// for it. A plan's series counts no missed points. A Reset publishes a grid
// as for any series; a plan's series adopts it as its next point (anchor
// plus period) and follows its plan from there.
//
// # Reset
//
// Reset(d) on a series publishes a new grid (anchor the call, period d,
// and the life it is for) by CAS on Grid, then moves the state's deadline to the grid's first point
// as any Reset does (on the attention stack if that is earlier). Whoever
// owns the progress next adopts the new grid (adopt): the holder when it
// files or expires the node, the run when it returns. Concurrent Resets
// end with the grid of the last CAS: an earlier one that finds its grid
// replaced leaves the deadline to the later one, and holders derive the
// deadline from the grid, never from the state alone. A Reset that loses
// a race with the series' end may CAS its grid into the record's next
// life: adopt ignores a grid of another life.

// Missed policies (package shardwheel's Missed values).
const (
	SkipMissed uint8 = iota
	BurstMissed
	DelayMissed
)

// startSeries makes the timer r describes, whose node is slot's and whose
// life is gen, periodic: the node's record gets the grid from r.Now with
// r.Period (clamped to MaxDelay: a longer one overflows the grid's
// arithmetic), or, on a plan, the plan's first point (even one already
// passed, down to MaxDelay before Now, so that no tick arithmetic
// overflows), and its progress begins there. The producer, before it
// files or pushes the node.
func (sh *Shard) startSeries(slot pool.Slot, r *Request, gen uint64) {
	rec := slot.TakeSeries()
	rec.First = pool.Grid{Life: gen, Anchor: int64(r.Now)}
	rec.Seen, rec.Policy, rec.Served, rec.Counted = &rec.First, r.Missed, 0, 0
	rec.Base, rec.Plan = rec.First.Anchor, nil
	if r.Period > 0 {
		rec.First.Period = int64(sh.clampDelay(r.Period))
	} else {
		rec.Base, rec.Plan = int64(r.Now+min(max(r.Delay, -sh.maxDelay), sh.maxDelay)), r.Plan
	}
	// A record kept from an earlier life may hold a Grid that a Reset of
	// that life stored late: none is this life's.
	rec.Grid.Store(nil)
	slot.SetSeries(rec)
}

// adopt makes a series' progress follow the grid a Reset of its life
// published, if there is a new one, and reports whether it did. A grid
// of another life (see pool.Series) is ignored. Owner of the progress.
func adopt(rec *pool.Series) bool {
	g := rec.Grid.Load()
	if g == nil || g == rec.Seen || g.Life != rec.First.Life {
		return false
	}
	rec.Seen, rec.Base, rec.Served, rec.Counted = g, g.Anchor, 0, 0
	if rec.Plan != nil {
		rec.Base = g.Anchor + g.Period // the next point; the plan goes on from it
	}
	return true
}

// nextPoint returns the clock reading of the grid point (or, on a plan,
// the point) the series' next run serves.
func nextPoint(rec *pool.Series) time.Duration {
	if rec.Plan != nil {
		return time.Duration(rec.Base)
	}
	return time.Duration(rec.Base + int64(rec.Served+1)*rec.Seen.Period)
}

// seriesTick returns the tick the series' next run is due at: the first
// that starts at or after its grid point.
func (sh *Shard) seriesTick(rec *pool.Series) uint64 { return sh.ceilTick(nextPoint(rec)) }

// step advances a series whose run returned at clock reading now: it
// adopts a new grid, counts the grid points missed and applies the
// policy (see the top of this file). Owner of the progress (the run).
func (sh *Shard) step(rec *pool.Series, now time.Duration) {
	if p := rec.Plan; p != nil {
		if adopt(rec) {
			return // a Reset's point comes first
		}
		next := now + sh.maxDelay // none chosen (the series is ending): wait for the Cancel
		if p.Chosen.Load() {
			// A point already passed runs at the next tick; the bounds
			// keep the tick arithmetic from overflowing.
			next = min(max(time.Duration(p.Next.Load()), now-sh.maxDelay), next)
		}
		rec.Base = int64(next)
		return
	}
	adopt(rec)
	var m uint64 // the grid points come by now
	if d := int64(now) - rec.Base; d > 0 {
		m = uint64(d / rec.Seen.Period)
	}
	if done := max(rec.Served, rec.Counted); m > done {
		sh.lanes[CurrentP()&sh.laneMask].missed.Add(m - done)
		rec.Counted = m
	}
	switch rec.Policy {
	case SkipMissed:
		rec.Served = max(rec.Served, m)
	case DelayMissed:
		if m > rec.Served {
			rec.Base, rec.Served, rec.Counted = int64(now), 0, 0
		}
	}
}

// seriesFileTick derives the tick a pending (or new) series is filed at
// from its grid, adopting a Reset's, and returns the state s with that
// tick, ns, which the caller CASes in (with whatever status change it
// makes). Whoever owns the series' schedule: the holder, or the run of
// its task, on the goroutine that ran it (rearm).
func (sh *Shard) seriesFileTick(rec *pool.Series, s state) (state, uint64) {
	adopt(rec)
	t := sh.seriesTick(rec)
	return s.withTicks(t), t
}

// expireSeries handles a pending series whose node came out of a level-0
// (or coarse) slot, as expire does an ordinary timer: file it again if its
// grid's next point is later (a Reset), else begin a run and hand it to the
// runner, the node staying out of the wheel until the run files it again
// (rearm). It reports again, asking the caller to look at the node
// again, when its state changed meanwhile.
func (sh *Shard) expireSeries(idx uint32, n *pool.Node, slot pool.Slot, rec *pool.Series, s state) (again bool) {
	w := sh.h.w
	gen := genOf(n, s)
	ns, t := sh.seriesFileTick(rec, s)
	if ns != s {
		if !n.State.CompareAndSwap(uint64(s), uint64(ns)) {
			return true
		}
		s = ns
	}
	if t > w.elapsed || s.queued() {
		// Not due yet; or a Reset left it on the attention stack, from
		// which the run must not go to the runner (the stack would then
		// free a node the run still uses): a holder takes the stack in
		// before the next tick.
		sh.h.counts[cRefiled]++
		sh.work.refiled++
		w.insert(idx, max(t, w.elapsed+1))
		return false
	}
	if hk := sh.heldFor(s, n.Key); hk != nil {
		sh.holdBack(hk, idx, n) // its key's task is blocked (runner.go)
		return false
	}
	x := sh.openRun(sh.ref(idx, gen))
	if _, ok := begin(n, s); !ok {
		sh.dropRun(x)
		return true
	}
	sh.countRun(rec)
	if p := rec.Plan; p != nil {
		p.Served.Store(int64(nextPoint(rec)))
		p.Chosen.Store(false)
	}
	n.Prev = detached // out of the wheel until its run pushes it on the attention stack
	x.task, x.key, x.keyed, x.tick, x.idx, x.gen, x.series = slot.Task(), n.Key, s.routed(), t, idx, gen, true
	sh.hand(x)
	return false
}

// countRun counts a run of a series, which serves its next grid point,
// before the run starts. Shard goroutine.
func (sh *Shard) countRun(rec *pool.Series) {
	rec.Served++
	sh.h.counts[cPeriodicRuns]++
	// Published at once, as Fired is: the pass may go on holding the
	// wheel after the run, and a caller whose CancelWait saw the run end
	// must find it counted.
	sh.stats.published[cPeriodicRuns].Store(sh.h.counts[cPeriodicRuns])
	sh.work.fired++
}

// rearm ends a series' run, on whatever goroutine ran the task: the run
// advances the series (step) and hands the node to the holder by the
// attention stack, pending at its next grid point's tick, or cancelled for
// the holder to free (cancelling: to file where it is met cancelled). No
// holder can free the node before this push: it is detached and on no
// list. Stop's claim leaves it where it is.
func (sh *Shard) rearm(idx uint32) {
	slot := sh.arena.Slot(idx)
	n, rec := slot.Node(), slot.FindSeries()
	now := sh.clock.Now()
	stepped := false
	for {
		s := state(n.State.Load())
		ns := s
		switch s.status() {
		case statusRunning:
			if !stepped {
				sh.step(rec, now)
				stepped = true
			}
			ns, _ = sh.seriesFileTick(rec, s)
			ns = ns.to(statusPending)
		case statusCancelled, statusCancelling:
		case statusStopped:
			return
		default:
			badNode(idx, s, "a periodic timer's run ended in an impossible state")
		}
		stress.Point()
		if !n.State.CompareAndSwap(uint64(s), uint64(ns.withQueued(true))) {
			continue
		}
		if !s.queued() {
			sh.wrote(lineAttention)
			sh.attention.Push(idx, slot.Link())
			sh.holdAndTakeIn()
		}
		return
	}
}

// resetSeries is Reset for a periodic timer (rec the record its node held
// when Reset loaded it, which is r's unless r has ended): the series
// restarts from now with period d (see the top of this file). A period
// shorter than the tick is refused, as Every refuses it: false, and the
// series goes on unchanged.
func (sh *Shard) resetSeries(r Ref, n *pool.Node, rec *pool.Series, d time.Duration) bool {
	if d < sh.cfg.Tick {
		return false
	}
	now := sh.clock.Now()
	d = sh.clampDelay(d)
	g := &pool.Grid{Life: r.gen, Anchor: int64(now), Period: int64(d)}
	for {
		// The state check after the load makes rec r's record at the
		// load. If r's life ends before the CAS, g may land in the
		// record's next life, which ignores it (see pool.Series).
		old := rec.Grid.Load()
		if s, mine := load(n, r.gen); !mine || !s.live() {
			return false
		}
		stress.Point()
		if rec.Grid.CompareAndSwap(old, g) {
			break
		}
	}
	t := sh.ceilTick(now + d)
	for rec.Grid.Load() == g { // else a later Reset took over: its deadline stands
		s, mine := load(n, r.gen)
		if !mine || !s.live() {
			break // ended since: the Reset came first
		}
		if ok, queue := reset(n, s, t); ok {
			sh.noticeReset(r.idx, s, t, queue)
			break
		}
	}
	sh.lanes[CurrentP()&sh.laneMask].resets.Add(1)
	return true
}
