package shard

import (
	"sync"
	"testing"

	"github.com/puzpuzpuz/xsync/v3"
)

// BenchmarkLaneCounter compares the counters producers bump on every
// Schedule, Cancel and Reset (an atomic add on the lane of the caller's P,
// which Stats sums) with xsync's striped Counter, which picks its stripe
// through a sync.Pool token instead: the case for replacing the hand-written
// totals with it.
func BenchmarkLaneCounter(b *testing.B) {
	b.Run("lane", func(b *testing.B) {
		sh, err := New(Config{Tick: 1, WheelSize: 2, TransferCap: 1, OnPanic: func(any) {}, Lanes: 8})
		if err != nil {
			b.Fatal(err)
		}
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				sh.lanes[CurrentP()&sh.laneMask].cancels.Add(1)
			}
		})
	})
	b.Run("xsync-counter", func(b *testing.B) {
		c := xsync.NewCounter()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				c.Inc()
			}
		})
	})
}

// BenchmarkHold measures what a producer pays to take and let go of its P's
// wheel, uncontended, as every Schedule from the wheel's own P does: one CAS
// on the owner word and, letting go, a swap and a look at the queue and the
// attention stack (release), against a sync.Mutex's Lock and Unlock, which
// would make a producer wait while the shard goroutine runs a pass.
func BenchmarkHold(b *testing.B) {
	b.Run("owner-word", func(b *testing.B) {
		h := newBenchShard(b)
		for b.Loop() {
			if !h.tryHold() {
				b.Fatal("wheel held")
			}
			h.release()
		}
	})
	b.Run("mutex", func(b *testing.B) {
		var mu sync.Mutex
		for b.Loop() {
			mu.Lock()
			//lint:ignore SA2001 the empty critical section is what is measured
			mu.Unlock()
		}
	})
}

// newBenchShard returns a shard no goroutine runs, closed at the end of b.
func newBenchShard(b *testing.B) *Shard {
	sh, err := New(Config{Tick: 1, WheelSize: 2, TransferCap: 1, OnPanic: func(any) {}, Lanes: 1})
	if err != nil {
		b.Fatal(err)
	}
	return sh
}
