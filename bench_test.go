package shardwheel_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardwheel/shardwheel"
)

// newBenchScheduler returns a scheduler with the defaults a proxy would use,
// stopped when the benchmark ends.
func newBenchScheduler(b *testing.B, opts ...shardwheel.Option) *shardwheel.Scheduler {
	b.Helper()
	s, err := shardwheel.New(opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Stop() })
	return s
}

func reportRate(b *testing.B, unit string) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), unit)
}

// BenchmarkScheduleCancel measures a request timeout that is cancelled
// when the response arrives, against time.AfterFunc + Stop.
func BenchmarkScheduleCancel(b *testing.B) {
	for _, pending := range []int{0, 1_000_000} {
		name := map[int]string{0: "empty", 1_000_000: "1M-pending"}[pending]
		b.Run("shardwheel/"+name, func(b *testing.B) {
			s := newBenchScheduler(b)
			prefillShardwheel(b, s, pending)
			b.ReportAllocs()
			b.ResetTimer()
			for key := range uint64(b.N) {
				scheduleCancel(b, s, key)
			}
			reportRate(b, "pairs/s")
		})
		b.Run("afterfunc/"+name, func(b *testing.B) {
			prefillAfterFunc(b, pending)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				time.AfterFunc(time.Minute, noop).Stop()
			}
			reportRate(b, "pairs/s")
		})
	}
}

func BenchmarkScheduleCancelParallel(b *testing.B) {
	for _, pending := range []int{0, 1_000_000} {
		name := map[int]string{0: "empty", 1_000_000: "1M-pending"}[pending]
		b.Run("shardwheel/"+name, func(b *testing.B) {
			s := newBenchScheduler(b)
			prefillShardwheel(b, s, pending)
			scheduleCancelParallel(b, s)
		})
		b.Run("afterfunc/"+name, func(b *testing.B) {
			prefillAfterFunc(b, pending)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					time.AfterFunc(time.Minute, noop).Stop()
				}
			})
			reportRate(b, "pairs/s")
		})
	}
}

