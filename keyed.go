package shardwheel

import (
	"time"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/shardwheel/shardwheel/internal/pad"
	"github.com/shardwheel/shardwheel/internal/stress"
	"github.com/shardwheel/shardwheel/shard"
)

// Keyed timers.
//
// A Scheduler keeps two kinds of timers side by side:
//
//   - Plain timers, from AfterFunc and Every. Their key only routes them
//     to a shard; any number of them may share a key, and only their
//     Timer handle reaches them.
//   - Indexed timers, from ScheduleKey. Each shard keeps an index from key
//     to the key's one indexed timer, so CancelKey, ResetKey and Lookup
//     reach it by key alone, and ScheduleKey on a key replaces the key's
//     pending indexed timer. Their handles work like any other.
//
// The kinds never mix: the index holds only timers from ScheduleKey, so
// CancelKey and Lookup never see a plain timer, even one with the same key.
//
// # The index
//
// Each shard's index is an xsync.MapOf from key to shard.Ref, on the shard
// the key routes to, so keyed calls on keys of different shards write no
// common line. An entry is the right to cancel its timer by key:
// ScheduleKey replaces an entry and CancelKey deletes one inside
// MapOf.Compute, which holds the key's bucket lock, and cancels the timer
// the entry named in the same critical section (with
// shard.CancelUnindexed, so that the shard goroutine does not look for an
// entry that is gone already). So while the lock is free, a pending timer named
// by an entry is the key's indexed timer and the only one.
//
// Ordering. MapOf fills an entry, which is immutable, before it publishes
// it with an atomic store, so a lock-free Load sees a whole entry. The
// cancel of the replaced timer precedes that store in the critical
// section, and Go's atomics are sequentially consistent, so whoever loads
// the new entry finds the old timer cancelled: no one sees two pending
// indexed timers for a key.
//
// An entry can outlive its timer for a moment: a timer that ran, or that
// was cancelled through its handle, leaves a stale entry, which the shard
// goroutine deletes when it frees the node (shard.Config.Unindex, which
// deletes only if the entry still names that timer), before the node can
// be reused for another timer. The shard goroutine thus takes bucket
// locks too, which any goroutine holds only for a cancel and a store, in
// the index of the shard the timer's key routes to: an indexed timer is
// filed on the shard it was scheduled on (see Config.Unindex in New), so
// that index is often another shard's. It may wait there for a bucket's
// lock, or for a resize that a ScheduleKey or CancelKey is doing, but
// never for a shard's wheel: no lock holder waits for one. Readers never
// trust an entry alone: the Ref carries the node's generation, so a stale
// entry's timer reports not pending and its Cancel and Reset fail, even
// once the node is reused.

// keyIndex is one shard's index. The slice of them is only read after New
// (writes go to each MapOf's own buckets), but it is a small allocation
// that would share its lines with whatever the allocator puts beside it:
// the padding keeps each shard's map pointer on a line that nothing else
// writes, so keyed calls on different shards never share a line here.
type keyIndex struct {
	_ [pad.CacheLineSize]byte
	m *xsync.MapOf[uint64, shard.Ref] // immutable after New
	_ [pad.CacheLineSize]byte
}

func newKeyIndex() keyIndex {
	// The hash is seeded per table by MapOf; mix64 spreads it, as it
	// spreads keys over shards.
	return keyIndex{m: xsync.NewMapOfWithHasher[uint64, shard.Ref](func(k, seed uint64) uint64 {
		return mix64(k ^ seed)
	})}
}

// unindex deletes key's entry if it still names r, a timer that has ended.
// It is shard.Config.Unindex, called by the shard goroutine, and
// ScheduleKey's clean-up for a timer that ended before it was indexed. The
// lock-free Load skips the bucket lock when the entry is gone or names
// another timer.
func (ix *keyIndex) unindex(key uint64, r shard.Ref) {
	if cur, ok := ix.m.Load(key); !ok || cur != r {
		return
	}
	stress.Point()
	ix.m.Compute(key, func(cur shard.Ref, loaded bool) (shard.Ref, bool) {
		return cur, !loaded || cur == r // deleting when not loaded stores nothing
	})
}

// add makes the timer schedule makes its key's indexed timer, cancelling
// the one it replaces, and returns it. schedule runs under the key's bucket
// lock, so that no other keyed call on the key, the new timer's own task
// included (it may run before add returns and re-arm its key), comes
// between it and the store of its entry.
func (s *Scheduler) add(ix *keyIndex, key uint64, schedule func() (Timer, error)) (Timer, error) {
	var t Timer
	var err error
	ix.m.Compute(key, func(old shard.Ref, loaded bool) (shard.Ref, bool) {
		if t, err = schedule(); err != nil {
			return old, !loaded // unchanged (deleting nothing stores nothing)
		}
		stress.Point()
		if loaded {
			s.shards[old.Shard()].CancelUnindexed(old) // false if old had ended already
		}
		return t.ref, false
	})
	if err != nil {
		return Timer{}, err
	}
	// t may have ended before its entry was stored (it ran, was cancelled
	// through a copy of its handle, or Stop returned it and cleared the
	// index), so that the shard goroutine's unindex found nothing to
	// delete. Pending is read after the store: either its unindex follows
	// the store, or Pending sees t ended.
	stress.Point()
	if !t.sh.Pending(t.ref) {
		ix.unindex(key, t.ref)
	}
	return t, nil
}

