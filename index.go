package shardwheel

import (
	"hash/maphash"
	"iter"
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/shardwheel/shardwheel/internal/stress"
	"github.com/shardwheel/shardwheel/shard"
)

// Indexed timers.
//
// An Index keeps at most one timer per key, for callers who know a timer
// by a key of theirs (a connection, a session, a request) rather than by
// its handle. Its map, keys, goes from a key's hash to the entry of the
// key with that hash (indexmap.go keeps the keys of a 64-bit collision
// apart, comparing them with ==). It is split in stripes, each a Go map
// under a mutex (indexmap.go).
//
// A timer of an Index carries its key's hash as its node's key (its
// routing key), so the shard goroutine that frees the node finds the
// entry from what the engine tells it (shard.Config.Unindex: the node's
// key and Ref). A timer that ByKey routes by another key carries that
// key instead; for those, a second map, routed, goes from the timer's Ref
// back to its index key, split by the shard the timer is filed on.
//
// An entry is the right to cancel its timer by key: AfterFunc and Every
// replace an entry and Cancel deletes one under the hash's stripe lock,
// and cancel the timer the entry named in the same critical section (with
// shard.CancelUnindexed, so that the shard goroutine does not look for an
// entry that is gone already). So while the lock is free, a pending timer
// named by an entry is the key's timer and the only one, and a reader,
// which takes the lock too, never sees two pending timers for a key.
//
// An entry can outlive its timer for a moment: a timer that ran, or that
// was cancelled through its handle, leaves a stale entry, which the shard
// goroutine deletes when it frees the node (Index.unindex, which deletes
// only the entry naming that timer), before the node can be reused for
// another timer. The shard goroutine thus takes stripe locks too, which
// any goroutine holds only for map operations, a schedule and a cancel:
// it may wait there for another call, but never for a shard's wheel,
// since no lock holder waits for one. Readers never trust an entry alone:
// the Ref carries the node's generation, so a stale entry's timer reports
// not pending and its Cancel and Reset fail, even once the node is
// reused.

// Index is a set of timers with at most one per key of type K: Cancel,
// Reset and Lookup reach a key's timer by the key alone, All lists the
// timers, and AfterFunc or Every on a key replaces the key's pending
// timer. Keys are compared with ==, never by hash alone: two keys never
// share a timer. A timer of an Index is a timer like any other (its
// handle's Cancel, Reset and CancelWait work, Stop returns it); timers
// scheduled with Scheduler.AfterFunc or Every are never in an Index.
//
// An Index's one-shot timers run on the shard their routing key routes
// to, one at a time and in deadline order with the other timers routed
// there by the same key (see ByKey); its series are filed on that shard.
// The routing key is the hash of the index key, or ByKey's key, to order
// a key's timers with the ByKey timers of, say, its connection.
//
// Make an Index with NewIndex (the methods of a zero Index panic with
// "shardwheel: use NewIndex to create an Index", but that a call with a
// nil task returns ErrNilTask first); it lives as long as its Scheduler.
// Its
// methods are safe for concurrent use, including from tasks, and never
// wait for a shard to make progress. Its entries are stored inline in Go
// maps: once the maps have grown to the keys they hold, no method
// allocates but All, Every as Scheduler.Every does (on a node that never
// held a series), a series' Reset (its new grid), and a scheduling call
// on a key whose hash another key of the index shares; a map that has
// shrunk to an eighth of its peak is remade at its size.
type Index[K comparable] struct {
	s         *Scheduler
	hashOf    func(K) uint64    // maphash.Comparable with the Index's seed
	keys      []keyStripe[K]    // by a key's hash (keysOf); the slice is immutable after NewIndex
	shift     uint              // 64 - log2(len(keys))
	routed    []routedStripe[K] // Ref → key of the timers ByKey routes, by the shard they are filed on
	anyRouted atomic.Bool       // set by the first timer ByKey routed: unindex looks in routed only then
}

// indexEntry is a key's timer: the key, the timer's Ref, and the routing
// key its node and handle carry. An entry whose Ref is 0 (which names no
// timer) is a tombstone (indexmap.go).
type indexEntry[K comparable] struct {
	key   K
	ref   shard.Ref
	route uint64
}