// BenchmarkScheduleExpire measures timers that run: schedule with a delay
// of one tick, keeping at most expireWindow in flight so that the run is a
// steady state rather than one burst, against time.AfterFunc. stats=off
// shows what the latency histograms cost.
func BenchmarkScheduleExpire(b *testing.B) {
	for _, stats := range []bool{true, false} {
		b.Run(fmt.Sprintf("shardwheel/stats=%v", stats), func(b *testing.B) {
			s := newBenchScheduler(b, shardwheel.WithTick(time.Millisecond), shardwheel.WithStats(stats))
			runExpire(b, func(i int, task func()) {
				if _, err := s.AfterFunc(time.Millisecond, task, shardwheel.ByKey(uint64(i))); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
	b.Run("afterfunc", func(b *testing.B) {
		runExpire(b, func(_ int, task func()) { time.AfterFunc(time.Millisecond, task) })
	})
}

const expireWindow = 1 << 16

func runExpire(b *testing.B, schedule func(i int, task func())) {
	var ran atomic.Int64
	task := func() { ran.Add(1) }
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		for int64(i)-ran.Load() >= expireWindow {
			time.Sleep(50 * time.Microsecond)
		}
		schedule(i, task)
	}
	for deadline := time.Now().Add(time.Minute); ran.Load() < int64(b.N); {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d timers ran", ran.Load(), b.N)
		}
		time.Sleep(50 * time.Microsecond)
	}
	reportRate(b, "timers/s")
}

// BenchmarkStatsOverhead is Schedule+Cancel with the latency histograms on
// and off (counters are always kept).
func BenchmarkStatsOverhead(b *testing.B) {
	for _, stats := range []bool{true, false} {
		b.Run(fmt.Sprintf("schedule-cancel/stats=%v", stats), func(b *testing.B) {
			s := newBenchScheduler(b, shardwheel.WithStats(stats))
			scheduleCancelParallel(b, s)
		})
	}
}

// scheduleCancelParallel schedules and at once cancels timers with distinct
// keys from RunParallel goroutines and reports pairs/s.
func scheduleCancelParallel(b *testing.B, s *shardwheel.Scheduler) {
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for key := rand.Uint64(); pb.Next(); key++ {
			scheduleCancel(b, s, key)
		}
	})
	reportRate(b, "pairs/s")
}

// scheduleCancel is one request timeout cancelled by its response.
func scheduleCancel(b *testing.B, s *shardwheel.Scheduler, key uint64) {
	t, err := s.AfterFunc(time.Minute, noop, shardwheel.ByKey(key))
	if err != nil {
		b.Fatal(err)
	}
	t.Cancel()
}

func prefillShardwheel(b *testing.B, s *shardwheel.Scheduler, n int) {
	b.Helper()
	for i := range n {
		if _, err := s.AfterFunc(time.Hour+time.Duration(i)*time.Microsecond, noop, shardwheel.ByKey(uint64(i))); err != nil {
			b.Fatal(err)
		}
	}
}

func prefillAfterFunc(b *testing.B, n int) {
	b.Helper()
	ts := make([]*time.Timer, n)
	for i := range ts {
		ts[i] = time.AfterFunc(time.Hour+time.Duration(i)*time.Microsecond, noop)
	}
	b.Cleanup(func() {
		for _, t := range ts {
			t.Stop()
		}
	})
}

// BenchmarkResetLater pushes an idle timeout forward, as a proxy does on
// every read, against time.Timer.Reset.
func BenchmarkResetLater(b *testing.B) {
	b.Run("shardwheel/one", func(b *testing.B) {
		s := newBenchScheduler(b)
		t, err := s.AfterFunc(time.Minute, noop, shardwheel.ByKey(1))
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if !t.Reset(time.Minute) {
				b.Fatal("timer not pending")
			}
		}
		reportRate(b, "resets/s")
	})
	b.Run("afterfunc/one", func(b *testing.B) {
		t := time.AfterFunc(time.Minute, noop)
		defer t.Stop()
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			t.Reset(time.Minute)
		}
		reportRate(b, "resets/s")
	})
	for _, parallel := range []bool{false, true} {
		name := map[bool]string{false: "random-100k", true: "random-100k-parallel"}[parallel]
		b.Run("shardwheel/"+name, func(b *testing.B) {
			s := newBenchScheduler(b)
			ts := make([]shardwheel.Timer, resetTimers)
			for i := range ts {
				var err error
				if ts[i], err = s.AfterFunc(time.Minute, noop, shardwheel.ByKey(uint64(i))); err != nil {
					b.Fatal(err)
				}
			}
			runResets(b, parallel, func(i int) { ts[i].Reset(time.Minute) })
		})
		b.Run("afterfunc/"+name, func(b *testing.B) {
			ts := make([]*time.Timer, resetTimers)
			for i := range ts {
				ts[i] = time.AfterFunc(time.Minute, noop)
			}
			defer func() {
				for _, t := range ts {
					t.Stop()
				}
			}()
			runResets(b, parallel, func(i int) { ts[i].Reset(time.Minute) })
		})
	}
}

const resetTimers = 100_000

// runResets calls reset on random timers, from one goroutine or from
// RunParallel, and reports resets/s.
func runResets(b *testing.B, parallel bool, reset func(i int)) {
	b.ReportAllocs()
	b.ResetTimer()
	if parallel {
		b.RunParallel(func(pb *testing.PB) {
			r := rand.New(rand.NewPCG(rand.Uint64(), 1))
			for pb.Next() {
				reset(r.IntN(resetTimers))
			}
		})
	} else {
		r := rand.New(rand.NewPCG(rand.Uint64(), 1))
		for range b.N {
			reset(r.IntN(resetTimers))
		}
	}
	reportRate(b, "resets/s")
}

