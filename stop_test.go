package shardwheel_test

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/shardwheel/shardwheel"
)

func TestStopReturnsExactlyTheUnfinishedTimers(t *testing.T) {
	s, err := shardwheel.New(shardwheel.WithShards(4))
	require.NoError(t, err)
	want := map[uint64]bool{}
	for i := range uint64(1000) {
		tm, err := s.AfterFunc(time.Hour, func() { t.Error("ran") }, shardwheel.ByKey(i))
		require.NoError(t, err)
		if i%3 == 0 {
			require.True(t, tm.Cancel())
		} else {
			want[i] = true
		}
	}
	assert.Equal(t, len(want), s.Pending())
	got := s.Stop()
	require.Len(t, got, len(want))
	for _, tm := range got {
		assert.True(t, want[tm.Key()], "key %d returned but not pending", tm.Key())
		delete(want, tm.Key())
		assert.False(t, tm.Pending())
		assert.False(t, tm.Cancel(), "Stop already accounted for it")
		assert.False(t, tm.Reset(time.Second))
	}
	assert.Empty(t, want)
	assert.Zero(t, s.Pending())
	assert.Nil(t, s.Stop(), "second Stop returns nothing")
}

func TestStopFromTask(t *testing.T) {
	for _, shards := range []int{1, 3} {
		s, err := shardwheel.New(shardwheel.WithShards(shards), shardwheel.WithTick(time.Millisecond))
		require.NoError(t, err)
		for i := range uint64(10) {
			_, err := s.AfterFunc(time.Hour, func() {}, shardwheel.ByKey(i))
			require.NoError(t, err)
		}
		returned := make(chan []shardwheel.Timer, 1)
		_, err = s.AfterFunc(0, func() { returned <- s.Stop() }, shardwheel.ByKey(100))
		require.NoError(t, err)
		select {
		case got := <-returned:
			assert.Len(t, got, 10)
		case <-time.After(waitFor):
			t.Fatal("Stop from a task deadlocked")
		}
		assert.Nil(t, s.Stop())
		assert.Zero(t, s.Pending())
	}
}

func TestConcurrentStopCallsWaitForTheFirst(t *testing.T) {
	s, err := shardwheel.New(shardwheel.WithShards(2))
	require.NoError(t, err)
	for i := range uint64(100) {
		_, err := s.AfterFunc(time.Hour, func() {}, shardwheel.ByKey(i))
		require.NoError(t, err)
	}
	var wg sync.WaitGroup
	var total atomic.Int64
	for range 8 {
		wg.Go(func() {
			total.Add(int64(len(s.Stop())))
			// Whichever Stop returns, the first has drained every shard.
			assert.Zero(t, s.Pending(), "a Stop returned before the timers were drained")
			_, err := s.AfterFunc(time.Hour, func() {}, shardwheel.ByKey(1))
			assert.ErrorIs(t, err, shardwheel.ErrStopped)
		})
	}
	wg.Wait()
	assert.EqualValues(t, 100, total.Load(), "exactly one Stop returns the timers")
}

func TestNoGoroutineLeftAfterStop(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for _, affinity := range []bool{false, true} {
		s, err := shardwheel.New(shardwheel.WithShards(4), shardwheel.WithAffinity(affinity), shardwheel.WithTick(time.Millisecond))
		require.NoError(t, err)
		var ran atomic.Int64
		for i := range uint64(1000) {
			_, err := s.AfterFunc(time.Duration(i%3)*time.Millisecond, func() { ran.Add(1) }, shardwheel.ByKey(i))
			require.NoError(t, err)
		}
		s.Stop()
	}
}

