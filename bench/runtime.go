package main

import (
	"math"
	"runtime"
	"runtime/metrics"
	"time"
)

// The runtime/metrics the report uses.
const (
	mGCCPU    = "/cpu/classes/gc/total:cpu-seconds"
	mGCCycles = "/gc/cycles/total:gc-cycles"
	mGCPauses = "/sched/pauses/total/gc:seconds"
	mHeapLive = "/gc/heap/live:bytes"
	mAllocs   = "/gc/heap/allocs:objects"
	mAllocB   = "/gc/heap/allocs:bytes"
	// mHeapObjects is the bytes of heap objects, live and not yet swept.
	mHeapObjects = "/memory/classes/heap/objects:bytes"
)

// procSample is the process-wide counters at one instant.
type procSample struct {
	cpu      time.Duration
	host     time.Duration // CPU time of the whole host, if known
	gcCPU    time.Duration
	gcCycles uint64
	pauses   *metrics.Float64Histogram
	allocs   uint64 // heap objects allocated since the process started
	allocB   uint64 // and their bytes
}

// sampleProc reads the process-wide counters now.
func sampleProc() procSample {
	s := []metrics.Sample{{Name: mGCCPU}, {Name: mGCCycles}, {Name: mGCPauses}, {Name: mAllocs}, {Name: mAllocB}}
	metrics.Read(s)
	return procSample{
		cpu:      cpuTime(),
		host:     hostCPUTime(),
		gcCPU:    time.Duration(s[0].Value.Float64() * 1e9),
		gcCycles: s[1].Value.Uint64(),
		pauses:   s[2].Value.Float64Histogram(),
		allocs:   s[3].Value.Uint64(),
		allocB:   s[4].Value.Uint64(),
	}
}

// gcCost is what the garbage collector cost between two samples.
type gcCost struct {
	CPU       time.Duration `json:"cpu_ns"`
	Cycles    uint64        `json:"cycles"`
	PauseSum  time.Duration `json:"pause_total_ns"`
	PauseMax  time.Duration `json:"pause_max_ns"`
	PauseSeen uint64        `json:"pauses"`
}

// add returns the cost of two windows together.
func (c gcCost) add(o gcCost) gcCost {
	return gcCost{CPU: c.CPU + o.CPU, Cycles: c.Cycles + o.Cycles, PauseSum: c.PauseSum + o.PauseSum,
		PauseMax: max(c.PauseMax, o.PauseMax), PauseSeen: c.PauseSeen + o.PauseSeen}
}

// gcBetween returns the GC cost from a to b. Pause times come from a
// histogram, so their sum and maximum are estimates: each pause counts as
// the middle of its bucket (the lower bound for the open last bucket).
func gcBetween(a, b procSample) gcCost {
	c := gcCost{CPU: b.gcCPU - a.gcCPU, Cycles: b.gcCycles - a.gcCycles}
	for i, n := range b.pauses.Counts {
		n -= a.pauses.Counts[i]
		if n == 0 {
			continue
		}
		lo, hi := b.pauses.Buckets[i], b.pauses.Buckets[i+1]
		mid := lo
		if !math.IsInf(hi, 1) {
			mid = (max(lo, 0) + hi) / 2
		}
		c.PauseSeen += n
		c.PauseSum += time.Duration(mid * float64(n) * 1e9)
		c.PauseMax = max(c.PauseMax, time.Duration(mid*1e9))
	}
	return c
}

// liveHeap collects garbage and returns the bytes of live objects left.
func liveHeap() int64 {
	runtime.GC()
	s := []metrics.Sample{{Name: mHeapLive}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}
