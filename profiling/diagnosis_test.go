package profiling_test

import (
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
	"github.com/shardwheel/shardwheel/profiling"
)

// spikeLine returns the diagnosis line of the spike at when, failing the
// test if there is none.
func spikeLine(t *testing.T, diagnosis []string, when string) string {
	t.Helper()
	for _, l := range diagnosis {
		if strings.HasPrefix(l, "spike "+when+": ") {
			return l
		}
	}
	require.Fail(t, "no spike "+when, strings.Join(diagnosis, "\n"))
	return ""
}

// record takes a snapshot of s before and after inject, once the shard
// goroutines have fired all the timers inject scheduled, and returns the
// diagnosis Capture would write for them taken a second apart.
func record(t *testing.T, s *shardwheel.Scheduler, inject func() (timers int)) []string {
	t.Helper()
	before := s.Stats()
	n := inject()
	awaitFired(t, s, before.Total.Fired+uint64(n))
	after := s.Stats()
	return profiling.Diagnose(s.Tick(), []time.Duration{0, time.Second}, []shardwheel.Stats{before, after})
}

// A CPU stall: goroutines busy on every P while timers are due. The
// shards start their ticks late, though their passes are short (or as
// long as the stall, when one lost its CPU mid-pass): they waited for a
// CPU, which the diagnosis says, with the interval's time. Not parallel:
// it takes every CPU.
func TestDiagnoseCPUStall(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(2), shardwheel.WithTick(time.Millisecond))
	diagnosis := record(t, s, func() int {
		const timers = 200
		for i := range timers {
			_, err := s.AfterFunc(time.Duration(i%150+1)*time.Millisecond, func() {})
			require.NoError(t, err)
		}
		// Twice as many busy goroutines as Ps for 250ms: a shard
		// goroutine woken by its timer waits for one of them to be
		// preempted, 10ms at a time.
		var wg sync.WaitGroup
		start := time.Now()
		for range 2 * runtime.GOMAXPROCS(0) {
			wg.Go(func() {
				for time.Since(start) < 250*time.Millisecond {
				}
			})
		}
		wg.Wait()
		return timers
	})
	line := spikeLine(t, diagnosis, "at 0s-1s into the capture")
	assert.Contains(t, line, "waiting for a CPU", line)
	assert.NotContains(t, line, "long tasks")
	assert.Contains(t, strings.Join(diagnosis, "\n"), "1 of 1 intervals of the capture had a spike")
	assert.Contains(t, diagnosis[0], "p99.9", "the lateness finding covers the tail")
	assert.Contains(t, diagnosis[0], "max")
}

// A slow task: tasks that sleep hold up their shard, whose passes take as
// long as the timers were late; the timed tasks account for that time.
func TestDiagnoseSlowTask(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, shardwheel.WithShards(1), shardwheel.WithTick(time.Millisecond))
	diagnosis := record(t, s, func() int {
		// Task time is sampled one task in 16: twenty in a row are
		// timed at least once. Each has a tick of its own.
		const timers = 20
		for i := range timers {
			_, err := s.AfterFunc(time.Duration(i+1)*time.Millisecond, func() { time.Sleep(10 * time.Millisecond) })
			require.NoError(t, err)
		}
		return timers
	})
	line := spikeLine(t, diagnosis, "at 0s-1s into the capture")
	assert.Contains(t, line, "long tasks", line)
	assert.Contains(t, line, "WithExecutor")
	assert.NotContains(t, line, "waiting for a CPU")
	assert.Contains(t, strings.Join(diagnosis, "\n"), "points to long tasks")
}