// TestScheduleRacingStop has producers schedule as fast as they can while
// Stop runs: each call either fails with ErrStopped or returns a timer that
// then ran or was returned by Stop. Nothing is lost.
func TestScheduleRacingStop(t *testing.T) {
	for round := range 20 {
		s := newScheduler(t, shardwheel.WithShards(3), shardwheel.WithTick(time.Millisecond), shardwheel.WithInitialCapacity(16))
		var mu sync.Mutex
		accepted := map[shardwheel.Timer]*atomic.Int32{}
		var count atomic.Int64
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := 0; ; i++ {
					runs := new(atomic.Int32)
					tm, err := s.AfterFunc(time.Duration(i%3)*time.Millisecond, func() { runs.Add(1) }, shardwheel.ByKey(uint64(w<<20|i)))
					if err != nil {
						assert.ErrorIs(t, err, shardwheel.ErrStopped)
						return
					}
					mu.Lock()
					accepted[tm] = runs
					mu.Unlock()
					count.Add(1)
				}
			})
		}
		// Stop while the producers are in full flow, at a different point
		// in each round.
		require.Eventually(t, func() bool { return count.Load() >= int64(1+round*50) }, waitFor, pollEvery)
		stopped := s.Stop()
		wg.Wait()
		inStop := map[shardwheel.Timer]bool{}
		for _, tm := range stopped {
			inStop[tm] = true
		}
		require.Len(t, inStop, len(stopped), "round %d: Stop returned a timer twice", round)
		for tm, runs := range accepted {
			got := runs.Load()
			if inStop[tm] {
				got++
			}
			require.EqualValues(t, 1, got, "round %d: a timer ran %d times and was returned by Stop: %v", round, runs.Load(), inStop[tm])
		}
		require.Zero(t, s.Pending())
	}
}

// TestStopUnderFullLoad stops a scheduler whose producers outrun it, so
// that its transfer cap is hit every tick: every accepted timer is
// accounted for.
func TestStopUnderFullLoad(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(2), shardwheel.WithTick(time.Millisecond),
		shardwheel.WithInitialCapacity(8), shardwheel.WithTransferCap(10))
	f := flood(t, s, math.MaxInt, func(int) time.Duration { return 0 })
	require.Eventually(t, func() bool { return s.Stats().Total.CapHits > 3 }, waitFor, pollEvery)
	stopped := s.Stop()
	f.wg.Wait()
	assert.Equal(t, f.accepted.Load(), f.ran.Load()+int64(len(stopped)))
}

// flooding is four producers scheduling into one scheduler as fast as
// they can, counting what was accepted and what ran.
type flooding struct {
	ran, accepted atomic.Int64
	wg            sync.WaitGroup
}

// flood starts four producers that each schedule up to n timers into s,
// the i-th with delay(i), until Schedule fails with ErrStopped.
func flood(t *testing.T, s *shardwheel.Scheduler, n int, delay func(i int) time.Duration) *flooding {
	f := &flooding{}
	for w := range 4 {
		f.wg.Go(func() {
			for i := range n {
				if _, err := s.AfterFunc(delay(i), func() { f.ran.Add(1) }, shardwheel.ByKey(uint64(w<<20|i))); err != nil {
					assert.ErrorIs(t, err, shardwheel.ErrStopped)
					return
				}
				f.accepted.Add(1)
			}
		})
	}
	return f
}

// TestShutdownUnderFullLoad is TestStopUnderFullLoad with a Shutdown that
// gives up at once: it drains shards whose workers are mid-pass as soon as
// they are quiet, and still accounts for every timer, under -race too.
func TestShutdownUnderFullLoad(t *testing.T) {
	rounds, perWorker := 10, 50_000 // bounded: an unbounded flood makes Drain's scan long
	if raceEnabled {
		rounds, perWorker = 5, 10_000
	}
	for round := range rounds {
		s := newScheduler(t, shardwheel.WithShards(2), shardwheel.WithTick(time.Millisecond),
			shardwheel.WithInitialCapacity(8), shardwheel.WithTransferCap(10))
		f := flood(t, s, perWorker, func(i int) time.Duration { return time.Duration(i%2) * time.Millisecond })
		require.Eventually(t, func() bool { return f.ran.Load() > int64(100*round) }, waitFor, pollEvery)
		done, cancel := context.WithCancel(context.Background())
		cancel()
		stopped, _ := s.Shutdown(done)
		f.wg.Wait()
		s.Stop() // every shard goroutine has returned: no task runs after this
		assert.Equal(t, f.accepted.Load(), f.ran.Load()+int64(len(stopped)), "round %d", round)
		for _, tm := range stopped {
			require.NotNil(t, tm.Task())
		}
	}
}

