package shardwheel

import (
	"time"
	"unsafe"

	"github.com/shardwheel/shardwheel/shard"
)

// TimerCtxSize is the size of a context's struct, which with its closure
// makes the bytes a context costs.
const TimerCtxSize = unsafe.Sizeof(timerCtx{})

// LiveSchedulers returns the number of Schedulers made by New and not yet
// stopped, and RearmLiveWarning lets the next New beyond warnSchedulers
// warn again: the warning is once per process, and tests need to see it.
func LiveSchedulers() int64 { return liveSchedulers.Load() }

func RearmLiveWarning() { warnedLive.Store(false) }

// IndexEntries returns the number of entries in ix (stale ones included:
// tests poll it to see entries go away), how many of them its routed map
// holds, and how many routed entries name a timer no entry names or
// tombstones stand for no key (leaks). It counts the entries one by one,
// not by the counts Len reads, which it checks against them (mismatch:
// whether they differ).
func IndexEntries[K comparable](ix *Index[K]) (entries, routed, strays int, mismatch bool) {
	refs := map[shard.Ref]bool{}
	count := func(e indexEntry[K]) {
		if e.live() {
			entries++
			refs[e.ref] = true
		}
	}
	for i := range ix.keys {
		st := &ix.keys[i]
		st.mu.Lock()
		for h, e := range st.first {
			count(e)
			if !e.live() && len(st.overflow[h]) == 0 {
				strays++ // a tombstone with no key of its hash left
			}
		}
		for _, list := range st.overflow {
			for _, e := range list {
				count(e)
			}
		}
		st.mu.Unlock()
	}
	for i := range ix.routed {
		rs := &ix.routed[i]
		rs.mu.Lock()
		for r := range rs.m {
			routed++
			if !refs[r] {
				strays++
			}
		}
		rs.mu.Unlock()
	}
	return entries, routed, strays, ix.Len() != entries
}

// CollideKeys makes every key of ix hash alike, as a 64-bit collision
// would: the Index must keep them apart by ==. Call it before any other
// call on ix.
func CollideKeys[K comparable](ix *Index[K], h uint64) { ix.hashOf = func(K) uint64 { return h } }

// ClockReading returns s's clock reading: the real monotonic clock for a
// Scheduler made outside a testing/synctest bubble, whatever goroutine
// reads it.
func ClockReading(s *Scheduler) time.Duration { return s.clock.Now() }

// Epoch returns the time s's clock reading 0 stands for.
func Epoch(s *Scheduler) time.Time { return s.epoch }

// RunningShard returns the index of the shard whose goroutine calls it,
// as a task run inline does, or -1 from any other goroutine.
func RunningShard(s *Scheduler) int {
	gid := shard.GoroutineID()
	for i, sh := range s.shards {
		if sh.IsShardGoroutine(gid) {
			return i
		}
	}
	return -1
}

// FiledOn returns the index of the shard whose wheel filed t: the shard
// whose Stats count it.
func FiledOn(t Timer) int { return t.ref.Shard() }

// WithShardCapacity lowers the timers each shard holds from ShardCapacity
// to n, so that tests can fill a shard without gigabytes.
func WithShardCapacity(n int) Option {
	return func(c *config) error { c.capacity = n; return nil }
}

// WarnSchedulersForTest is warnSchedulers, for the tests of the warning.
const WarnSchedulersForTest = warnSchedulers
