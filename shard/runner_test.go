package shard

import (
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// order records, from whatever goroutine runs them, the tasks that ran.
type order struct {
	mu  sync.Mutex
	ran []string
}

func (o *order) task(name string) func() {
	return func() {
		o.mu.Lock()
		o.ran = append(o.ran, name)
		o.mu.Unlock()
	}
}

func (o *order) get() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.ran)
}

// schedKeyed schedules f with key (a routed timer: its runs are ordered by
// key) due delay from now.
func schedKeyed(t testing.TB, sh *Shard, key uint64, delay time.Duration, f func()) Ref {
	t.Helper()
	r, rej := sh.Schedule(&Request{Key: key, Now: sh.clock.Now(), Delay: delay, Task: Task{Func: f}, Routed: true})
	require.Equal(t, Accepted, rej)
	return r
}

// eventually polls cond to a generous deadline.
func eventually(t testing.TB, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, cond, settleWithin, 50*time.Microsecond, msg)
}

// TestTasksRunOffTheShardGoroutine: the goroutine that makes the passes
// (here the test) never runs a task; the runner does, and is known as the
// shard's (IsShardGoroutine), which the pass's goroutine is not.
func TestTasksRunOffTheShardGoroutine(t *testing.T) {
	h := newHarness(t)
	me := GoroutineID()
	var ranOn atomic.Uint64
	_, rej := sched(h.sh, 1, testTick, func() { ranOn.Store(GoroutineID()) })
	require.Equal(t, Accepted, rej)
	h.step(2 * testTick)
	require.NotZero(t, ranOn.Load(), "the task ran")
	assert.NotEqual(t, me, ranOn.Load(), "not on the goroutine that passed")
	assert.True(t, h.sh.IsShardGoroutine(ranOn.Load()))
	assert.False(t, h.sh.IsShardGoroutine(me))
}

// TestPanicAndGoexitEndARunNotTheRunner: a task that panics, and one that
// calls runtime.Goexit, are reported (OnPanic, Panics) and the tasks
// handed after them in the same list run all the same, in order.
func TestPanicAndGoexitEndARunNotTheRunner(t *testing.T) {
	var mu sync.Mutex
	var reported []any
	h := newHarness(t, func(c *Config) {
		c.OnPanic = func(v any) { mu.Lock(); reported = append(reported, v); mu.Unlock() }
	})
	var o order
	for i, f := range []func(){o.task("a"), func() { panic("boom") }, o.task("b"), runtime.Goexit, o.task("c")} {
		schedKeyed(t, h.sh, 1, testTick, f)
		_ = i
	}
	h.step(2 * testTick)
	assert.Equal(t, []string{"a", "b", "c"}, o.get())
	mu.Lock()
	assert.Equal(t, []any{"boom", ErrGoexit}, reported)
	mu.Unlock()
	h.pass() // counts the aborts
	assert.Equal(t, uint64(2), h.sh.Stats().Panics)
}

// blockKey schedules a task of key that blocks until the returned release
// is closed, due a tick on; the caller schedules what waits behind it.
func blockKey(t *testing.T, h *harness, key uint64) (release, started chan struct{}) {
	t.Helper()
	release, started = make(chan struct{}), make(chan struct{})
	schedKeyed(t, h.sh, key, testTick, func() { close(started); <-release })
	return release, started
}

// passTicks moves the clock n ticks, a pass after each, without waiting
// for the runner (its task blocks).
func (h *harness) passTicks(n int) {
	for range n {
		h.clock.Advance(testTick)
		h.passAsync()
	}
}

// blockedHarness is a harness whose shard leaves a runner behind a task
// that has held up the runs behind it for two ticks.
func blockedHarness(t *testing.T) *harness {
	return newHarness(t, func(c *Config) {
		c.BlockedAfter = 2 * testTick
		c.MaxBlocked = 4
	})
}