// TestSecondStopWaitsForTheFirst: a task calls Stop and then cleans up; an
// outside Stop must not return before that task and its shard are done.
func TestSecondStopWaitsForTheFirst(t *testing.T) {
	s := newUnstopped(t, shardwheel.WithShards(2))
	var cleanedUp atomic.Bool
	inStop := make(chan struct{})
	_, err := s.AfterFunc(0, func() {
		s.Stop()
		close(inStop)
		// Clean-up work after Stop, long enough that a Stop that does
		// not wait for it would be caught.
		time.Sleep(200 * time.Millisecond)
		cleanedUp.Store(true)
	})
	require.NoError(t, err)
	<-inStop
	within(t, "the second Stop", func() {
		assert.Nil(t, s.Stop())
	})
	assert.True(t, cleanedUp.Load(), "Stop returned while a task that called Stop still ran")
}

// TestStopFromTwoTasksDoesNotDeadlock: tasks on two shards call Stop at the
// same time; each waits for the other shard, so the later one must not
// wait for the first.
func TestStopFromTwoTasksDoesNotDeadlock(t *testing.T) {
	s := newUnstopped(t, shardwheel.WithShards(2))
	var both sync.WaitGroup
	both.Add(2)
	var returned atomic.Int64
	for i := range 2 {
		_, err := s.AfterFunc(0, func() {
			both.Done()
			both.Wait()
			s.Stop()
			returned.Add(1)
		}, shardwheel.ByKey(keysFor(s, i, 1)[0]))
		require.NoError(t, err)
	}
	within(t, "Stop from two tasks", func() {
		for returned.Load() < 2 {
			time.Sleep(pollEvery)
		}
		s.Stop()
	})
}

// TestStopGivesBackTasks: Task returns the task of each timer Stop
// returned, and nil for every other timer.
func TestStopGivesBackTasks(t *testing.T) {
	s, err := shardwheel.New(shardwheel.WithShards(3), shardwheel.WithTick(time.Millisecond))
	require.NoError(t, err)
	var handed sync.Map // key -> true once its task was called
	pending := map[uint64]bool{}
	var ended []shardwheel.Timer
	var fired atomic.Int64
	for i := range uint64(300) {
		task := func() { handed.Store(i, true) }
		switch i % 3 {
		case 0:
			tm, err := s.AfterFunc(time.Hour, task, shardwheel.ByKey(i))
			require.NoError(t, err)
			assert.Nil(t, tm.Task(), "a pending timer's task is not given back")
			pending[i] = true
		case 1:
			tm, err := s.AfterFunc(time.Hour, task, shardwheel.ByKey(i))
			require.NoError(t, err)
			require.True(t, tm.Cancel())
			ended = append(ended, tm)
		case 2:
			tm, err := s.AfterFunc(0, func() { fired.Add(1) }, shardwheel.ByKey(i))
			require.NoError(t, err)
			ended = append(ended, tm)
		}
	}
	require.Eventually(t, func() bool { return fired.Load() == 100 }, waitFor, pollEvery)
	got := s.Stop()
	require.Len(t, got, len(pending))
	for _, tm := range got {
		require.True(t, pending[tm.Key()])
		task := tm.Task()
		require.NotNil(t, task, "key %d", tm.Key())
		task()
		_, ok := handed.Load(tm.Key())
		assert.True(t, ok, "Task of key %d is not the task it was scheduled with", tm.Key())
		assert.False(t, tm.Pending(), "calling the task does not revive the timer")
	}
	for _, tm := range ended {
		assert.Nil(t, tm.Task(), "key %d ended before Stop", tm.Key())
	}
	assert.Nil(t, shardwheel.Timer{}.Task())
}

// hangingTask schedules, on shard i of s, a task that blocks until the
// returned release is called, and waits until it runs.
func hangingTask(t *testing.T, s *shardwheel.Scheduler, i int) (release func()) {
	t.Helper()
	running, unblock := make(chan struct{}), make(chan struct{})
	_, err := s.AfterFunc(0, func() {
		close(running)
		<-unblock
	}, shardwheel.ByKey(keysFor(s, i, 1)[0]))
	require.NoError(t, err)
	waitClosed(t, running)
	return sync.OnceFunc(func() { close(unblock) })
}

