package profiling_test

import (
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
	"github.com/shardwheel/shardwheel/profiling"
)

// diagnosis is what Capture would write of one interval: its lines and
// the causes of its spikes, most time lost first.
type diagnosis struct {
	lines  []string
	causes [][]string
}

// spike returns the diagnosis line of the one spike, failing the test if
// there is none or more.
func (d diagnosis) spike(t *testing.T) (line string, causes []string) {
	t.Helper()
	require.Len(t, d.causes, 1, "one interval, a spike:\n%s", strings.Join(d.lines, "\n"))
	for _, l := range d.lines {
		if strings.HasPrefix(l, "spike at 0s-") {
			return l, d.causes[0]
		}
	}
	require.Fail(t, "no spike line", strings.Join(d.lines, "\n"))
	return "", nil
}

// record reads s before and after inject, once the shard goroutines have
// fired all the timers inject scheduled and the passes that ran them have
// ended, then calls done (nil: none), and returns the diagnosis Capture
// would write of that one interval.
func record(t *testing.T, s *shardwheel.Scheduler, inject func() (timers int, done func())) diagnosis {
	t.Helper()
	before := profiling.Take(s)
	n, done := inject()
	awaitFired(t, s, profiling.StatsOf(before).Total.Fired+uint64(n))
	if done != nil {
		done()
	}
	after := profiling.Take(s)
	lines, causes := profiling.Diagnose(s.Tick(), []profiling.Reading{before, after})
	return diagnosis{lines, causes}
}

// hog keeps n goroutines busy, calling work in a loop, until the
// returned stop is called, which waits for them.
func hog(n int, work func()) (stop func()) {
	var quit atomic.Bool
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for !quit.Load() {
				work()
			}
		})
	}
	return func() { quit.Store(true); wg.Wait() }
}

// A task that blocks its runner once, as a lock or I/O would, with
// WithBlockedAfter(0) (or refused): the shard goroutine is on time, the
// tasks queued behind the one that blocks are late, and every task is
// timed, so the diagnosis blames the task and gives the fix.
func TestDiagnoseBlockedTask(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, shardwheel.WithShards(1), shardwheel.WithTick(time.Millisecond), shardwheel.WithBlockedAfter(0))
	d := record(t, s, func() (int, func()) {
		for i := range 100 {
			_, err := s.AfterFunc(time.Duration(i+1)*time.Millisecond, func() {})
			require.NoError(t, err)
		}
		_, err := s.AfterFunc(5*time.Millisecond, func() { time.Sleep(150 * time.Millisecond) })
		require.NoError(t, err)
		return 101, nil
	})
	line, causes := d.spike(t)
	assert.Equal(t, "tasks", causes[0], line)
	took := durationAfter(t, line, "waiting behind a task: tasks took up to ")
	assert.GreaterOrEqual(t, took, 150*time.Millisecond, line)
	joined := strings.Join(d.lines, "\n")
	assert.Contains(t, joined, "points to waiting behind a task")
	assert.GreaterOrEqual(t, durationAfter(t, joined, "tasks ran up to "), 150*time.Millisecond, joined)
	assert.Contains(t, joined, "WithExecutor")
}

// A task that blocks with the default WithBlockedAfter: the tasks queued
// behind it go on on another runner, and the diagnosis names it (its
// function, its key, how long it has run); the other timers all ran while
// it blocked.
func TestDiagnoseBlockedTaskLeftBehind(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, shardwheel.WithShards(1), shardwheel.WithTick(time.Millisecond))
	release := make(chan struct{})
	defer close(release)
	d := record(t, s, func() (int, func()) {
		_, err := s.AfterFunc(time.Millisecond, func() { <-release }, shardwheel.ByKey(7))
		require.NoError(t, err)
		for i := range 100 {
			_, err := s.AfterFunc(time.Duration(i+2)*time.Millisecond, func() {})
			require.NoError(t, err)
		}
		require.Eventually(t, func() bool {
			b := s.Stats().Total.Blocked
			return len(b) == 1 && b[0].Running >= 20*time.Millisecond
		}, time.Minute, time.Millisecond, "the tasks behind it move on")
		return 101, nil // the other 100 ran while it blocks
	})
	joined := strings.Join(d.lines, "\n")
	// A task preempted as long on a busy host counts too: 1 or more.
	assert.Regexp(t, `blocked tasks: \d+ tasks? held up the tasks behind them past WithBlockedAfter, which went on on another runner`, joined)
	assert.Regexp(t, `1 still running, the longest \S+TestDiagnoseBlockedTaskLeftBehind\S* \(key 7\), ran \S+`, joined)
	assert.GreaterOrEqual(t, durationAfter(t, joined, "(key 7), ran "), 20*time.Millisecond, joined)
}

// durationAfter returns the duration that follows prefix in s, failing
// the test if there is none.
func durationAfter(t *testing.T, s, prefix string) time.Duration {
	t.Helper()
	_, rest, ok := strings.Cut(s, prefix)
	require.True(t, ok, "no %q in %s", prefix, s)
	word, _, _ := strings.Cut(rest, " ")
	d, err := time.ParseDuration(strings.TrimRight(word, ",:;)"))
	require.NoError(t, err, "%q after %q", word, prefix)
	return d
}

