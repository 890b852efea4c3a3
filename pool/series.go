package pool

import (
	"sync"
	"sync/atomic"
)

// Storage that only some timers need, made per block when the first such
// timer lands in it (as the task and handler arrays are): a block whose
// timers are all one-shot and exact holds none of it, so ordinary timers
// pay nothing for it.

// Grid is a periodic timer's grid: its points are the clock readings
// Anchor + k*Period (nanoseconds, k >= 1). Life and Node name the timer
// life it belongs to (package shard's generation, and its node's index:
// a record serves only nodes of the arena whose pool it came from), so
// that a Grid of another life, which a Reset that raced that life's end
// may store in a record reused since, is never taken for the record's
// current life. A Grid is immutable once it is published (Series.Grid);
// Reset makes a new one.
type Grid struct {
	Life   uint64
	Node   uint32
	Anchor int64
	Period int64
}

// Series is the record of a periodic timer, taken by the producer that
// starts the timer's life (Arena.NewSeries); the node points to it (see
// Slot.SetSeries) until it is freed, which puts it back in its arena's
// pool for another life to reuse: steady-state Every allocates nothing.
//
// A record outlives its life in the hands of a Reset that loaded it from
// the node while the life was current: such a Reset reads Grid only, and
// CASes it after it has checked the life's state, so its Grid may land
// in the record's next life (the life's end and the reuse came between
// the check and the CAS). Its Life and Node then name another life than
// First's, and every reader ignores it (package shard's adopt).
//
// Field ownership (the meaning of every field belongs to package shard):
//   - Grid: atomic. nil (the grid is First) when the producer starts the
//     life, then CASed by Reset from any goroutine; read by anyone.
//   - First: the life's first grid, written by the producer; immutable
//     once the node is published. Its Life and Node name the life.
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
	// may then be reused. Immutable while the series lives.
	Freed func()
}

// NewSeries returns a record for a periodic timer's life on one of the
// arena's nodes: a fresh one or one an ended life gave back, whose fields
// the caller must all set (Grid is nil). The record goes back when its
// node is freed (Clear), or with PutSeries if the timer never started.
// Records are kept per arena (a sync.Pool: any goroutine may start a
// periodic timer, and whoever frees its node gives the record back; the
// garbage collector may drop records that wait there), so that a Grid's
// Node names one node.
func (a *Arena) NewSeries() *Series { return a.records.Get().(*Series) }

// PutSeries gives back a record of the arena's whose timer never started
// (Schedule rejected it): no node points to it, and no one else has seen
// it.
func (a *Arena) PutSeries(r *Series) { putSeries(&a.records, r) }

// putSeries puts r back in records, dropping what it names so that the
// garbage collector may take it.
func putSeries(records *sync.Pool, r *Series) {
	r.Seen, r.Plan = nil, nil
	records.Put(r)
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
// them, for Clear, and puts the record back for another life to reuse:
// the node's owner frees it, so no other goroutine uses the record but
// through Grid (see Series).
func (s Slot) clearExtra() {
	if p := s.b.flags.Load(); p != nil {
		(*p)[s.off] = 0
	}
	if p := s.b.series.Load(); p != nil {
		if r := (*p)[s.off].Swap(nil); r != nil {
			pl := r.Plan
			r.Grid.Store(nil)
			putSeries(s.b.records, r)
			if pl != nil && pl.Freed != nil {
				pl.Freed()
			}
		}
	}
}