// TestShutdownReturnsWhenATaskHangs: a task that never returns makes Stop
// wait forever; Shutdown returns ctx's error instead, having still claimed
// and returned every pending timer, the hung shard's included.
func TestShutdownReturnsWhenATaskHangs(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	s := newUnstopped(t, shardwheel.WithShards(2), shardwheel.WithTick(time.Millisecond))
	release := hangingTask(t, s, 0)
	defer release()
	want := map[uint64]bool{}
	for i := range 2 {
		for _, k := range keysFor(s, i, 51)[1:] { // [0] is the hanging task's
			_, err := s.AfterFunc(time.Hour, func() { t.Error("ran") }, shardwheel.ByKey(k))
			require.NoError(t, err)
			want[k] = true
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	var got []shardwheel.Timer
	var err error
	within(t, "Shutdown", func() {
		got, err = s.Shutdown(ctx)
	})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Len(t, got, len(want))
	for _, tm := range got {
		assert.True(t, want[tm.Key()])
		assert.NotNil(t, tm.Task())
	}
	assert.Zero(t, s.Pending())
	_, err = s.AfterFunc(time.Hour, noop, shardwheel.ByKey(1))
	assert.ErrorIs(t, err, shardwheel.ErrStopped)

	// A later call waits for the hung shard, within its own ctx.
	short, cancelShort := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancelShort()
	again, err := s.Shutdown(short)
	assert.Nil(t, again)
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	release()
	within(t, "Stop after the task returned", func() { assert.Nil(t, s.Stop()) })
}

// TestShutdownWaitsForABlockedExecutor: an executor blocked in its run call
// counts as a task that hangs.
func TestShutdownWaitsForABlockedExecutor(t *testing.T) {
	unblock := make(chan struct{})
	running := make(chan struct{}, 1)
	s := newUnstopped(t, shardwheel.WithShards(1), shardwheel.WithExecutor(func(task func()) {
		running <- struct{}{}
		<-unblock
		task()
	}))
	_, err := s.AfterFunc(0, noop)
	require.NoError(t, err)
	<-running
	_, err = s.AfterFunc(time.Hour, noop, shardwheel.ByKey(3))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	got, err := s.Shutdown(ctx)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Len(t, got, 1)
	close(unblock)
	within(t, "Stop", func() { s.Stop() })
}

// TestShutdownWithoutHangIsStop: when every shard goroutine returns in
// time, Shutdown returns nil, and the timers.
func TestShutdownWithoutHangIsStop(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	s, err := shardwheel.New(shardwheel.WithShards(3))
	require.NoError(t, err)
	for i := range uint64(30) {
		_, err := s.AfterFunc(time.Hour, noop, shardwheel.ByKey(i))
		require.NoError(t, err)
	}
	got, err := s.Shutdown(context.Background())
	assert.NoError(t, err)
	assert.Len(t, got, 30)
	got, err = s.Shutdown(context.Background())
	assert.NoError(t, err)
	assert.Nil(t, got)
}

// TestShutdownWithADoneContextSaysWhetherAnythingRuns: Shutdown's error
// tells "nothing was lost" from "gave up". With a ctx done before the
// call, a scheduler whose tasks have all returned (idle, or after many
// ran) returns its timers and nil, the first call and a later one alike;
// one with a task still running returns its timers and ctx.Err().
func TestShutdownWithADoneContextSaysWhetherAnythingRuns(t *testing.T) {
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for _, ran := range []int{0, 1000} {
		t.Run(fmt.Sprintf("%d tasks ran before", ran), func(t *testing.T) {
			// One P: the runners that ran the tasks are still parked, or
			// on their way out, when Shutdown looks.
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			s := newUnstopped(t, shardwheel.WithShards(3))
			var fired atomic.Int64
			for i := range ran {
				_, err := s.AfterFunc(0, func() { fired.Add(1) }, shardwheel.ByKey(uint64(i)))
				require.NoError(t, err)
			}
			require.Eventually(t, func() bool { return fired.Load() == int64(ran) }, waitFor, pollEvery)
			for i := range uint64(30) {
				_, err := s.AfterFunc(time.Hour, noop, shardwheel.ByKey(i))
				require.NoError(t, err)
			}
			got, err := s.Shutdown(done)
			assert.NoError(t, err, "no task was running: nothing was given up")
			assert.Len(t, got, 30)
			got, err = s.Shutdown(done)
			assert.NoError(t, err)
			assert.Nil(t, got)
		})
	}
	t.Run("a task still running", func(t *testing.T) {
		s := newUnstopped(t, shardwheel.WithShards(2))
		release := hangingTask(t, s, 0)
		_, err := s.AfterFunc(time.Hour, noop)
		require.NoError(t, err)
		got, err := s.Shutdown(done)
		assert.ErrorIs(t, err, context.Canceled, "a task runs: Shutdown gave up waiting")
		assert.Len(t, got, 1)
		_, err = s.Shutdown(done)
		assert.ErrorIs(t, err, context.Canceled, "a later call too, while it runs")
		release()
		within(t, "Stop", func() { s.Stop() })
		_, err = s.Shutdown(done)
		assert.NoError(t, err, "once it has returned")
	})
}

// TestTaskIsNilUnlessStopReturnedTheTimer: Task is nil for a pending,
// cancelled, fired or replaced timer and for the zero Timer, and gives
// back the task of each timer Stop returned (plain and keyed), whose
// handles are then inert.
func TestTaskIsNilUnlessStopReturnedTheTimer(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(2))
	ix := shardwheel.NewIndex[uint64](s)
	pending, err := s.AfterFunc(time.Hour, noop, shardwheel.ByKey(1))
	require.NoError(t, err)
	assert.Nil(t, pending.Task())
	cancelled, err := s.AfterFunc(time.Hour, noop, shardwheel.ByKey(2))
	require.NoError(t, err)
	require.True(t, cancelled.Cancel())
	ran := make(chan struct{})
	fired, err := s.AfterFunc(0, func() { close(ran) }, shardwheel.ByKey(3))
	require.NoError(t, err)
	<-ran
	assert.Nil(t, cancelled.Task())
	assert.Nil(t, fired.Task())
	keyed, err := ix.AfterFunc(4, time.Hour, noop)
	require.NoError(t, err)
	replaced, err := ix.AfterFunc(5, time.Hour, noop)
	require.NoError(t, err)
	_, err = ix.AfterFunc(5, time.Hour, noop)
	require.NoError(t, err)

	out := s.Stop()
	assert.Len(t, out, 3)
	for _, tm := range out {
		assert.NotNil(t, tm.Task())
		assert.False(t, tm.Pending())
		assert.False(t, tm.Cancel())
		assert.False(t, tm.Reset(0))
	}
	assert.NotNil(t, pending.Task())
	assert.NotNil(t, keyed.Task())
	assert.Nil(t, cancelled.Task())
	assert.Nil(t, fired.Task())
	assert.Nil(t, replaced.Task())
	assert.Nil(t, shardwheel.Timer{}.Task())
	_, ok := ix.Lookup(4)
	assert.False(t, ok)
	assert.Zero(t, indexLen(ix))
}

// TestShutdownClaimsTheOtherTimersOfTheHungTick: Shutdown returns ctx's
// error when a task hangs, yet claims every pending timer, the hung
// shard's included; the timers fired in the hung task's tick run, on
// another runner: each timer either ran or was returned, once.
func TestShutdownClaimsTheOtherTimersOfTheHungTick(t *testing.T) {
	s := newUnstopped(t, shardwheel.WithShards(1))
	release := make(chan struct{})
	var started, runs atomic.Int32
	const n = 5
	task := func() {
		runs.Add(1)
		if started.Add(1) == 1 {
			<-release
		}
	}
	var tms []shardwheel.Timer
	for i := range n {
		tm, err := s.AfterFunc(10*time.Millisecond, task, shardwheel.ByKey(uint64(i)))
		require.NoError(t, err)
		tms = append(tms, tm)
	}
	far, err := s.AfterFunc(time.Hour, noop, shardwheel.ByKey(100))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return started.Load() == 1 }, waitFor, pollEvery)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	out, err := s.Shutdown(ctx)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	close(release)
	assert.NoError(t, func() error { _, err := s.Shutdown(context.Background()); return err }())
	assert.Nil(t, s.Stop())
	ran := int(runs.Load())
	assert.Equal(t, n+1, ran+len(out), "ran %d, returned %d: a timer was lost or ran twice", ran, len(out))
	assert.Contains(t, out, far)
	for _, tm := range tms {
		assert.False(t, tm.Pending())
	}
	_, err = s.AfterFunc(0, noop, shardwheel.ByKey(1))
	assert.ErrorIs(t, err, shardwheel.ErrStopped)
}

