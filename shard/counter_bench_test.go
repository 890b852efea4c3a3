package shard

import (
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
