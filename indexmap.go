package shardwheel

import (
	"slices"

	"github.com/shardwheel/shardwheel/shard"
)

// The entries of one hash.
//
// keys holds, for a hash, the entry of the first key scheduled with it.
// The keys of a 64-bit collision (another key with that hash, scheduled
// while the first's entry is there) go to overflow, a map from the hash
// to a list. A key never moves while it has an entry: when the entry in
// keys goes while overflow still holds keys of its hash, it stays as a
// tombstone (Ref 0), which the next key scheduled with the hash, not in
// overflow already, takes over; keys' entry goes when neither holds a
// key. So a lock-free reader that loads keys, then overflow, sees each
// key where it was at some moment between its two loads: it may miss a
// key only if the key had no entry at some moment meanwhile, which a
// call that ran then would have reported too. Every change is made under
// the bucket lock of the hash in keys (MapOf.Compute), overflow's
// included, so the writers of one hash are serialised; overflow's lists
// are immutable once stored (a change copies one).

// live reports whether e names a timer rather than being a tombstone.
func (e indexEntry[K]) live() bool { return e.ref != shard.Ref{} }

// put makes e its key's entry among hash h's, first being keys' entry
// for h (loaded: whether there is one), cancelling the timer of the entry
// e replaces, if any, and returns keys' new entry and whether e replaced
// one. The caller holds h's bucket lock, and stores keys' new entry
// after put returns: the cancel precedes every store that publishes e.
func (ix *Index[K]) put(first indexEntry[K], loaded bool, e indexEntry[K], h uint64) (indexEntry[K], bool) {
	switch {
	case !loaded:
		return e, false
	case first.key == e.key: // the key's entry, or its tombstone
		if first.live() {
			ix.cancel(first, h)
		}
		return e, first.live()
	case !first.live() && !ix.inOverflow(h, e.key):
		return e, false // takes the tombstone over
	}
	list, _ := ix.overflow.Load(h)
	i := slices.IndexFunc(list, func(o indexEntry[K]) bool { return o.key == e.key })
	list = slices.Clone(list)
	if i >= 0 {
		ix.cancel(list[i], h)
		list[i] = e
	} else {
		list = append(list, e)
		ix.collided.Store(true)
	}
	ix.overflow.Store(h, list)
	return first, i >= 0
}

// remove deletes from hash h's entries the one match chooses, cancelling
// its timer if cancel, and reports whether it cancelled it and whether it
// found the entry. It takes h's bucket lock.
func (ix *Index[K]) remove(h uint64, match func(indexEntry[K]) bool, cancel bool) (stopped, found bool) {
	part := ix.keysOf(h)
	part.m.Compute(h, func(first indexEntry[K], loaded bool) (indexEntry[K], bool) {
		if !loaded {
			return first, true // deleting nothing stores nothing
		}
		var gone indexEntry[K]
		if first.live() && match(first) {
			gone, found = first, true
			first.ref = shard.Ref{} // a tombstone, unless overflow is empty
		} else if gone, found = ix.takeOverflow(h, match); !found {
			return first, false // another key's: unchanged
		}
		part.n.Add(-1)
		if cancel {
			stopped = ix.cancel(gone, h)
		}
		return first, !first.live() && !ix.hasOverflow(h)
	})
	return stopped, found
}

// lookup returns key's entry among hash h's, lock-free.
func (ix *Index[K]) lookup(h uint64, key K) (indexEntry[K], bool) {
	first, ok := ix.keysOf(h).m.Load(h)
	switch {
	case !ok:
		return indexEntry[K]{}, false
	case first.key == key && first.live():
		return first, true
	case !ix.collided.Load():
		return indexEntry[K]{}, false
	}
	list, _ := ix.overflow.Load(h)
	for _, e := range list {
		if e.key == key {
			return e, true
		}
	}
	return indexEntry[K]{}, false
}

// names reports whether one of hash h's entries names r, a timer's Ref
// (never 0), lock-free.
func (ix *Index[K]) names(h uint64, r shard.Ref) bool {
	first, ok := ix.keysOf(h).m.Load(h)
	if !ok {
		return false
	}
	if first.ref == r {
		return true
	}
	if !ix.collided.Load() {
		return false
	}
	list, _ := ix.overflow.Load(h)
	return slices.ContainsFunc(list, func(e indexEntry[K]) bool { return e.ref == r })
}

// inOverflow reports whether overflow holds an entry of key, whose hash
// is h.
func (ix *Index[K]) inOverflow(h uint64, key K) bool {
	if !ix.collided.Load() {
		return false
	}
	list, _ := ix.overflow.Load(h)
	return slices.ContainsFunc(list, func(e indexEntry[K]) bool { return e.key == key })
}

// hasOverflow reports whether overflow holds any entry of hash h.
func (ix *Index[K]) hasOverflow(h uint64) bool {
	if !ix.collided.Load() {
		return false
	}
	_, ok := ix.overflow.Load(h)
	return ok
}

// takeOverflow removes from overflow the entry of hash h that match
// chooses, and returns it. The caller holds h's bucket lock.
func (ix *Index[K]) takeOverflow(h uint64, match func(indexEntry[K]) bool) (indexEntry[K], bool) {
	if !ix.collided.Load() {
		return indexEntry[K]{}, false
	}
	list, _ := ix.overflow.Load(h)
	i := slices.IndexFunc(list, match)
	if i < 0 {
		return indexEntry[K]{}, false
	}
	e := list[i]
	if len(list) == 1 {
		ix.overflow.Delete(h)
	} else {
		ix.overflow.Store(h, slices.Delete(slices.Clone(list), i, i+1))
	}
	return e, true
}
