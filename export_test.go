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

// IndexLen returns the number of entries in s's key indexes, stale ones
// included: tests poll it to see entries go away. It counts the entries
// one by one (Range), not by MapOf.Size: a writer updates Size's counters
// after it has let go of the bucket, so Size may still count an entry
// that another goroutine (the shard goroutine's unindex) has deleted.
func IndexLen(s *Scheduler) int {
	n := 0
	for i := range s.index {
		s.index[i].m.Range(func(uint64, shard.Ref) bool {
			n++
			return true
		})
	}
	return n
}

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
