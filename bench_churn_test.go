package shardwheel_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardwheel/shardwheel"
)

// The delayed-cancel churn (see shared/FLOOR.md and go run ./bench
// churn): each of G goroutines schedules a 30s timer and cancels the one
// it scheduled churnRing iterations earlier, as a proxy cancels a request
// timeout when the response arrives; a million background timers are
// resident. Only the public API is used, so that the benchmarks measure
// any engine behind it.

const (
	churnDelay     = 30 * time.Second
	churnRing      = 1 << 16 // iterations between a timer's AfterFunc and its Cancel
	churnResident  = 1_000_000
	churnSmallRing = 1 << 10 // for smoke runs: see churnSize
	churnSmallRes  = 10_000
)

// churnSize returns the ring and the resident count of a run of b: the
// load's own, or small ones for a smoke run (-short, or -benchtime 1x
// and other tiny b.N, as CI runs benchmarks), where filling a million
// timers would cost far more than the run measures.
func churnSize(b *testing.B) (ring, resident int) {
	if testing.Short() || b.N < 10_000 {
		return churnSmallRing, churnSmallRes
	}
	return churnRing, churnResident
}

// churnOps are one implementation's calls: schedule with a distinct key
// per timer, and cancel. Function values, not an interface, so that a
// handle is never boxed: the loop allocates only the task closure.
type churnOps[H any] struct {
	schedule func(key uint64, d time.Duration, f func()) H
	cancel   func(h H) bool
}

var afterFuncOps = churnOps[*time.Timer]{
	schedule: func(_ uint64, d time.Duration, f func()) *time.Timer { return time.AfterFunc(d, f) },
	cancel:   (*time.Timer).Stop,
}

// wheelOps returns s.AfterFunc's calls, with ByKey if keyed.
func wheelOps(s *shardwheel.Scheduler, keyed bool) churnOps[shardwheel.Timer] {
	return churnOps[shardwheel.Timer]{
		schedule: func(key uint64, d time.Duration, f func()) shardwheel.Timer {
			var t shardwheel.Timer
			var err error
			if keyed {
				t, err = s.AfterFunc(d, f, shardwheel.ByKey(key))
			} else {
				t, err = s.AfterFunc(d, f)
			}
			if err != nil {
				panic(err) // no limit is set, and s is stopped only after the run
			}
			return t
		},
		cancel: shardwheel.Timer.Cancel,
	}
}

// BenchmarkChurn is the delayed-cancel loop with the background timers
// resident and the cancel rings full before the timer starts: b.N pairs
// shared by G goroutines, each pair a schedule (time.AfterFunc,
// s.AfterFunc, or s.AfterFunc with a distinct ByKey) and the Cancel of the
// timer that goroutine scheduled a ring earlier. cpu-ns/pair is the
// process's CPU (getrusage: the goroutines, the runtime's or the wheel's
// own goroutines, the GC) per pair; where getrusage is missing,
// wallxP-ns/pair is the wall time times min(G, GOMAXPROCS) per pair, an
// upper bound. allocs/op counts the task closure each schedule takes, as
// a proxy's does. Unlike go run ./bench churn, every implementation runs
// in the same process, one after the other.
func BenchmarkChurn(b *testing.B) {
	for _, g := range []int{2, 6} {
		b.Run(fmt.Sprintf("afterfunc/G=%d", g), func(b *testing.B) { benchChurn(b, g, afterFuncOps) })
	}
	for _, keyed := range []bool{false, true} {
		name := map[bool]string{false: "wheel", true: "keyed"}[keyed]
		for _, g := range []int{2, 6} {
			b.Run(fmt.Sprintf("%s/G=%d", name, g), func(b *testing.B) {
				s := newBenchScheduler(b)
				benchChurn(b, g, wheelOps(s, keyed))
			})
		}
	}
	// A proxy that sheds load checks Pending before each request.
	for _, g := range []int{2, 6} {
		b.Run(fmt.Sprintf("wheel+pending/G=%d", g), func(b *testing.B) {
			s := newBenchScheduler(b)
			ops := wheelOps(s, false)
			schedule := ops.schedule
			ops.schedule = func(key uint64, d time.Duration, f func()) shardwheel.Timer {
				if s.Pending() < 0 {
					panic("negative Pending")
				}
				return schedule(key, d, f)
			}
			benchChurn(b, g, ops)
		})
	}
}