// indexer is what a Scheduler needs of its Indexes, whatever their key
// type.
type indexer interface {
	// unindex drops the entry of r, a timer that has ended whose node
	// carries key, and reports whether r was one of this Index's timers
	// with an entry.
	unindex(key uint64, r shard.Ref) bool
	// clear drops every entry: Stop has ended every timer.
	clear()
}

// NewIndex returns an empty Index of s's timers keyed by K. It takes a
// lock shared by s's Indexes; making one is not meant for a hot path.
func NewIndex[K comparable](s *Scheduler) *Index[K] {
	s.mustBeNew()
	seed := maphash.MakeSeed()
	n := stripesFor(len(s.shards))
	ix := &Index[K]{
		s:      s,
		hashOf: func(k K) uint64 { return maphash.Comparable(seed, k) },
		keys:   make([]keyStripe[K], n),
		shift:  uint(64 - bits.TrailingZeros(uint(n))),
		routed: make([]routedStripe[K], len(s.shards)),
	}
	for i := range ix.keys {
		ix.keys[i].first = map[uint64]indexEntry[K]{}
	}
	for i := range ix.routed {
		ix.routed[i].m = map[shard.Ref]K{}
	}
	s.indexMu.Lock()
	defer s.indexMu.Unlock()
	all := []indexer{ix}
	if p := s.indexes.Load(); p != nil {
		all = append(all, *p...)
	}
	s.indexes.Store(&all)
	return ix
}

// unindex drops the index entry of r, a timer that has ended whose node
// carries key: it is shard.Config.Unindex, called by the shard goroutine
// that frees r's node. r is in one Index at most.
func (s *Scheduler) unindex(key uint64, r shard.Ref) {
	if p := s.indexes.Load(); p != nil {
		for _, ix := range *p {
			if ix.unindex(key, r) {
				return
			}
		}
	}
}

// hash returns key's hash. It panics on a zero Index, which has no seed
// and no maps.
func (ix *Index[K]) hash(key K) uint64 {
	if ix.hashOf == nil {
		panic(errZeroIndex)
	}
	return ix.hashOf(key)
}

// errZeroIndex is the panic of a zero Index's methods.
const errZeroIndex = "shardwheel: use NewIndex to create an Index"

// AfterFunc runs task once, delay from now, as key's timer, and returns
// its handle. If key already has a pending timer, AfterFunc replaces it:
// the old timer is cancelled (its task never runs, its handle reports not
// pending, and it counts as cancelled in Stats) and the new one takes its
// place, in one step under the lock of the key's stripe of the index, so
// that every other call on key, the new timer's own task's included (it
// may run before AfterFunc returns, and may schedule its key again), sees
// one or the other. Concurrent calls on one key leave
// exactly one of their timers in the index; each of the others is
// replaced in turn, unless it ran first.
//
// Delays, options and errors are Scheduler.AfterFunc's (Slack applies;
// ByKey sets the routing key); a rejected call leaves no trace and
// replaces nothing (at the WithMaxPending limit the new timer needs a
// token before the old one's is freed, so replacing fails there too).
// Besides Scheduler.AfterFunc's work it hashes key and takes the lock of
// one stripe of the index, which it holds while it schedules the new
// timer and cancels the old (never yielding the processor meanwhile).
func (ix *Index[K]) AfterFunc(key K, delay time.Duration, task func(), opts ...TimerOption) (Timer, error) {
	if task == nil {
		return Timer{}, ErrNilTask
	}
	h := ix.hash(key)
	if len(opts) == 0 { // the common call, without reading options
		sh := ix.s.localShard()
		r := ix.s.request(h, delay, shard.Task{Func: task})
		r.Indexed, r.Routed = true, true
		return ix.add(key, h, func() (Timer, error) { return ix.s.scheduleOn(sh, &r) })
	}
	sh, r, err := ix.s.timerRequest("Index.AfterFunc", false, 0, false, delay, shard.Task{Func: task}, opts, &h)
	if err != nil {
		return Timer{}, err
	}
	return ix.add(key, h, func() (Timer, error) { return ix.s.scheduleOn(sh, &r) })
}

