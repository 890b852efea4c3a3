package shardwheel

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/shardwheel/shardwheel/internal/pad"
	"github.com/shardwheel/shardwheel/shard"
)

// An Index's maps: stripes of Go maps, each under a mutex.
//
// A Go map stores its entries inline, so once it has grown to the number
// of keys it holds, a store or a delete allocates nothing (a concurrent
// map that publishes immutable entries, as xsync's MapOf does, allocates
// one per store). A Go map never shrinks: a stripe remakes its map at the
// size it holds once that falls to an eighth of its peak (shrunk), so
// that an Index gives a spike of keys back; the copy is paid for by the
// removals that brought the map down. A call holds a stripe's lock for a
// few map operations, or, in AfterFunc and Every, for a schedule and a
// cancel as well (with ByKey, a routed stripe's lock inside); All takes
// each stripe's in turn, and the shard goroutine's unindex up to three,
// one at a time. No lock holder waits for anything but another stripe's
// lock (below), so no call waits for a shard to make progress.
//
// The entries of one hash. A stripe's first map holds, for a hash, the
// entry of the first key scheduled with it. The keys of a 64-bit
// collision (another key with that hash, scheduled while the first's
// entry is there) go to overflow, a map from the hash to a list. When the
// entry in first goes while overflow still holds keys of its hash, it
// stays as a tombstone (Ref 0), which the next key scheduled with the
// hash, not in overflow already, takes over; first's entry goes when
// neither holds a key. Every read and change of a hash's entries is made
// under its stripe's lock, so each caller sees every key where the last
// change left it.
//
// Lock order: a keys stripe, then a routed stripe. The shard goroutine
// that frees a routed timer holds the routed stripe only to take the
// timer's key out, before it takes the keys stripe.

// keyStripe is one lock's share of an Index's keys. The padding keeps
// each stripe's lock and maps on lines that no other stripe writes.
type keyStripe[K comparable] struct {
	_  [pad.CacheLineSize]byte
	mu sync.Mutex
	// first, overflow and peak are mu's: read and written under it only.
	first    map[uint64]indexEntry[K]
	overflow map[uint64][]indexEntry[K] // nil until a collision
	peak     int                        // the most entries first held since it was made
	// n counts the keys with an entry: written under mu, read by Len.
	n atomic.Int64
	_ [pad.CacheLineSize]byte
}

// routedStripe is one lock's share of an Index's routed map (the keys
// of timers ByKey routes, by the timer's Ref), padded as keyStripe.
type routedStripe[K comparable] struct {
	_    [pad.CacheLineSize]byte
	mu   sync.Mutex
	m    map[shard.Ref]K // mu's, as peak
	peak int
	_    [pad.CacheLineSize]byte
}

// shrinkFloor is the peak below which a stripe's map is never remade:
// small maps hold little memory, and remaking them would cost more.
const shrinkFloor = 1024

// grew records m's size in *peak after a store.
func grew[Kt comparable, V any](m map[Kt]V, peak *int) { *peak = max(*peak, len(m)) }

// shrunk returns m, or, after a delete that left it at an eighth of *peak
// or less, a copy of it at its size, whose size it records in *peak.
func shrunk[Kt comparable, V any](m map[Kt]V, peak *int) map[Kt]V {
	if *peak < shrinkFloor || len(m) > *peak/8 {
		return m
	}
	c := make(map[Kt]V, len(m))
	for k, v := range m {
		c[k] = v
	}
	*peak = len(c)
	return c
}

// stripesFor returns the number of stripes of an Index of a Scheduler
// with n shards: a power of two, eight a shard or more, so that calls on
// different keys rarely wait for one another's lock.
func stripesFor(n int) int {
	s := 8
	for s < 8*n {
		s *= 2
	}
	return s
}

// keysOf returns the stripe that holds hash h: by the top bits of its
// mix, for the shard goroutine's unindex looks there with a routing key,
// which ByKey's caller chose (small integers, say).
func (ix *Index[K]) keysOf(h uint64) *keyStripe[K] { return &ix.keys[mix64(h)>>ix.shift] }

// routedOf returns the stripe of the routed map that holds r: one for
// each shard, the one r is filed on.
func (ix *Index[K]) routedOf(r shard.Ref) *routedStripe[K] { return &ix.routed[r.Shard()] }