// find returns the Ref of key's entry for which try succeeds. When try
// fails it looks again, so that an entry replaced meanwhile is tried too:
// it gives up only when the entry is gone or still names the timer try
// failed on, which has then ended with no other indexed timer for key.
func (ix *keyIndex) find(key uint64, try func(shard.Ref) bool) (shard.Ref, bool) {
	r, ok := ix.m.Load(key)
	for ok && !try(r) {
		stress.Point()
		next, loaded := ix.m.Load(key)
		if !loaded || next == r {
			return shard.Ref{}, false
		}
		r = next
	}
	return r, ok
}

// keyed returns the index of key.
func (s *Scheduler) keyed(key uint64) *keyIndex {
	s.mustBeNew()
	return &s.index[s.route(key)]
}

// shardOf returns the shard whose node r names.
func (s *Scheduler) shardOf(r shard.Ref) *shard.Shard { return s.shards[r.Shard()] }

// ScheduleKey runs task once, delay from now, as key's indexed timer, and
// returns its handle. If key already has a pending indexed timer,
// ScheduleKey replaces it: the old timer is cancelled (its task never runs,
// its handle reports not pending, and it counts as cancelled in Stats) and
// the new one takes its place, in one step under the lock of the key's
// bucket, so that CancelKey, other ScheduleKeys and the new timer's own
// task (which may run before ScheduleKey returns, and may re-arm its key)
// see one or the other; lock-free Lookup and ResetKey may still find the
// old one pending until ScheduleKey returns. Concurrent ScheduleKeys on one key leave
// exactly one of their timers indexed; each of the others is replaced in
// turn, unless it ran first. Plain timers (AfterFunc, Every) are not indexed
// and are never replaced.
//
// Delays, errors and routing are AfterFunc's with ByKey(key): the timer runs on the shard
// that key routes to, a rejected call leaves no trace and replaces nothing
// (at the WithMaxPending limit the new timer needs a token before the old
// one's is freed, so replacing fails there too).
// Besides AfterFunc's work, ScheduleKey takes the lock of one bucket of that
// shard's index, which it holds while it schedules the new timer and
// cancels the old (never yielding the processor meanwhile), never waiting
// for a shard's wheel (it waits only for that bucket's lock, held by
// another call on a key of the same bucket for as long, or while another
// call is resizing that index, which the caller whose insert or delete
// crossed a size threshold does at once), and allocates the index entry (24 bytes: the key and the
// timer's handle).
func (s *Scheduler) ScheduleKey(key uint64, delay time.Duration, task func()) (Timer, error) {
	return s.scheduleKey(key, delay, shard.Task{Func: task})
}

// scheduleKey is ScheduleKey for task, a closure or a handler.
func (s *Scheduler) scheduleKey(key uint64, delay time.Duration, task shard.Task) (Timer, error) {
	if task.IsZero() {
		return Timer{}, ErrNilTask
	}
	ix := s.keyed(key)
	return s.add(ix, key, func() (Timer, error) {
		r := s.request(key, delay, task)
		r.Indexed, r.Routed = true, true
		return s.scheduleOn(s.localShard(), &r)
	})
}

// CancelKey cancels key's indexed timer and reports whether this call
// stopped it: false if key has no pending indexed timer (none was
// scheduled, it ran, it was cancelled or replaced, or Stop returned it).
// Like Timer.Cancel it is O(1) and never waits for a shard; it takes the
// lock of one bucket of the key's index for the length of a cancel. Plain
// timers (AfterFunc, Every) are never cancelled by key.
func (s *Scheduler) CancelKey(key uint64) bool {
	ix := s.keyed(key)
	stopped := false
	ix.m.Compute(key, func(r shard.Ref, loaded bool) (shard.Ref, bool) {
		stopped = loaded && s.shardOf(r).CancelUnindexed(r)
		return r, true
	})
	return stopped
}

// ResetKey moves the deadline of key's indexed timer to delay from now
// (clamped like AfterFunc's) and reports whether key had a pending indexed
// timer, as Timer.Reset does for a handle: if true, the timer runs delay
// after this call (never earlier) and not at its old deadline. It is
// lock-free and, like Timer.Reset, allocates nothing.
func (s *Scheduler) ResetKey(key uint64, delay time.Duration) bool {
	ix := s.keyed(key)
	_, ok := ix.find(key, func(r shard.Ref) bool { return s.shardOf(r).Reset(r, key, delay) })
	return ok
}

// Lookup returns the handle of key's pending indexed timer, and false if key
// has none. It is lock-free. Plain timers are never found.
func (s *Scheduler) Lookup(key uint64) (Timer, bool) {
	ix := s.keyed(key)
	r, ok := ix.find(key, func(r shard.Ref) bool { return s.shardOf(r).Pending(r) })
	if !ok {
		return Timer{}, false
	}
	return Timer{sh: s.shardOf(r), ref: r, key: key}, true
}