// TestTaskOfAHandedOverTimerIsNil schedules a context's CancelFunc as a
// plain timer's task: Stop hands it to a runtime timer instead of returning
// it, so Task reports nil for it, as for every timer Stop did not return.
func TestTaskOfAHandedOverTimerIsNil(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(1))
	_, cancel := s.WithTimeout(context.Background(), 2*time.Hour)
	defer cancel()
	tm, err := s.AfterFunc(time.Hour, cancel, shardwheel.ByKey(1))
	require.NoError(t, err)
	out := s.Stop()
	assert.NotContains(t, out, tm)
	assert.Nil(t, tm.Task(), "Task of a timer Stop did not return")
}

// TestStopLeavesAnExecutorsSeriesRunToIt: with an executor, Stop does not
// return a series whose run the executor holds (handed over, started or
// not): that run, which may start after Stop returns, is its last. A
// series between runs is returned, and its Task runs it once. Whatever
// the caller runs (the held runs, the returned tasks), no series runs
// twice from one Stop, and Stats counts both as stopped.
func TestStopLeavesAnExecutorsSeriesRunToIt(t *testing.T) {
	var mu sync.Mutex
	var held []func()
	s, err := shardwheel.New(shardwheel.WithShards(1), shardwheel.WithTick(time.Millisecond),
		shardwheel.WithExecutor(func(f func()) {
			mu.Lock()
			held = append(held, f)
			mu.Unlock()
		}))
	require.NoError(t, err)
	var inFlightRuns, idleRuns atomic.Int64
	inFlight, err := s.Every(time.Millisecond, func() { inFlightRuns.Add(1) }, shardwheel.ByKey(1), shardwheel.OnMissed(shardwheel.SkipMissed))
	require.NoError(t, err)
	idle, err := s.Every(time.Hour, func() { idleRuns.Add(1) }, shardwheel.ByKey(2), shardwheel.OnMissed(shardwheel.SkipMissed))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(held) == 1
	}, waitFor, pollEvery, "the executor holds the first run")
	got := s.Stop()
	assert.Equal(t, []shardwheel.Timer{idle}, got, "only the series between runs")
	assert.False(t, inFlight.Pending())
	assert.Nil(t, inFlight.Task())
	mu.Lock()
	for _, f := range held {
		f() // the run the executor held still runs: the series' last
	}
	mu.Unlock()
	for _, tm := range got {
		tm.Task()()
	}
	assert.EqualValues(t, 1, inFlightRuns.Load(), "the held run, and nothing else")
	assert.EqualValues(t, 1, idleRuns.Load(), "the returned task")
	assert.False(t, inFlight.Cancel())
	st := s.Stats().Total
	assert.EqualValues(t, 2, st.Stopped)
	assert.EqualValues(t, 2, st.Scheduled)
	assert.Zero(t, s.Pending())
}