// setRouted stores key as that of r, a timer ByKey routes. The caller
// holds the lock of key's keys stripe.
func (ix *Index[K]) setRouted(r shard.Ref, key K) {
	rs := ix.routedOf(r)
	rs.mu.Lock()
	rs.m[r] = key
	grew(rs.m, &rs.peak)
	rs.mu.Unlock()
}

// takeRouted deletes r's routed entry and returns its key, if it has one.
func (ix *Index[K]) takeRouted(r shard.Ref) (K, bool) {
	rs := ix.routedOf(r)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	k, ok := rs.m[r]
	if ok {
		delete(rs.m, r)
		rs.m = shrunk(rs.m, &rs.peak)
	}
	return k, ok
}

// live reports whether e names a timer rather than being a tombstone.
func (e indexEntry[K]) live() bool { return e.ref != shard.Ref{} }

// put makes e its key's entry among hash h's, first being first's entry
// for h (loaded: whether there is one), cancelling the timer of the entry
// e replaces, if any, and returns first's new entry and whether e
// replaced one. The caller holds st's lock, and stores first's new entry.
func (ix *Index[K]) put(st *keyStripe[K], first indexEntry[K], loaded bool, e indexEntry[K], h uint64) (indexEntry[K], bool) {
	switch {
	case !loaded:
		return e, false
	case first.key == e.key: // the key's entry, or its tombstone
		if first.live() {
			ix.cancel(first, h)
		}
		return e, first.live()
	case !first.live() && !slices.ContainsFunc(st.overflow[h], func(o indexEntry[K]) bool { return o.key == e.key }):
		return e, false // takes the tombstone over
	}
	list := st.overflow[h]
	i := slices.IndexFunc(list, func(o indexEntry[K]) bool { return o.key == e.key })
	if i >= 0 {
		ix.cancel(list[i], h)
		list[i] = e
		return first, true
	}
	if st.overflow == nil {
		st.overflow = map[uint64][]indexEntry[K]{}
	}
	st.overflow[h] = append(list, e)
	return first, false
}

// remove deletes from hash h's entries the one match chooses, cancelling
// its timer if cancel, and reports whether it cancelled it and whether it
// found the entry. It takes h's stripe lock.
func (ix *Index[K]) remove(h uint64, match func(indexEntry[K]) bool, cancel bool) (stopped, found bool) {
	st := ix.keysOf(h)
	st.mu.Lock()
	defer st.mu.Unlock()
	first, loaded := st.first[h]
	if !loaded {
		return false, false
	}
	var gone indexEntry[K]
	if first.live() && match(first) {
		gone, found = first, true
		first.ref = shard.Ref{} // a tombstone, unless overflow is empty
	} else if gone, found = takeOverflow(st, h, match); !found {
		return false, false // another key's: unchanged
	}
	st.n.Add(-1)
	if cancel {
		stopped = ix.cancel(gone, h)
	}
	if !first.live() && len(st.overflow[h]) == 0 {
		delete(st.first, h)
		st.first = shrunk(st.first, &st.peak)
	} else {
		st.first[h] = first
	}
	return stopped, found
}

// lookup returns key's entry among hash h's. It takes h's stripe lock.
func (ix *Index[K]) lookup(h uint64, key K) (indexEntry[K], bool) {
	st := ix.keysOf(h)
	st.mu.Lock()
	defer st.mu.Unlock()
	if first, ok := st.first[h]; ok && first.key == key && first.live() {
		return first, true
	}
	for _, e := range st.overflow[h] {
		if e.key == key {
			return e, true
		}
	}
	return indexEntry[K]{}, false
}

// takeOverflow removes from st's overflow the entry of hash h that match
// chooses, and returns it. The caller holds st's lock.
func takeOverflow[K comparable](st *keyStripe[K], h uint64, match func(indexEntry[K]) bool) (indexEntry[K], bool) {
	list := st.overflow[h]
	i := slices.IndexFunc(list, match)
	if i < 0 {
		return indexEntry[K]{}, false
	}
	e := list[i]
	if len(list) == 1 {
		delete(st.overflow, h)
	} else {
		st.overflow[h] = slices.Delete(list, i, i+1)
	}
	return e, true
}

// snapshot appends to buf the live entries of stripe i, taken under its
// lock, and returns it.
func (ix *Index[K]) snapshot(i int, buf []indexEntry[K]) []indexEntry[K] {
	st := &ix.keys[i]
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, e := range st.first {
		if e.live() {
			buf = append(buf, e)
		}
	}
	for _, list := range st.overflow {
		buf = append(buf, list...)
	}
	return buf
}