// residentCounts are the resident populations BenchmarkResident measures:
// a busy proxy's million, and 5M for closure-free timers.
var residentCounts = []int{1_000_000, 5_000_000}

// residentTask returns the closure every resident timer carries: one
// captured pointer, the shape of a typical "cancel this request" callback.
func residentTask(p *int) func() { return func() { *p++ } }

// scheduleResident schedules n timers with delays spread over [10s, 60s]:
// none is due during the measurement. It reports the allocations per timer
// of the whole loop, the benchmark's own closure included (task is nil for
// the handler form, which has none).
func scheduleResident(b *testing.B, n int, withTask bool, schedule func(i int, d time.Duration, task func())) {
	b.Helper()
	var sink int
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range n {
		d := 10*time.Second + time.Duration(i%50_000)*time.Millisecond
		var task func()
		if withTask {
			task = residentTask(&sink)
		}
		schedule(i, d, task)
	}
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(n), "allocs/timer")
}

// BenchmarkResident measures what 1M and 5M pending timers cost while
// nothing is due: heap bytes per timer (closure included), GC mark CPU of
// one forced collection, and the CPU the process burns doing nothing for a
// second at a 1ms tick (on Unix, from getrusage; elsewhere that metric is
// omitted). "shardwheel" timers carry a one-pointer closure each, as
// "afterfunc" ones do; "handler" timers share one Handler and carry none.
// Run it with -benchtime 1x: each iteration is one full run.
func BenchmarkResident(b *testing.B) {
	for _, n := range residentCounts {
		label := fmt.Sprintf("%dM", n/1_000_000)
		b.Run(label+"/shardwheel", func(b *testing.B) { residentWheel(b, n, false) })
		b.Run(label+"/handler", func(b *testing.B) { residentWheel(b, n, true) })
		b.Run(label+"/afterfunc", func(b *testing.B) {
			for range b.N {
				before := heapInUse()
				ts := make([]*time.Timer, 0, n)
				scheduleResident(b, n, true, func(_ int, d time.Duration, task func()) {
					ts = append(ts, time.AfterFunc(d, task))
				})
				// The slice is the benchmark's, not the timers'; the
				// runtime's timers are in its heaps at once.
				measureResident(b, n, before+uint64(cap(ts))*8, nil)
				for _, t := range ts {
					t.Stop()
				}
			}
		})
	}
}

// residentWheel is BenchmarkResident's shardwheel side: n timers with a
// closure each, or through one Handler.
func residentWheel(b *testing.B, n int, handler bool) {
	for range b.N {
		before := heapInUse()
		s, err := shardwheel.New(shardwheel.WithTick(time.Millisecond))
		if err != nil {
			b.Fatal(err)
		}
		var sink int
		h, err := s.NewHandler(func(uint64) { sink++ })
		if err != nil {
			b.Fatal(err)
		}
		scheduleResident(b, n, !handler, func(i int, d time.Duration, task func()) {
			var err error
			if handler {
				_, err = h.AfterFunc(uint64(i), d, shardwheel.ByKey(uint64(i)))
			} else {
				_, err = s.AfterFunc(d, task, shardwheel.ByKey(uint64(i)))
			}
			if err != nil {
				b.Fatal(err)
			}
		})
		measureResident(b, n, before, func() bool { return s.Stats().Total.Queued == 0 })
		runtime.KeepAlive(s)
		s.Stop()
	}
}

// measureResident reports the heap per timer of n resident timers, less
// before, once filed holds (nil: at once): for shardwheel, once the shards
// have moved every queued timer into their wheels.
func measureResident(b *testing.B, n int, before uint64, filed func() bool) {
	b.Helper()
	for deadline := time.Now().Add(waitFor); filed != nil && !filed(); time.Sleep(pollEvery) {
		if time.Now().After(deadline) {
			b.Fatalf("timers still queued after %v", waitFor)
		}
	}
	after := heapInUse()
	b.ReportMetric(float64(after-before)/float64(n), "B/timer")
	b.ReportMetric(gcMarkCPU().Seconds()*1e3, "gc-mark-ms")
	if idle, ok := idleCPU(time.Second); ok {
		b.ReportMetric(idle*100, "idle-%core")
	}
}