// A CPU hog: goroutines busy on every P while timers are due. The shards
// start their ticks late, though their passes are short: the runtime's
// scheduling latencies show goroutines waiting as long for a P, and the
// diagnosis says the shard goroutines waited for a CPU. Not parallel: it
// takes every CPU.
func TestDiagnoseCPUHog(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(2), shardwheel.WithTick(time.Millisecond))
	d := record(t, s, func() (int, func()) {
		const timers = 300
		for i := range timers {
			_, err := s.AfterFunc(time.Duration(i%150+1)*time.Millisecond, func() {})
			require.NoError(t, err)
		}
		// Twice as many busy goroutines as Ps until the timers have run:
		// a shard goroutine woken by its timer waits for one of them to
		// be preempted, 10ms at a time.
		return timers, hog(2*runtime.GOMAXPROCS(0), func() {})
	})
	line, causes := d.spike(t)
	// A shard goroutine woken by a busy one inherits the rest of its
	// time slice and may be preempted in a task: then tasks come second.
	assert.Equal(t, "cpu", causes[0], line)
	assert.NotContains(t, causes, "gc", line)
	assert.Contains(t, line, "waiting for a CPU: ")
	assert.Contains(t, d.lines[0], "p99.9", "the lateness finding covers the tail")
}

// node is a heap object with a pointer, for the GC to mark.
type node struct {
	next *node
	_    [2]int
}

// Garbage collection under allocation pressure: a million live objects
// to mark, GOGC at 5, and goroutines that allocate as fast as they can
// keep the GC marking while timers are due; the GC's share of the CPU and
// the goroutines' waits for a P say the GC made the shards late. Not
// parallel: it takes every CPU and sets GOGC.
func TestDiagnoseGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(5))
	var live *node
	for range 1 << 20 {
		live = &node{next: live}
	}
	s := newScheduler(t, shardwheel.WithShards(2), shardwheel.WithTick(time.Millisecond))
	d := record(t, s, func() (int, func()) {
		const timers = 600
		for i := range timers {
			_, err := s.AfterFunc(time.Duration(i%300+1)*time.Millisecond, func() {})
			require.NoError(t, err)
		}
		var sink atomic.Pointer[node]
		return timers, hog(4*runtime.GOMAXPROCS(0), func() { sink.Store(&node{}) })
	})
	runtime.KeepAlive(live)
	line, causes := d.spike(t)
	assert.Equal(t, "gc", causes[0], line)
	assert.Contains(t, line, "garbage collection: ")
	assert.Contains(t, line, "GOGC")
}

// A cascade of re-filed timers: timers with slack share one coarse slot,
// and a Reset moves each an hour later, so the pass that reaches the slot
// re-files them all, a million of them, holding the shard while the
// timers due meanwhile wait. The interval's slowest pass says what it
// did, and the diagnosis names the re-filing: first, unless the host held
// the shards up four times as long meanwhile. Not parallel: the pass must
// be long beside what the host does to the process. The race detector
// makes re-filing a timer some 60 times slower (1.4µs), past the
// generous cost the diagnosis allows a move (nodeCost), which production
// code does not reach: CI runs this test without it.
func TestDiagnoseCascade(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector slows re-filing past nodeCost: see the comment")
	}
	n := 1_000_000
	if testing.Short() {
		n = 300_000
	}
	s := newScheduler(t, shardwheel.WithShards(1), shardwheel.WithTick(time.Millisecond))
	// Windows of 3.2s from 1s on, opened within 3s of New, share the
	// tick with the most trailing zeros in them, 4096: one coarse slot
	// for all, which the Resets must reach before it comes due.
	timers := make([]shardwheel.Timer, n)
	noop := func() {}
	for i := range timers {
		var err error
		timers[i], err = s.AfterFunc(time.Second, noop, shardwheel.ByKey(uint64(i)), shardwheel.Slack(3200*time.Millisecond))
		require.NoError(t, err)
	}
	due := timers[0].Deadline()
	require.Equal(t, due, timers[n-1].Deadline(), "one coarse slot")
	for _, tm := range timers {
		require.True(t, tm.Reset(time.Hour), "reset before the slot came due")
	}
	refiled := s.Stats().Total.Refiled
	// The interval starts shortly before the slot comes due.
	time.Sleep(time.Until(due) - 20*time.Millisecond)
	d := record(t, s, func() (int, func()) {
		// Timers due while the pass re-files the others.
		for i := range 100 {
			_, err := s.AfterFunc(time.Until(due)+time.Duration(i)*time.Millisecond/2, noop)
			require.NoError(t, err)
		}
		return 100, nil
	})
	require.GreaterOrEqual(t, s.Stats().Total.Refiled-refiled, uint64(n), "the reset timers were re-filed in the interval")
	line, causes := d.spike(t)
	assert.Contains(t, causes, "cascade", line)
	assert.Contains(t, line, "a cascade: a pass")
	assert.Contains(t, line, "re-filed")
}