// TestABlockedTaskLeavesItsRunner: a task of key 7 blocks; once it has
// held up the runs behind it for BlockedAfter, the other keys' runs (and a
// timer without a key) run on a new runner, while key 7's stay behind the
// blocked one, and its timers that come due meanwhile are held, pending.
// When the task returns, key 7's runs follow in deadline order, Stats
// listing the task exactly while it runs.
func TestABlockedTaskLeavesItsRunner(t *testing.T) {
	h := blockedHarness(t)
	var o order
	release, started := make(chan struct{}), make(chan struct{})
	schedKeyed(t, h.sh, 7, testTick, func() { close(started); <-release; o.task("7a")() })
	schedKeyed(t, h.sh, 7, testTick, o.task("7b"))
	schedKeyed(t, h.sh, 8, testTick, o.task("8"))
	_, rej := sched(h.sh, 9, testTick, o.task("plain"))
	require.Equal(t, Accepted, rej)
	late := schedKeyed(t, h.sh, 7, 6*testTick, o.task("7-late"))
	later := schedKeyed(t, h.sh, 7, 7*testTick, o.task("7-later"))

	h.passTicks(1)
	<-started
	h.passTicks(3)      // looks a tick apart: the runner is left at the third
	settleRuns(t, h.sh) // the new runner
	assert.Equal(t, []string{"8", "plain"}, o.get(), "the other runs went on")
	st := h.sh.Stats()
	assert.Equal(t, uint64(1), st.BlockedRuns)
	require.Len(t, st.Blocked, 1)
	assert.Equal(t, uint64(7), st.Blocked[0].Key)
	assert.True(t, st.Blocked[0].Keyed)
	assert.Contains(t, st.Blocked[0].Func, "TestABlockedTaskLeavesItsRunner")

	h.step(3 * testTick) // key 7's later timers come due (ticks 6, 7): held
	assert.True(t, h.sh.Pending(late), "held, pending")
	assert.True(t, h.sh.Pending(later))
	// Reset the first held timer to a deadline after the second's, which
	// has passed when the key is let go: it runs after it.
	require.True(t, h.sh.Reset(late, 0, testTick))
	assert.Equal(t, []string{"8", "plain"}, o.get())

	close(release)
	eventually(t, func() bool { return len(h.sh.Stats().Blocked) == 0 }, "Blocked lists the task until it returns")
	eventually(t, func() bool { return h.sh.returned.Load() != nil }, "the runner hands itself back")
	h.clock.Advance(testTick)
	h.pass()
	assert.Equal(t, []string{"8", "plain", "7a", "7b", "7-later", "7-late"}, o.get())
	st = h.sh.Stats()
	assert.Empty(t, st.Blocked)
	assert.Equal(t, uint64(7), st.Longest.Key)
	assert.Positive(t, st.Longest.Ran)
	assert.Zero(t, h.sh.cfg.Blocked.Load(), "the bound's count is back")
}

// TestOnlyATaskHoldsUpItsRunner: watchRunner starts timing a runner only
// while runs wait behind a task it claimed; a runner parked, woken and not
// yet on a CPU, never started, or with nothing behind its task is no task's
// fault, and is never left for it.
func TestOnlyATaskHoldsUpItsRunner(t *testing.T) {
	for _, tc := range []struct {
		name   string
		word   uint64
		timing bool
	}{
		{"a task runs, runs behind it", 3 << runShift, true},
		{"parked", 3<<runShift | runIdle, false},
		{"woken, waiting for a CPU", 3<<runShift | runWoken, false},
		{"never started", 0, false},
		{"nothing behind its task", 9 << runShift, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := blockedHarness(t)
			sh := h.sh
			r := &runner{sh: sh, handed: 9}
			r.word.Store(tc.word)
			sh.runner = r
			defer func() { sh.runner = nil }()
			now := h.clock.Now()
			sh.watchRunner(now)
			assert.Equal(t, tc.timing, r.looked)
			// Runs waiting, timed or not, keep a look planned: a runner
			// that starts later tells nobody, and its task may block.
			at, ok := sh.runnerWake()
			assert.Equal(t, tc.word>>runShift < r.handed, ok, "a look planned")
			if ok {
				assert.Equal(t, sh.ceilTick(now+sh.cfg.BlockedAfter), at)
			}
			if tc.timing {
				return // TestABlockedTaskLeavesItsRunner goes on from here
			}
			sh.watchRunner(now + 4*sh.cfg.BlockedAfter)
			assert.Same(t, r, sh.runner, "not left")
			assert.Zero(t, r.word.Load()&runLeft)
			assert.Zero(t, sh.Stats().BlockedRuns)
		})
	}
}