// A series whose run is handed out when Stop claims it (queued behind a
// blocked task here) is not returned, and that run, its last, runs before
// Stop returns: the series ends exactly one way.
func TestStopLetsAHandedSeriesRunItsLastRun(t *testing.T) {
	s, err := shardwheel.New(shardwheel.WithShards(1), shardwheel.WithTick(time.Millisecond),
		shardwheel.WithBlockedAfter(0))
	require.NoError(t, err)
	release := make(chan struct{})
	blocking := make(chan struct{})
	_, err = s.AfterFunc(0, func() { close(blocking); <-release })
	require.NoError(t, err)
	<-blocking
	var runs atomic.Int32
	series, err := s.Every(time.Millisecond, func() { runs.Add(1) })
	require.NoError(t, err)
	require.Eventually(t, func() bool { return s.Stats().Total.PeriodicRuns >= 1 }, waitFor, pollEvery,
		"the series' run is handed to the runner, behind the blocked task")
	stopped := make(chan []shardwheel.Timer)
	go func() { stopped <- s.Stop() }()
	time.Sleep(10 * time.Millisecond) // Stop claims the series meanwhile, if it can; the test holds either way
	close(release)
	left := <-stopped
	assert.NotContains(t, left, series, "a series whose run was handed out is not returned")
	assert.Equal(t, int32(1), runs.Load(), "its handed run is its last, and runs")
	assert.False(t, series.Pending())
}
