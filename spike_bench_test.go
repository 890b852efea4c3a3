package shardwheel_test

import (
	"flag"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/shardwheel/shardwheel"
)

// A spike comes back: a spike of timers due in an hour, scheduled at once
// and all cancelled, on an idle Scheduler, and how much of the heap it
// grew and of the forced GC time it added stay. go run ./bench spike
// measures the same in fresh processes, with a proxy's churn beside it
// and at 10M too.

const (
	spikeTimers      = 1_000_000
	spikeSmallTimers = 50_000 // for smoke runs: see spikeSize
	spikeWait        = 30 * time.Second
	spikeSmallWait   = time.Second
)

// spikeSize returns the spike and the longest wait of a run: 1M timers
// and 30s, or for a smoke run (-short, or -benchtime 1x as CI runs
// benchmarks) 50,000 and a second, which is too small a spike to come
// back (the shards keep a reserve of free nodes) but runs every step.
func spikeSize() (timers int, wait time.Duration) {
	if f := flag.Lookup("test.benchtime"); testing.Short() || f != nil && f.Value.String() == "1x" {
		return spikeSmallTimers, spikeSmallWait
	}
	return spikeTimers, spikeWait
}

// spikeHeap is the heap's objects after forced collections, and the
// median wall time of those collections.
type spikeHeap struct {
	bytes int64
	gc    time.Duration
}

// measureSpikeHeap forces gcs collections and returns the heap after
// them and their median time.
func measureSpikeHeap(gcs int) spikeHeap {
	d := make([]time.Duration, gcs)
	for i := range d {
		t0 := time.Now()
		runtime.GC()
		d[i] = time.Since(t0)
	}
	slices.Sort(d)
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return spikeHeap{bytes: int64(m.HeapAlloc), gc: d[len(d)/2]}
}

// BenchmarkSpikeComesBack schedules a spike of 1M timers due in an hour
// from GOMAXPROCS goroutines, cancels them all, and then forces
// collections every second until the heap is back within 10% of the
// spike's growth above its pre-spike figure and a forced collection takes
// at most twice its pre-spike time plus 2ms, or 30s have passed (issue
// 30's criterion). It reports retained-% (the share of the spike's heap
// growth still held then, the benchmark's slice of handles left out),
// gc-ratio (a forced collection's time then over before: medians of 3
// and 5 collections) and back-s (seconds from the last Cancel to then),
// and logs those figures with shardwheel's Stats of its nodes.
//
// "closure" timers (s.AfterFunc) carry a closure each, as "afterfunc"
// ones (time.AfterFunc) do; "handler" timers (h.AfterFunc) share one
// Handler. Nothing reads the Scheduler's Stats while it waits (a Stats
// call wakes an idle shard goroutine, whose pass does the work that gives
// memory back): it measures an idle Scheduler that nobody watches.
// afterfunc runs last, and once per process (its later counts are
// skipped): the runtime's timer heaps never shrink, so they would count
// in the others' pre-spike heap, and a second spike would grow nothing.
//
// Run it alone (-bench SpikeComesBack: other benchmarks' runtime timers
// grow those heaps too), with the default -benchtime: each iteration is a
// whole spike, so b.N is 1. -short or -benchtime 1x makes it a smoke run
// (see spikeSize).
func BenchmarkSpikeComesBack(b *testing.B) {
	b.Run("closure", func(b *testing.B) {
		benchSpike(b, func(s *shardwheel.Scheduler) func(i int) (shardwheel.Timer, error) {
			return func(i int) (shardwheel.Timer, error) { return s.AfterFunc(time.Hour, spikeTask(i)) }
		}, shardwheel.Timer.Cancel)
	})
	b.Run("handler", func(b *testing.B) {
		benchSpike(b, func(s *shardwheel.Scheduler) func(i int) (shardwheel.Timer, error) {
			h, err := s.NewHandler(func(uint64) {})
			if err != nil {
				b.Fatal(err)
			}
			return func(i int) (shardwheel.Timer, error) { return h.AfterFunc(uint64(i), time.Hour) }
		}, shardwheel.Timer.Cancel)
	})
	b.Run("afterfunc", func(b *testing.B) {
		if runtimeSpiked {
			b.Skip("the runtime's timer heaps keep this process's earlier spike, and a second one would grow nothing: " +
				"time.AfterFunc is measured once per process (-count 1, or its first count)")
		}
		runtimeSpiked = true
		benchSpike(b, func(*shardwheel.Scheduler) func(i int) (*time.Timer, error) {
			return func(i int) (*time.Timer, error) { return time.AfterFunc(time.Hour, spikeTask(i)), nil }
		}, (*time.Timer).Stop)
	})
}