// Every runs task every period as key's timer, a series like
// Scheduler.Every's with its options, errors and costs, and replaces
// key's pending timer as AfterFunc does.
func (ix *Index[K]) Every(key K, period time.Duration, task func(), opts ...TimerOption) (Timer, error) {
	if task == nil {
		return Timer{}, ErrNilTask
	}
	h := ix.hash(key)
	sh, r, err := ix.s.timerRequest("Index.Every", true, 0, false, period, shard.Task{Func: task}, opts, &h)
	if err != nil {
		return Timer{}, err
	}
	return ix.add(key, h, func() (Timer, error) { return ix.s.scheduleOn(sh, &r) })
}

// add makes the timer schedule makes key's timer, key's hash being h,
// cancelling the timer it replaces, and returns it. schedule runs under
// the hash's stripe lock, so that no other call on the key, the new
// timer's own task included, comes between it and the store of its entry.
func (ix *Index[K]) add(key K, h uint64, schedule func() (Timer, error)) (Timer, error) {
	t, err := ix.scheduleLocked(key, h, schedule)
	if err != nil {
		return Timer{}, err
	}
	// t may have ended before its entries were stored, with no unindex
	// to follow: Stop returned it and cleared the index, or a timer
	// ByKey routes ended (it ran, or was cancelled through a copy of its
	// handle) and the shard goroutine looked in routed before its entry
	// was there. Pending is read after the stores: either its unindex
	// follows them, or Pending sees t ended and this deletes them, under
	// the lock.
	stress.Point()
	if !t.sh.Pending(t.ref) {
		ix.remove(h, func(e indexEntry[K]) bool { return e.ref == t.ref }, false)
		if t.key != h {
			ix.takeRouted(t.ref)
		}
	}
	return t, nil
}

// scheduleLocked is add's critical section: under h's stripe lock, it
// schedules the timer and stores its entries.
func (ix *Index[K]) scheduleLocked(key K, h uint64, schedule func() (Timer, error)) (Timer, error) {
	st := ix.keysOf(h)
	st.mu.Lock()
	defer st.mu.Unlock()
	t, err := schedule()
	if err != nil {
		return Timer{}, err
	}
	if t.key != h { // routed by ByKey: unindex finds the key in routed
		if !ix.anyRouted.Load() {
			ix.anyRouted.Store(true)
		}
		ix.setRouted(t.ref, key)
	}
	stress.Point()
	first, loaded := st.first[h]
	first, replaced := ix.put(st, first, loaded, indexEntry[K]{key: key, ref: t.ref, route: t.key}, h)
	if !replaced {
		st.n.Add(1)
	}
	st.first[h] = first
	grew(st.first, &st.peak)
	return t, nil
}

// cancel cancels e's timer, whose key hashes to h, as its key's entry is
// removed or replaced, and reports whether it did. The caller holds the
// stripe's lock. If the timer has ended already, the shard goroutine that
// frees it drops its routed entry, if any.
func (ix *Index[K]) cancel(e indexEntry[K], h uint64) bool {
	if !ix.s.shardOf(e.ref).CancelUnindexed(e.ref) {
		return false
	}
	if e.route != h {
		ix.takeRouted(e.ref)
	}
	return true
}

// unindex deletes the entry of r, a timer that has ended whose node
// carries key, if it still names r; it is indexer's. A timer routed by
// its hash carries the hash; one routed by ByKey is found in routed.
func (ix *Index[K]) unindex(key uint64, r shard.Ref) bool {
	byRef := func(e indexEntry[K]) bool { return e.ref == r }
	if _, found := ix.remove(key, byRef, false); found {
		return true
	}
	if !ix.anyRouted.Load() {
		return false
	}
	k, ok := ix.takeRouted(r)
	if ok {
		// Under the lock: the keys entry of a timer that ended at once
		// may not be stored yet, and its add holds the lock until it is.
		stress.Point()
		ix.remove(ix.hash(k), byRef, false)
	}
	return ok
}

// clear drops every entry; it is indexer's, for Stop.
func (ix *Index[K]) clear() {
	for i := range ix.keys {
		st := &ix.keys[i]
		st.mu.Lock()
		st.first, st.overflow, st.peak = map[uint64]indexEntry[K]{}, nil, 0 // the memory goes too
		st.n.Store(0)
		st.mu.Unlock()
	}
	for i := range ix.routed {
		rs := &ix.routed[i]
		rs.mu.Lock()
		rs.m, rs.peak = map[shard.Ref]K{}, 0
		rs.mu.Unlock()
	}
}