// TestAHeldTimerCanBeCancelled: a timer held behind its key's blocked task
// is still pending: a Cancel ends it (true), and it never runs.
func TestAHeldTimerCanBeCancelled(t *testing.T) {
	h := blockedHarness(t)
	var o order
	release, started := blockKey(t, h, 7)
	schedKeyed(t, h.sh, 7, testTick, o.task("7b")) // waits behind it: a look leaves the runner
	held := schedKeyed(t, h.sh, 7, 5*testTick, o.task("held"))
	h.passTicks(1)
	<-started
	h.passTicks(6)
	require.Equal(t, uint64(1), h.sh.Stats().BlockedRuns)
	require.True(t, h.sh.Pending(held))
	require.True(t, h.sh.Cancel(held))
	close(release)
	eventually(t, func() bool { return h.sh.returned.Load() != nil }, "the runner hands itself back")
	h.step(2 * testTick)
	assert.Equal(t, []string{"7b"}, o.get())
	assert.Zero(t, h.pending())
}

// TestLeavingIsBounded: with MaxBlocked runners left, the next look is
// refused (BlockedRefused, OnRefused) and the runs wait behind the task.
func TestLeavingIsBounded(t *testing.T) {
	var refused atomic.Int32
	h := newHarness(t, func(c *Config) {
		c.BlockedAfter = 2 * testTick
		c.MaxBlocked = 1
		c.OnRefused = func() { refused.Add(1) }
	})
	var o order
	release := make(chan struct{})
	started := make(chan struct{}, 2)
	block := func() { started <- struct{}{}; <-release }
	schedKeyed(t, h.sh, 1, testTick, block)
	schedKeyed(t, h.sh, 2, testTick, block)
	schedKeyed(t, h.sh, 3, testTick, o.task("3"))
	h.passTicks(1)
	<-started
	h.passTicks(3)
	<-started // key 2's task, on the second runner, blocks too
	for range 4 {
		h.clock.Advance(testTick)
		h.passAsync()
	}
	st := h.sh.Stats()
	assert.Equal(t, uint64(1), st.BlockedRuns)
	assert.Positive(t, st.BlockedRefused)
	assert.Positive(t, refused.Load())
	assert.Empty(t, o.get(), "key 3 waits behind key 2's task")
	close(release)
	eventually(t, func() bool { return len(o.get()) == 1 }, "key 3 runs once the task returns")
}

// TestCloseDoesNotWaitForTasks: the shard goroutine returns within a pass
// of Close while a task blocks (Stopped), Exited waits for the task, and
// the runs handed before Close run, in order, once it returns.
func TestCloseDoesNotWaitForTasks(t *testing.T) {
	clock := &ManualClock{}
	sh, err := New(Config{Tick: testTick, WheelSize: 64, TransferCap: 1 << 10, FirstBlock: 64, Clock: clock, Lanes: 1, Tokens: 1 << 40, OnPanic: func(any) {}})
	require.NoError(t, err)
	var o order
	release, started := make(chan struct{}), make(chan struct{})
	schedKeyed(t, sh, 1, testTick, func() { close(started); <-release })
	schedKeyed(t, sh, 1, testTick, o.task("after"))
	sh.Start()
	clock.Advance(testTick)
	<-started
	sh.Close()
	select {
	case <-sh.Stopped():
	case <-time.After(settleWithin):
		t.Fatal("the shard goroutine waited for a task")
	}
	select {
	case <-sh.Exited():
		t.Fatal("Exited before the task returned")
	default:
	}
	close(release)
	<-sh.Exited()
	assert.Equal(t, []string{"after"}, o.get())
}

// TestARunnersBacklogIsBounded: behind a blocked task (WithBlockedAfter
// 0), the shard hands the runner runBacklog runs and leaves the other due
// timers pending in the wheel, which costs a pass O(1) for them, and it
// looks again a tick later, not at once; once the task returns, every
// timer runs, once.
func TestARunnersBacklogIsBounded(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.FirstBlock = 1 << 17 })
	release, started := make(chan struct{}), make(chan struct{})
	_, rej := sched(h.sh, 0, testTick, func() { close(started); <-release })
	require.Equal(t, Accepted, rej)
	h.clock.Advance(testTick)
	h.passAsync()
	<-started
	const n = runBacklog + 5000
	var ran atomic.Int64
	for i := range n {
		_, rej := sched(h.sh, uint64(i), testTick, func() { ran.Add(1) })
		require.Equal(t, Accepted, rej)
	}
	for range 3 {
		h.clock.Advance(testTick)
		h.passAsync()
	}
	r := h.sh.runner
	assert.Equal(t, uint64(runBacklog+1), r.handed, "the blocked run and runBacklog behind it")
	assert.EqualValues(t, n-runBacklog, h.sh.Live(), "the rest pending")
	next, _, timed := h.sh.planHeld()
	assert.True(t, timed)
	assert.Greater(t, h.sh.tickTime(next), h.clock.Now(), "it looks again at the next tick, not at once")
	close(release)
	eventually(t, func() bool { return ran.Load() == runBacklog }, "the backlog runs")
	h.step(2 * testTick)
	assert.EqualValues(t, n, ran.Load())
	assert.Zero(t, h.pending())
}