func benchChurn[H any](b *testing.B, g int, ops churnOps[H]) {
	ring, resident := churnSize(b)
	var fired atomic.Int64
	// task is every timer's: one captured value, as a proxy's "fail this
	// request" callback has. None is due during the run.
	task := func(key uint64) func() {
		return func() {
			if key != 0 {
				fired.Add(1)
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	background := make([]H, resident)
	for i := range background {
		key := 1<<63 | uint64(i)
		background[i] = ops.schedule(key, 30*time.Second+time.Duration(rng.Int64N(int64(30*time.Second))), task(key))
	}
	rings := make([][]H, g)
	for w := range rings {
		rings[w] = make([]H, ring)
		for n := range ring {
			key := uint64(w+1)<<56 | uint64(n)
			rings[w][n] = ops.schedule(key, churnDelay, task(key))
		}
	}
	defer func() {
		for _, r := range append(rings, background) {
			for _, h := range r {
				ops.cancel(h)
			}
		}
		if n := fired.Load(); n > 0 {
			b.Errorf("%d timers of 30s or more ran", n)
		}
	}()
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0, cpuOK := processCPU()
	var wg sync.WaitGroup
	var missed atomic.Int64
	for w := range g {
		pairs := b.N / g
		if w < b.N%g {
			pairs++
		}
		wg.Go(func() {
			r := rings[w]
			for i := range pairs {
				n := ring + i
				key := uint64(w+1)<<56 | uint64(n)
				h := ops.schedule(key, churnDelay, task(key))
				slot := n & (ring - 1)
				if !ops.cancel(r[slot]) {
					missed.Add(1)
				}
				r[slot] = h
			}
		})
	}
	wg.Wait()
	cpu1, _ := processCPU()
	b.StopTimer()
	elapsed := b.Elapsed()
	if cpuOK {
		b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/pair")
	} else {
		b.ReportMetric(float64(elapsed)*float64(min(g, runtime.GOMAXPROCS(0)))/float64(b.N), "wallxP-ns/pair")
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "pairs/s")
	if n := missed.Load(); n > 0 {
		b.Errorf("%d cancels of pending 30s timers returned false", n)
	}
}

// BenchmarkCancelAtOnce is a timer cancelled right after it is scheduled
// (a response faster than anything), through the calls that take no key:
// time.AfterFunc + Stop against s.AfterFunc + Cancel, from one goroutine
// and from RunParallel's. BenchmarkScheduleCancel has the keyed
// s.AfterFunc with ByKey; BenchmarkResetLater the Reset of a pending timer;
// BenchmarkWithTimeout the contexts.
func BenchmarkCancelAtOnce(b *testing.B) {
	for _, parallel := range []bool{false, true} {
		suffix := map[bool]string{false: "", true: "/parallel"}[parallel]
		b.Run("afterfunc"+suffix, func(b *testing.B) {
			runCancelAtOnce(b, parallel, func() bool { return time.AfterFunc(time.Minute, noop).Stop() })
		})
		b.Run("wheel"+suffix, func(b *testing.B) {
			s := newBenchScheduler(b)
			runCancelAtOnce(b, parallel, func() bool {
				t, err := s.AfterFunc(time.Minute, noop)
				return err == nil && t.Cancel()
			})
		})
	}
}

// runCancelAtOnce runs pair b.N times, from one goroutine or RunParallel,
// and reports pairs/s; pair must report a successful cancel.
func runCancelAtOnce(b *testing.B, parallel bool, pair func() bool) {
	var failed atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	if parallel {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if !pair() {
					failed.Add(1)
				}
			}
		})
	} else {
		for range b.N {
			if !pair() {
				failed.Add(1)
			}
		}
	}
	reportRate(b, "pairs/s")
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d of %d cancels of a pending timer failed", n, b.N)
	}
}

// BenchmarkChurnFeatures is BenchmarkChurn for the timers with slack and
// the periodic series: with ByKey (filed on the caller's wheel, or, for
// Every, on the key's) against without it (the caller's wheel), each
// scheduled and cancelled a ring later. A series' task never runs: its period is the
// churn's delay.
func BenchmarkChurnFeatures(b *testing.B) {
	ops := func(s *shardwheel.Scheduler, f func(key uint64, d time.Duration, task func()) (shardwheel.Timer, error)) churnOps[shardwheel.Timer] {
		return churnOps[shardwheel.Timer]{
			schedule: func(key uint64, d time.Duration, task func()) shardwheel.Timer {
				t, err := f(key, d, task)
				if err != nil {
					panic(err)
				}
				return t
			},
			cancel: shardwheel.Timer.Cancel,
		}
	}
	for _, bench := range []struct {
		name string
		f    func(s *shardwheel.Scheduler) func(key uint64, d time.Duration, task func()) (shardwheel.Timer, error)
	}{
		{"within/key", func(s *shardwheel.Scheduler) func(uint64, time.Duration, func()) (shardwheel.Timer, error) {
			return func(key uint64, d time.Duration, task func()) (shardwheel.Timer, error) {
				return s.AfterFunc(d, task, shardwheel.ByKey(key), shardwheel.Slack(time.Second))
			}
		}},
		{"within/nokey", func(s *shardwheel.Scheduler) func(uint64, time.Duration, func()) (shardwheel.Timer, error) {
			return func(_ uint64, d time.Duration, task func()) (shardwheel.Timer, error) {
				return s.AfterFunc(d, task, shardwheel.Slack(time.Second))
			}
		}},
		{"every/key", func(s *shardwheel.Scheduler) func(uint64, time.Duration, func()) (shardwheel.Timer, error) {
			return func(key uint64, d time.Duration, task func()) (shardwheel.Timer, error) {
				return s.Every(d, task, shardwheel.ByKey(key))
			}
		}},
		{"every/nokey", func(s *shardwheel.Scheduler) func(uint64, time.Duration, func()) (shardwheel.Timer, error) {
			return func(_ uint64, d time.Duration, task func()) (shardwheel.Timer, error) {
				return s.Every(d, task)
			}
		}},
	} {
		for _, g := range []int{2, 6} {
			b.Run(fmt.Sprintf("%s/G=%d", bench.name, g), func(b *testing.B) {
				s := newBenchScheduler(b)
				benchChurn(b, g, ops(s, bench.f(s)))
			})
		}
	}
}
