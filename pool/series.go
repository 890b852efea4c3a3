package pool

import "sync/atomic"

// Storage that only some timers need, made per block when the first such
// timer lands in it (as the task and handler arrays are): a block whose
// timers are all one-shot and exact holds none of it, so ordinary timers
// pay nothing for it.

// Grid is a periodic timer's grid: its points are the clock readings
// Anchor + k*Period (nanoseconds, k >= 1). Life is the generation
// (package shard's) of the timer life it belongs to: a record serves one
// node's periodic lives, one after another (see Series), so that a Grid
// of an earlier life, which a Reset that raced that life's end may store
// in the record after its reuse, is never taken for the current life's.
// A Grid is immutable once it is published (Series.Grid); Reset makes a
// new one.
type Grid struct {
	Life   uint64
	Anchor int64
	Period int64
}

// Series is the record of a periodic timer. The producer that starts the
// timer's life takes it from the node (Slot.TakeSeries): the record of
// the node's last periodic life, or a new one. The node points to it (see
// Slot.SetSeries) until it is freed, which keeps the record with the node
// for its next periodic life (Clear): a record never moves to another
// node, and Every allocates nothing once its nodes have each held a
// series.
//
// A record outlives its life in the hands of a Reset that loaded it from
// the node while the life was current: such a Reset reads Grid only, and
// CASes it after it has checked the life's state, so its Grid may land
// in the record's next life (the life's end and the reuse came between
// the check and the CAS). Its Life then names an earlier life of the
// node than First's, and every reader ignores it (package shard's adopt).
//
// Field ownership (the meaning of every field belongs to package shard):
//   - Grid: atomic. nil (the grid is First) when the producer starts the
//     life, then CASed by Reset from any goroutine; read by anyone.
//   - First: the life's first grid, written by the producer; immutable
//     once the node is published. Its Life names the life.
//   - Seen, Base, Served, Counted, Policy: the series' progress, owned by
//     whoever owns the timer's schedule (package shard: the producer
//     before it publishes the node, then the goroutine holding the wheel
//     while the timer is filed or queued, and the run of its task while
//     that runs); the handovers are atomic operations on the node's state
//     and the shard's lists, which order each owner after the previous.
type Series struct {
	Grid  atomic.Pointer[Grid]
	First Grid
	// Plan, for a series on a plan of the caller's rather than a grid,
	// is where its runs learn and leave their points; immutable.
	Plan *Plan
	// Seen is the grid the progress below follows.
	Seen *Grid
	// Base is the clock reading the grid points are counted from: Seen's
	// anchor, or where a policy restarted the grid.
	Base int64
	// Served is the index of the last grid point a run served (0: none
	// yet), Counted the last one counted as served or missed.
	Served, Counted uint64
	// Policy is what the timer does with missed grid points.
	Policy uint8
}

// Plan is what a series on a caller's plan shares with its task (package
// shard's periodic.go): the owner of the series' progress stores the
// point a run serves (Served) and clears Chosen before it hands the run
// over; the run's task chooses the next point (Next) and sets Chosen; the
// run reads them when the task has returned. Atomics, so that a task
// called again outside a run (Stop's Timer.Task) races with nothing.
type Plan struct {
	Served, Next atomic.Int64
	Chosen       atomic.Bool
	// Freed, if set, is called by whoever frees the series' node, once
	// nothing of the engine's names the Plan any more: the series' state
	// may then be reused. The caller may be pinned to its P: Freed must
	// not block (nor use a sync.Pool, whose first Put after a garbage
	// collection takes a lock). Immutable while the series lives.
	Freed func()
}

// Flags a node may carry for its owner (see Slot.SetFlags).
const (
	// FlagSlack marks a timer whose deadline was chosen within its slack:
	// the wheel may file it where it fires without cascading.
	FlagSlack uint8 = 1 << iota
	// FlagProxy marks a node that stands, in the wheel of a routed
	// timer's shard, for that timer's node in another shard's arena: it
	// is no timer itself.
	FlagProxy
)

// TakeSeries returns a record for the node's periodic life: the one its
// last periodic life left (Clear), or a new one. Its fields other than
// Grid are the caller's to set (Grid is nil, or a late grid of an earlier
// life: see Series). Only the node's owner may call it: the producer,
// before it files or pushes the node.
func (s Slot) TakeSeries() *Series {
	if p := s.b.spare.Load(); p != nil {
		if r := (*p)[s.off]; r != nil {
			(*p)[s.off] = nil
			return r
		}
	}
	return new(Series)
}

// SetSeries points the node to r, its periodic timer's record, making the
// block's array of such pointers if it has none. Only the node's owner may
// call it: the producer before it publishes the node.
func (s Slot) SetSeries(r *Series) {
	(*lazyArray(&s.b.series, len(s.b.nodes)))[s.off].Store(r)
}

// FindSeries returns the record SetSeries stored for the node's current
// (or last) life, or nil if its life is not periodic: a nil answer costs
// one atomic load in a block that never held a periodic timer, two in one
// that did. Any goroutine.
func (s Slot) FindSeries() *Series {
	if p := s.b.series.Load(); p != nil {
		return (*p)[s.off].Load()
	}
	return nil
}

// SetFlags stores the node's flags, making the block's flag array if f is
// not zero and the block has none. The node must be fresh from Get (or
// freed by Add or Clear since), and only its owner may call it: the
// producer before it publishes the node.
func (s Slot) SetFlags(f uint8) {
	if f == 0 && s.b.flags.Load() == nil {
		return
	}
	(*lazyArray(&s.b.flags, len(s.b.nodes)))[s.off] = f
}

// Flags returns what SetFlags stored: 0 in a block that has no flags. Read
// by whoever owns the node after the producer published it.
func (s Slot) Flags() uint8 {
	if p := s.b.flags.Load(); p != nil {
		return (*p)[s.off]
	}
	return 0
}

// clearExtra resets the node's flags and Series record, if its block has
// them, for Clear, keeping the record for the node's next periodic life
// (TakeSeries): the node's owner frees it, so no other goroutine uses the
// record but through Grid (see Series). A plan's Freed hears of it.
func (s Slot) clearExtra() {
	if p := s.b.flags.Load(); p != nil {
		(*p)[s.off] = 0
	}
	if p := s.b.series.Load(); p != nil {
		if r := (*p)[s.off].Swap(nil); r != nil {
			pl := r.Plan
			r.Grid.Store(nil) // let the garbage collector take a Reset's grid
			r.Seen, r.Plan = nil, nil
			(*lazyArray(&s.b.spare, len(s.b.nodes)))[s.off] = r
			if pl != nil && pl.Freed != nil {
				pl.Freed()
			}
		}
	}
}