// runtimeSpiked is set once the afterfunc benchmark has run a spike in
// this process.
var runtimeSpiked bool

// spikeSink keeps spikeTask's closures from being optimized to nothing.
var spikeSink int

// spikeTask returns a spike timer's task: a closure of one captured
// value. It never runs.
func spikeTask(i int) func() { return func() { spikeSink = i } }

// benchSpike runs b.N spikes, each on a new Scheduler whose timers
// schedule makes (time.AfterFunc's ignore it), and reports the means.
func benchSpike[H any](b *testing.B, schedule func(s *shardwheel.Scheduler) func(i int) (H, error), cancel func(H) bool) {
	n, wait := spikeSize()
	var retained, gcRatio, back float64
	for range b.N {
		s, err := shardwheel.New()
		if err != nil {
			b.Fatal(err)
		}
		add := schedule(s)
		before := measureSpikeHeap(5)

		// The spike, from GOMAXPROCS goroutines, each with its handles.
		procs := runtime.GOMAXPROCS(0)
		handles := make([][]H, procs)
		var wg sync.WaitGroup
		for p := range procs {
			wg.Go(func() {
				hs := make([]H, 0, n/procs+1)
				for i := p; i < n; i += procs {
					h, err := add(i)
					if err != nil {
						panic(err) // no limit is set
					}
					hs = append(hs, h)
				}
				handles[p] = hs
			})
		}
		wg.Wait()
		peak := measureSpikeHeap(3)
		for _, hs := range handles {
			peak.bytes -= int64(cap(hs)) * int64(unsafe.Sizeof(*new(H)))
		}
		for _, hs := range handles {
			wg.Go(func() {
				for _, h := range hs {
					cancel(h)
				}
			})
		}
		wg.Wait()
		handles = nil
		done := time.Now()

		growth := float64(max(peak.bytes-before.bytes, 1))
		var after spikeHeap
		var at time.Duration
		for k := 0; ; k++ {
			time.Sleep(time.Until(done.Add(time.Duration(k) * time.Second)))
			at = time.Since(done)
			after = measureSpikeHeap(3)
			heapBack := float64(after.bytes-before.bytes) <= 0.1*growth
			gcBack := after.gc <= 2*before.gc+2*time.Millisecond
			if heapBack && gcBack || at >= wait {
				break
			}
		}
		back += at.Seconds()
		retained += 100 * float64(after.bytes-before.bytes) / growth
		gcRatio += float64(after.gc) / float64(max(before.gc, 1))
		line := fmt.Sprintf("%v after the cancels: heap %d B above before (the spike's: %d B), forced GC %v (before: %v)",
			at.Round(time.Millisecond), after.bytes-before.bytes, peak.bytes-before.bytes, after.gc, before.gc)
		if st := s.Stats().Total; st.Scheduled > 0 {
			line += fmt.Sprintf("; Stats: NodesAllocated %d, NodesReleased %d, BlocksReleased %d", st.NodesAllocated, st.NodesReleased, st.BlocksReleased)
		}
		b.Log(line)
		s.Stop()
	}
	b.ReportMetric(retained/float64(b.N), "retained-%")
	b.ReportMetric(gcRatio/float64(b.N), "gc-ratio")
	b.ReportMetric(back/float64(b.N), "back-s")
}