// TestNilPanicIsReportedUnderPanicnil: where GODEBUG=panicnil=1 makes
// recover return nil for panic(nil), a task that panics with nil is still
// reported, as a *runtime.PanicNilError, and counted, and not taken for a
// Goexit: the runner's goroutine stays the same. The test runs itself
// again with that setting.
func TestNilPanicIsReportedUnderPanicnil(t *testing.T) {
	if os.Getenv("SHARDWHEEL_PANICNIL_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestNilPanicIsReportedUnderPanicnil$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "SHARDWHEEL_PANICNIL_CHILD=1", "GODEBUG=panicnil=1")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Contains(t, string(out), "--- PASS: TestNilPanicIsReportedUnderPanicnil")
		return
	}
	var mu sync.Mutex
	var reported []any
	h := newHarness(t, func(c *Config) {
		c.OnPanic = func(v any) { mu.Lock(); reported = append(reported, v); mu.Unlock() }
	})
	var gids [2]atomic.Uint64
	_, rej := sched(h.sh, 1, testTick, func() { gids[0].Store(GoroutineID()); panic(nil) }) //nolint:govet // the point of the test
	require.Equal(t, Accepted, rej)
	_, rej = sched(h.sh, 2, testTick, func() { gids[1].Store(GoroutineID()) })
	require.Equal(t, Accepted, rej)
	h.step(2 * testTick)
	h.pass() // counts the abort
	assert.Equal(t, uint64(1), h.sh.Stats().Panics)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, reported, 1)
	assert.IsType(t, (*runtime.PanicNilError)(nil), reported[0])
	assert.Equal(t, gids[0].Load(), gids[1].Load(), "no Goexit: the same runner goroutine")
}

// TestGoexitInAKeptRun: a run kept behind its key's blocked task that
// calls runtime.Goexit is reported, and the kept runs after it run once
// each, on the goroutine that takes the runner up.
func TestGoexitInAKeptRun(t *testing.T) {
	var reported atomic.Int32
	h := newHarness(t, func(c *Config) {
		c.BlockedAfter, c.MaxBlocked = 2*testTick, 4
		c.OnPanic = func(any) { reported.Add(1) }
	})
	var o order
	release, started := blockKey(t, h, 7)
	schedKeyed(t, h.sh, 7, testTick, runtime.Goexit)
	schedKeyed(t, h.sh, 7, testTick, o.task("after"))
	schedKeyed(t, h.sh, 8, testTick, o.task("other key"))
	h.passTicks(1)
	<-started
	h.passTicks(3)
	require.Equal(t, uint64(1), h.sh.Stats().BlockedRuns)
	// The other key runs on the new runner while key 7's task blocks.
	eventually(t, func() bool { return len(o.get()) == 1 }, "the other key's run, beside the blocked task")
	close(release)
	eventually(t, func() bool { return h.sh.returned.Load() != nil }, "the left runner hands itself back")
	assert.Equal(t, []string{"other key", "after"}, o.get())
	assert.Equal(t, int32(1), reported.Load())
}

// TestACancelledSeriesQueuedBehindATaskDoesNotRun: a series whose run is
// queued behind a blocked task (WithBlockedAfter 0) and is cancelled
// before it starts runs no more: the Cancel ends it (true) and the queued
// run finds it ended.
func TestACancelledSeriesQueuedBehindATaskDoesNotRun(t *testing.T) {
	h := newHarness(t)
	release, started := make(chan struct{}), make(chan struct{})
	_, rej := sched(h.sh, 1, testTick, func() { close(started); <-release })
	require.Equal(t, Accepted, rej)
	var runs atomic.Int32
	r, rej := schedSeries(h.sh, 2, testTick, SkipMissed, func() { runs.Add(1) })
	require.Equal(t, Accepted, rej)
	h.clock.Advance(testTick)
	h.passAsync() // both handed: the series' run behind the blocked task
	<-started
	require.True(t, h.sh.Cancel(r), "the series is live")
	close(release)
	settleRuns(t, h.sh)
	h.step(3 * testTick)
	assert.Zero(t, runs.Load(), "the queued run did not start")
	assert.Zero(t, h.pending())
}
