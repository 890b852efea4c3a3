package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel/internal/hist"
)

func TestIntervalPercentiles(t *testing.T) {
	var h hist.Histogram
	h.Record(int64(time.Second))
	a := h.Snapshot()
	for range 10 {
		h.Record(int64(time.Millisecond))
	}
	p := h.Snapshot().Sub(a).Percentiles()
	assert.Less(t, p.Max, time.Second, "an interval's max is not the all-time max")
	assert.InDelta(t, time.Millisecond, p.Max, float64(time.Millisecond)*2*hist.RelativeError)
	assert.EqualValues(t, 10, p.Count)
}

func TestLibraryCost(t *testing.T) {
	// run is a result of calls calls over 10s, using cpu.
	run := func(calls int64, cpu time.Duration) *Result {
		return &Result{Measured: 10 * time.Second, CPU: cpu, CPUPerOp: float64(cpu) / float64(calls),
			Ops: opCounts{Schedules: calls / 2, Cancels: calls / 2}}
	}
	// The load alone: 5M calls at 300ns each.
	alone := run(5_000_000, 1500*time.Millisecond)
	for _, c := range []struct {
		name  string
		r     *Result
		want  libraryCPU
		cores float64
	}{
		// 1µs per call, of which the load's 300ns: 700ns over 6M calls.
		{"more calls than alone", run(6_000_000, 6*time.Second), libraryCPU{CPU: 4200 * time.Millisecond, PerOp: 700}, 0.42},
		{"as many calls", run(5_000_000, 2*time.Second), libraryCPU{CPU: 500 * time.Millisecond, PerOp: 100}, 0.05},
		// 320ns per call: 20ns is below a tenth of 300ns.
		{"near zero", run(5_000_000, 1600*time.Millisecond), libraryCPU{CPU: 100 * time.Millisecond, PerOp: 20, Noise: true}, 0.01},
		// 280ns per call: the load alone cost more than with the library.
		{"negative", run(5_000_000, 1400*time.Millisecond), libraryCPU{CPU: -100 * time.Millisecond, PerOp: -20, Noise: true}, -0.01},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := libraryCost(c.r, alone)
			require.NotNil(t, got)
			assert.InDelta(t, c.want.PerOp, got.PerOp, 1e-6)
			assert.InDelta(t, c.want.CPU, got.CPU, 1, "per call times the run's calls")
			assert.Equal(t, c.want.Noise, got.Noise)
			assert.InDelta(t, c.cores, got.CPU.Seconds()/c.r.Measured.Seconds(), 1e-9)
		})
	}
	assert.Nil(t, libraryCost(run(0, 0), alone), "no calls, no cost per call")
	assert.Nil(t, libraryCost(alone, run(0, 0)), "nothing to subtract")
}
