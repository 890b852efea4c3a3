package shardwheel_test

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
	"github.com/shardwheel/shardwheel/stats"
)

// newScheduler returns a scheduler stopped at the end of the test.
func newScheduler(t testing.TB, opts ...shardwheel.Option) *shardwheel.Scheduler {
	t.Helper()
	s, err := shardwheel.New(opts...)
	require.NoError(t, err)
	t.Cleanup(func() { s.Stop() })
	return s
}

// waitFor bounds every condition a test polls for (require.Eventually):
// generous, because the race detector on a loaded 2-core machine is slow,
// and only reached when the condition is never going to hold.
const waitFor, pollEvery = 10 * time.Second, time.Millisecond

func noop() {}

// heapInUse returns the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// waitTasksReturned waits until s has no pending timer, then stops it, which
// waits for the tasks still running: Pending drops when a task starts, not
// when it returns.
func waitTasksReturned(t testing.TB, s *shardwheel.Scheduler) {
	t.Helper()
	require.Eventually(t, func() bool { return s.Pending() == 0 }, waitFor, pollEvery)
	require.Empty(t, s.Stop(), "nothing was pending")
}

// hangLimit bounds a scenario that would deadlock with a blocking
// hand-off: past it the test reports the hang, with the goroutines' stacks,
// instead of hanging CI.
const hangLimit = 60 * time.Second

// within runs f and fails the test if it has not returned within hangLimit.
// On a hang it does not wait for f (nor Stop the scheduler, which would
// hang too): the test binary reports and moves on.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(hangLimit):
		buf := make([]byte, 1<<20)
		t.Fatalf("%s hung for %v; goroutines:\n%s", what, hangLimit, buf[:runtime.Stack(buf, true)])
	}
}

// keysFor returns n keys that route to shard i of s.
func keysFor(s *shardwheel.Scheduler, i, n int) []uint64 {
	keys := make([]uint64, 0, n)
	for k := uint64(0); len(keys) < n; k++ {
		if s.ShardOf(k) == i {
			keys = append(keys, k)
		}
	}
	return keys
}

// newUnstopped returns a scheduler that the test must Stop itself: a test
// that detects a hang must not have a cleanup that hangs on it.
func newUnstopped(t *testing.T, opts ...shardwheel.Option) *shardwheel.Scheduler {
	t.Helper()
	s, err := shardwheel.New(opts...)
	require.NoError(t, err)
	return s
}

// stall keeps a blocked task's wheel with it, as past WithMaxBlockedTasks:
// for tests of what a stalled wheel does.
var stall = shardwheel.WithBlockedAfter(0)

// blockShard runs a task on s's only shard that blocks until the returned
// release is called, and waits until it runs: from then on the shard
// goroutine holds its wheel, so timers scheduled meanwhile wait in its
// queue.
func blockShard(t *testing.T, s *shardwheel.Scheduler) (release func()) {
	t.Helper()
	started, unblock := make(chan struct{}), make(chan struct{})
	_, err := s.AfterFunc(0, func() { close(started); <-unblock }, shardwheel.ByKey(0))
	require.NoError(t, err)
	select {
	case <-started:
	case <-time.After(waitFor):
		t.Fatal("blocking task never ran")
	}
	var once sync.Once
	release = func() { once.Do(func() { close(unblock) }) }
	t.Cleanup(release)
	return release
}

// withGOMAXPROCS runs f at GOMAXPROCS n.
func withGOMAXPROCS(n int, f func()) {
	prev := runtime.GOMAXPROCS(n)
	defer runtime.GOMAXPROCS(prev)
	f()
}

// forEachProcs runs f as a subtest ("procs=N") at GOMAXPROCS 1, 2, 4 and 8
// in turn, restoring GOMAXPROCS after each: one P, where every goroutine
// takes turns, up to more Ps than most test machines have cores.
func forEachProcs(t *testing.T, f func(t *testing.T, procs int)) {
	t.Helper()
	for _, procs := range []int{1, 2, 4, 8} {
		t.Run(fmt.Sprintf("procs=%d", procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			f(t, procs)
		})
	}
}

// settles polls s's totals until want holds: counters a holder keeps are
// published by the shard goroutine's next pass, which Stats wakes an idle
// goroutine for.
func settles(t *testing.T, s *shardwheel.Scheduler, what string, want func(stats.Shard) bool) {
	t.Helper()
	if !assert.Eventually(t, func() bool { return want(s.Stats().Total) }, waitFor, pollEvery) {
		st := s.Stats().Total
		t.Fatalf("%s: never so; now taken back %d, held %d, cancelled %d, resident %d", what, st.TakenBack, st.HeldCancelled, st.Cancelled, st.Resident)
	}
}

// cheapGoroutineToken reports whether a run handed to an executor
// records its goroutine without allocating here: on amd64, arm64 and 386
// with the gc compiler, as WithExecutor promises.
var cheapGoroutineToken = runtime.Compiler == "gc" && slices.Contains([]string{"amd64", "arm64", "386"}, runtime.GOARCH)

// maxInitialCapacity is WithInitialCapacity's bound, as its doc states it.
const maxInitialCapacity = 1 << 22

// indexLen returns the number of entries of ix, stale ones included, when
// its maps agree (no routed entry names a timer without an entry, and
// Len's counts match the entries), and -1 when they do not: a test that
// polls for a count keeps polling while they disagree.
func indexLen[K comparable](ix *shardwheel.Index[K]) int {
	entries, _, strays, mismatch := shardwheel.IndexEntries(ix)
	if strays != 0 || mismatch {
		return -1
	}
	return entries
}
