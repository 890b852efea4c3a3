package shardwheel

import (
	"time"
	"unsafe"
)

// TimerCtxSize is the size of a context's struct, which with its closure
// makes the bytes a context costs.
const TimerCtxSize = unsafe.Sizeof(timerCtx{})

// LiveSchedulers returns the number of Schedulers made by New and not yet
// stopped, and RearmLiveWarning lets the next New beyond WarnSchedulers
// warn again: the warning is once per process, and tests need to see it.
func LiveSchedulers() int64 { return liveSchedulers.Load() }

func RearmLiveWarning() { warnedLive.Store(false) }

// IndexLen returns the number of entries in s's key indexes, stale ones
// included: tests poll it to see entries go away.
func IndexLen(s *Scheduler) int {
	n := 0
	for i := range s.index {
		n += s.index[i].m.Size()
	}
	return n
}

// ClockReading returns s's clock reading: the real monotonic clock for a
// Scheduler made outside a testing/synctest bubble, whatever goroutine
// reads it.
func ClockReading(s *Scheduler) time.Duration { return s.clock.Now() }

// Epoch returns the time s's clock reading 0 stands for.
func Epoch(s *Scheduler) time.Time { return s.epoch }
