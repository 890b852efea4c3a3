package shardwheel_test

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/shardwheel/shardwheel"
)

// What a multiplexed client writes today to cancel a timeout by request id,
// beside the keyed API: a sync.Map from id to handle, with time.AfterFunc
// or with shardwheel handles. Each baseline schedules, stores the handle,
// then (the response) deletes it and cancels.
type keyedImpl struct {
	name   string
	new    func(b *testing.B) keyedOps
	resets bool // runs in BenchmarkIndexReset too
}

// keyedOps is one way of keeping timers by key.
type keyedOps struct {
	schedule func(key uint64, d time.Duration)
	cancel   func(key uint64)
	reset    func(key uint64, d time.Duration)
}

var keyedImpls = []keyedImpl{
	{"keyed", func(b *testing.B) keyedOps {
		ix := shardwheel.NewIndex[uint64](newBenchScheduler(b))
		return keyedOps{
			schedule: func(key uint64, d time.Duration) {
				if _, err := ix.AfterFunc(key, d, noop); err != nil {
					b.Fatal(err)
				}
			},
			cancel: func(key uint64) { ix.Cancel(key) },
			reset:  func(key uint64, d time.Duration) { ix.Reset(key, d) },
		}
	}, true},
	{"handle", func(b *testing.B) keyedOps { // shardwheel's own handle path, no index: the bound
		s := newBenchScheduler(b)
		var last shardwheel.Timer // the one goroutine's last timer: this way runs on one goroutine only
		return keyedOps{
			schedule: func(key uint64, d time.Duration) {
				var err error
				if last, err = s.AfterFunc(d, noop, shardwheel.ByKey(key)); err != nil {
					b.Fatal(err)
				}
			},
			cancel: func(uint64) { last.Cancel() },
		}
	}, false},
	{"syncmap-shardwheel", func(b *testing.B) keyedOps {
		s := newBenchScheduler(b)
		var m sync.Map
		return keyedOps{
			schedule: func(key uint64, d time.Duration) {
				t, err := s.AfterFunc(d, noop, shardwheel.ByKey(key))
				if err != nil {
					b.Fatal(err)
				}
				m.Store(key, t)
			},
			cancel: func(key uint64) {
				if t, ok := m.LoadAndDelete(key); ok {
					t.(shardwheel.Timer).Cancel()
				}
			},
			reset: func(key uint64, d time.Duration) {
				if t, ok := m.Load(key); ok {
					t.(shardwheel.Timer).Reset(d)
				}
			},
		}
	}, true},
	{"syncmap-afterfunc", func(b *testing.B) keyedOps {
		var m sync.Map
		b.Cleanup(func() {
			m.Range(func(_, t any) bool { t.(*time.Timer).Stop(); return true })
		})
		return keyedOps{
			schedule: func(key uint64, d time.Duration) { m.Store(key, time.AfterFunc(d, noop)) },
			cancel: func(key uint64) {
				if t, ok := m.LoadAndDelete(key); ok {
					t.(*time.Timer).Stop()
				}
			},
			reset: func(key uint64, d time.Duration) {
				if t, ok := m.Load(key); ok {
					t.(*time.Timer).Reset(d)
				}
			},
		}
	}, true},
}

// BenchmarkKeyedScheduleCancel measures a request timeout cancelled by
// request id when the response arrives: Index.AfterFunc+Index.Cancel against the
// sync.Map baselines and shardwheel's handle path, on one goroutine and
// from RunParallel.
func BenchmarkKeyedScheduleCancel(b *testing.B) {
	for _, impl := range keyedImpls {
		b.Run(impl.name+"/1-goroutine", func(b *testing.B) {
			ops := impl.new(b)
			b.ReportAllocs()
			b.ResetTimer()
			for key := range uint64(b.N) {
				ops.schedule(key, time.Minute)
				ops.cancel(key)
			}
			reportRate(b, "pairs/s")
		})
		if impl.name == "handle" {
			continue // its cancel keeps one goroutine's handle; BenchmarkScheduleCancelParallel has it
		}
		b.Run(impl.name+"/parallel", func(b *testing.B) {
			ops := impl.new(b)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for key := rand.Uint64(); pb.Next(); key++ {
					ops.schedule(key, time.Minute)
					ops.cancel(key)
				}
			})
			reportRate(b, "pairs/s")
		})
	}
}

// BenchmarkIndexReset pushes idle timeouts forward by key, at random among
// 100k keys, against the sync.Map baselines (BenchmarkResetLater has the
// handle path).
func BenchmarkIndexReset(b *testing.B) {
	for _, impl := range keyedImpls {
		if !impl.resets {
			continue
		}
		for _, parallel := range []bool{false, true} {
			name := map[bool]string{false: "/random-100k", true: "/random-100k-parallel"}[parallel]
			b.Run(impl.name+name, func(b *testing.B) {
				ops := impl.new(b)
				for key := range uint64(resetTimers) {
					ops.schedule(key, time.Minute)
				}
				runResets(b, parallel, func(i int) { ops.reset(uint64(i), time.Minute) })
			})
		}
	}
}