// find returns the entry of key for which try succeeds. When try fails it
// looks again, so that an entry replaced meanwhile is tried too: it gives
// up only when the entry is gone or still names the timer try failed on,
// which has then ended with no other timer for key.
func (ix *Index[K]) find(key K, try func(indexEntry[K]) bool) (indexEntry[K], bool) {
	h := ix.hash(key)
	e, ok := ix.lookup(h, key)
	for ok && !try(e) {
		stress.Point()
		next, found := ix.lookup(h, key)
		if !found || next.ref == e.ref {
			return indexEntry[K]{}, false
		}
		e = next
	}
	return e, ok
}

// timerOf returns the handle of e's timer.
func (ix *Index[K]) timerOf(e indexEntry[K]) Timer {
	return Timer{sh: ix.s.shardOf(e.ref), ref: e.ref, key: e.route}
}

// Cancel cancels key's timer and reports whether this call stopped it:
// false if key has no pending timer (none was scheduled, it ran, it was
// cancelled or replaced, or Stop returned it). On a series it ends the
// series as Timer.Cancel does. Like Timer.Cancel it never waits for a
// shard; it takes the lock of one stripe of the index for the length of
// a cancel. It allocates nothing.
func (ix *Index[K]) Cancel(key K) bool {
	stopped, _ := ix.remove(ix.hash(key), func(e indexEntry[K]) bool { return e.key == key }, true)
	return stopped
}

// Reset moves the deadline of key's timer to delay from now, as
// Timer.Reset does for its handle (on a series, it restarts the grid),
// and reports whether key had a pending timer. It takes the lock of one
// stripe of the index for a map lookup, and, on a one-shot timer,
// allocates nothing (on a series, a Reset makes the new grid).
func (ix *Index[K]) Reset(key K, delay time.Duration) bool {
	_, ok := ix.find(key, func(e indexEntry[K]) bool { return ix.s.shardOf(e.ref).Reset(e.ref, e.route, delay) })
	return ok
}

// Lookup returns the handle of key's pending timer, and false if key has
// none. It takes the lock of one stripe of the index for a map lookup,
// and allocates nothing.
func (ix *Index[K]) Lookup(key K) (Timer, bool) {
	e, ok := ix.find(key, func(e indexEntry[K]) bool { return ix.s.shardOf(e.ref).Pending(e.ref) })
	if !ok {
		return Timer{}, false
	}
	return ix.timerOf(e), true
}

// All returns an iterator over the keys and handles of the index's
// pending timers. Each key is yielded at most once, with a timer that was
// pending when All reached it (it may end before the loop body looks at
// it); a timer scheduled or ended while the loop runs may or may not be
// seen. The loop body may call any method of the Index or the Scheduler:
// All holds no lock while it yields (it copies each stripe's entries under
// the stripe's lock, in a buffer it allocates).
func (ix *Index[K]) All() iter.Seq2[K, Timer] {
	if ix.hashOf == nil {
		panic(errZeroIndex)
	}
	return func(yield func(K, Timer) bool) {
		// Stripe by stripe, each copied under its lock: a key is in one
		// stripe, once, so it is yielded at most once.
		var buf []indexEntry[K]
		for i := range ix.keys {
			buf = ix.snapshot(i, buf[:0])
			for _, e := range buf {
				if t := ix.timerOf(e); t.Pending() && !yield(e.key, t) {
					return
				}
			}
		}
	}
}

// Len returns the number of keys in the index: those whose timer is
// pending, and those whose timer has ended so recently that its shard has
// not yet dropped its entry (it does when it frees the timer's node,
// within a tick or so of the end on a shard that keeps up). It sums
// per-stripe counts read one after another, so under concurrent calls it
// is approximate, never negative; once Stop has returned, 0. It takes no
// lock and allocates nothing.
func (ix *Index[K]) Len() int {
	if ix.hashOf == nil {
		panic(errZeroIndex)
	}
	select {
	case <-ix.s.stopped: // a call racing Stop may have counted an entry Stop cleared
		return 0
	default:
	}
	n := int64(0)
	for i := range ix.keys {
		n += ix.keys[i].n.Load()
	}
	return int(n)
}