// gcMarkCPU returns the mark CPU time of one forced collection.
func gcMarkCPU() time.Duration {
	read := func() float64 {
		ss := []metrics.Sample{
			{Name: "/cpu/classes/gc/mark/assist:cpu-seconds"},
			{Name: "/cpu/classes/gc/mark/dedicated:cpu-seconds"},
			{Name: "/cpu/classes/gc/mark/idle:cpu-seconds"},
		}
		metrics.Read(ss)
		var t float64
		for _, s := range ss {
			t += s.Value.Float64()
		}
		return t
	}
	start := read()
	runtime.GC()
	return time.Duration((read() - start) * float64(time.Second))
}

// idleCPU returns the process's CPU use over d, as a fraction of one core,
// and false where processCPU cannot measure it (then the benchmark omits
// the idle-%core metric).
func idleCPU(d time.Duration) (float64, bool) {
	start, ok := processCPU()
	if !ok {
		return 0, false
	}
	t0 := time.Now()
	time.Sleep(d)
	end, ok := processCPU()
	if !ok {
		return 0, false
	}
	return float64(end-start) / float64(time.Since(t0)), true
}

// BenchmarkWithTimeout measures a request deadline that is cancelled when
// the response arrives, s.WithTimeout against context.WithTimeout, under
// context.Background (the target: at most half the time and bytes, at
// most 2 allocations) and under a cancellable parent, as a
// server's request context is. "+done" also asks for Done, as an HTTP
// client does.
func BenchmarkWithTimeout(b *testing.B) {
	s := newBenchScheduler(b)
	cancellable, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	for _, p := range []struct {
		name   string
		parent context.Context
	}{{"background", context.Background()}, {"cancellable", cancellable}} {
		for _, done := range []bool{false, true} {
			name := p.name
			if done {
				name += "+done"
			}
			for _, m := range []struct {
				name string
				with func(context.Context, time.Duration) (context.Context, context.CancelFunc)
			}{{"context", context.WithTimeout}, {"shardwheel", s.WithTimeout}} {
				b.Run(m.name+"/"+name, func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						ctx, cancel := m.with(p.parent, 30*time.Second)
						if done {
							_ = ctx.Done()
						}
						cancel()
					}
				})
			}
		}
	}
}

// BenchmarkScheduleAtLimit measures Schedule at the WithMaxPending limit,
// where it is rejected, beside one that is accepted (Schedule + Cancel),
// with as many shards and lanes as a 64-CPU host has: a rejection must not
// search every shard's lanes, as the system is overloaded exactly then.
func BenchmarkScheduleAtLimit(b *testing.B) {
	for _, procs := range []int{2, 64} {
		b.Run(fmt.Sprintf("gomaxprocs=%d", procs), func(b *testing.B) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			const limit = 1024
			s := newBenchScheduler(b, shardwheel.WithShards(procs), shardwheel.WithMaxPending(limit))
			b.Run("accepted", func(b *testing.B) {
				b.ReportAllocs()
				for key := range uint64(b.N) {
					scheduleCancel(b, s, key)
				}
			})
			for key := range uint64(limit) {
				if _, err := s.AfterFunc(time.Hour, noop, shardwheel.ByKey(key)); err != nil {
					b.Fatal(err)
				}
			}
			b.Run("rejected", func(b *testing.B) {
				b.ReportAllocs()
				for key := range uint64(b.N) {
					if _, err := s.AfterFunc(time.Hour, noop, shardwheel.ByKey(key)); err == nil {
						b.Fatal("accepted beyond the limit")
					}
				}
			})
		})
	}
}
