package shardwheel_test

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
)

// blockOn runs a task with key on s that blocks until the returned release
// is called, and waits until it has started.
func blockOn(t *testing.T, s *shardwheel.Scheduler, key uint64) (tm shardwheel.Timer, release func()) {
	t.Helper()
	started, unblock := make(chan struct{}), make(chan struct{})
	tm, err := s.AfterFunc(0, func() { close(started); <-unblock }, shardwheel.ByKey(key))
	require.NoError(t, err)
	select {
	case <-started:
	case <-time.After(waitFor):
		t.Fatal("the blocking task never ran")
	}
	var once sync.Once
	release = func() { once.Do(func() { close(unblock) }) }
	t.Cleanup(release)
	return tm, release
}

// TestBlockedTaskLeavesOtherTimersToRun: a task on shard 1 blocks; 20
// goroutines then schedule 10 timers each, keyed to shard 1 (behind the
// task on its runner) or local (AfterFunc, filed on whichever wheel their
// P has, shard 1's among them): all 200 run while the task blocks, on
// another runner; the same when an executor runs tasks inside its run
// call, on the runner.
func TestBlockedTaskLeavesOtherTimersToRun(t *testing.T) {
	inline := shardwheel.WithExecutor(func(task func()) { task() })
	for _, tt := range []struct {
		name  string
		opts  []shardwheel.Option
		keyed bool
	}{
		{"keyed", nil, true},
		{"AfterFunc", nil, false},
		{"keyed, inline executor", []shardwheel.Option{inline}, true},
		{"AfterFunc, inline executor", []shardwheel.Option{inline}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newScheduler(t, append(tt.opts, shardwheel.WithShards(2))...)
			keys := keysFor(s, 1, 201)
			blockedKey, healthy := keys[0], keys[1:]
			_, release := blockOn(t, s, blockedKey)
			var ran atomic.Int64
			var wg sync.WaitGroup
			for g := range 20 {
				wg.Go(func() {
					for i := range 10 {
						var err error
						if tt.keyed {
							_, err = s.AfterFunc(time.Millisecond, func() { ran.Add(1) }, shardwheel.ByKey(healthy[g*10+i]))
						} else {
							_, err = s.AfterFunc(time.Millisecond, func() { ran.Add(1) })
						}
						assert.NoError(t, err)
						time.Sleep(time.Millisecond)
					}
				})
			}
			wg.Wait()
			require.Eventually(t, func() bool { return ran.Load() == 200 }, waitFor, pollEvery,
				"every timer runs while the task blocks (%d ran)", ran.Load())
			if !tt.keyed {
				return // its timers may all have been filed on shard 0
			}
			st := s.Stats().Total
			assert.Positive(t, st.BlockedRuns)
			require.Len(t, st.Blocked, 1)
			b := st.Blocked[0]
			assert.Equal(t, blockedKey, b.Key)
			assert.True(t, b.Keyed)
			assert.Contains(t, b.Func, "blockOn")
			assert.Positive(t, b.Running)
			assert.Equal(t, b, st.LongestBlocked, "the longest so far")
			release()
			require.Eventually(t, func() bool { return len(s.Stats().Total.Blocked) == 0 }, waitFor, pollEvery)
			assert.GreaterOrEqual(t, s.Stats().Total.LongestBlocked.Running, b.Running, "it ran at least as long")
		})
	}
}

// TestBlockedTaskHoldsItsKeyBack: the tasks of the blocked task's key
// wait for it, in deadline order, while the other timers run; CancelWait
// on the blocked timer waits for it to return; a timer of the key that
// comes due once the runs behind the task have moved on is held, pending,
// and can be cancelled. The key's timers are due 5ms apart (distinct
// ticks, whenever the calls run).
func TestBlockedTaskHoldsItsKeyBack(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(2))
	const key = 42
	tm, release := blockOn(t, s, key)
	var returned atomic.Bool // the blocked task has returned
	var mu sync.Mutex
	var order []int
	for i := range 3 {
		_, err := s.AfterFunc(time.Duration(3-i)*5*time.Millisecond, func() {
			assert.True(t, returned.Load(), "a task of the blocked key ran before it returned")
			mu.Lock()
			order = append(order, 3-i)
			mu.Unlock()
		}, shardwheel.ByKey(key))
		require.NoError(t, err)
	}
	other := make(chan struct{})
	_, err := s.AfterFunc(20*time.Millisecond, func() { close(other) }) // after the key's first
	require.NoError(t, err)
	waited := make(chan bool)
	go func() {
		ok, err := tm.CancelWait(context.Background())
		assert.NoError(t, err)
		assert.False(t, ok, "it was running")
		waited <- returned.Load()
	}()
	select {
	case <-other:
	case <-time.After(waitFor):
		t.Fatal("a timer of another key waited for the blocked task")
	}
	require.Eventually(t, func() bool { return s.Stats().Total.BlockedRuns > 0 }, waitFor, pollEvery)
	cancelled, err := s.AfterFunc(time.Millisecond, func() { t.Error("a cancelled held timer ran") }, shardwheel.ByKey(key))
	require.NoError(t, err)
	time.Sleep(5 * time.Millisecond) // due, and held
	require.True(t, cancelled.Cancel(), "a held timer is still pending")
	returned.Store(true)
	release()
	assert.True(t, <-waited, "CancelWait returned before the blocked task")
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(order) == 3 }, waitFor, pollEvery)
	assert.Equal(t, []int{1, 2, 3}, order, "the key's timers ran after it, in deadline order")
}

// TestShutdownFromATaskWhileAnotherBlocks: a task keyed to the healthy
// shard runs while another shard's task blocks, and its Shutdown returns
// when its context ends (Shutdown waits for the blocked task, as for any
// task, up to its context).
func TestShutdownFromATaskWhileAnotherBlocks(t *testing.T) {
	s := newUnstopped(t, shardwheel.WithShards(2))
	_, release := blockOn(t, s, keysFor(s, 1, 1)[0])
	done := make(chan error, 1)
	_, err := s.AfterFunc(time.Millisecond, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := s.Shutdown(ctx)
		done <- err
	}, shardwheel.ByKey(keysFor(s, 0, 1)[0]))
	require.NoError(t, err)
	select {
	case err := <-done:
		assert.ErrorIs(t, err, context.DeadlineExceeded, "the blocked task had not returned")
	case <-time.After(waitFor):
		t.Fatal("the task that calls Shutdown never ran, or Shutdown never returned")
	}
	release()
	within(t, "Stop after the blocked task returned", func() { assert.Empty(t, s.Stop()) })
}

// TestMaxBlockedTasksBoundsTheGoroutines: past WithMaxBlockedTasks the
// tasks behind a blocked one wait for it: Stats count the refusal, the
// logger says so once, and the goroutines stay within the shards' and
// their current runners' plus the bound; once the tasks return every
// timer runs.
func TestMaxBlockedTasksBoundsTheGoroutines(t *testing.T) {
	var log syncBuffer
	s := newScheduler(t, shardwheel.WithShards(2), shardwheel.WithMaxBlockedTasks(1),
		shardwheel.WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
	before := runtime.NumGoroutine()
	var ran atomic.Int64
	behind := func(shard int) {
		for _, k := range keysFor(s, shard, 10)[1:] {
			_, err := s.AfterFunc(time.Millisecond, func() { ran.Add(1) }, shardwheel.ByKey(k))
			require.NoError(t, err)
		}
	}
	_, release0 := blockOn(t, s, keysFor(s, 0, 1)[0])
	behind(0)
	require.Eventually(t, func() bool { return s.Stats().Total.BlockedRuns == 1 }, waitFor, pollEvery)
	_, release1 := blockOn(t, s, keysFor(s, 1, 1)[0])
	behind(1)
	require.Eventually(t, func() bool { return s.Stats().Total.BlockedRefused > 0 }, waitFor, pollEvery)
	assert.EqualValues(t, 1, s.Stats().Total.BlockedRuns, "the bound holds")
	require.Eventually(t, func() bool { return strings.Contains(log.String(), "WithMaxBlockedTasks") }, waitFor, pollEvery)
	assert.Equal(t, 1, strings.Count(log.String(), "WithMaxBlockedTasks"), "said once")
	// Two current runners and one left behind; the rest is room for the
	// runtime's.
	assert.LessOrEqual(t, runtime.NumGoroutine(), before+2+1+2, "the bound holds")
	assert.Less(t, ran.Load(), int64(18), "shard 1's tasks wait behind its blocked one")
	release1()
	release0()
	require.Eventually(t, func() bool { return ran.Load() == 18 }, waitFor, pollEvery)
}

// TestStopDuringBlockedAndPreemptedTasks stops schedulers, with Stop or a
// Shutdown whose context ends first, while tasks block (their runners left
// behind, their keys held), spin (preempted on a busy host, their runs
// moved on), schedule more timers, and GOMAXPROCS changes: Stop never
// hangs, returns once every task has returned, and every accepted timer
// ended exactly one way. Run it under the stress tag, whose yields inside
// the engine force the interleavings, and under -race.
func TestStopDuringBlockedAndPreemptedTasks(t *testing.T) {
	rounds := 20
	if testing.Short() || raceEnabled {
		rounds = 6
	}
	procs := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(procs)
	for round := range rounds {
		s := newUnstopped(t, shardwheel.WithShards(2), shardwheel.WithTick(time.Millisecond),
			shardwheel.WithMaxBlockedTasks(1+round%3))
		release := make(chan struct{})
		var fates sync.Map // *fate by id
		var next atomic.Int64
		var spinning, blocked atomic.Int64
		schedule := func(key uint64, delay time.Duration, body func()) {
			f := &fate{}
			id := next.Add(1)
			fates.Store(id, f)
			tm, err := s.AfterFunc(delay, func() { f.ran.Add(1); body() }, shardwheel.ByKey(key))
			if err != nil {
				fates.Delete(id) // refused after Stop: never accepted
				return
			}
			f.handle = tm
		}
		for i := range 60 {
			key := uint64(i % 7)
			switch i % 4 {
			case 0:
				schedule(key, time.Duration(i%5)*time.Millisecond, func() {
					blocked.Add(1)
					<-release
				})
			case 1:
				schedule(key, time.Duration(i%6)*time.Millisecond, func() {
					spinning.Add(1)
					for end := time.Now().Add(2 * time.Millisecond); time.Now().Before(end); {
					}
				})
			case 2:
				schedule(key, time.Duration(i%9)*time.Millisecond, func() {
					schedule(key+1, time.Millisecond, func() {})
				})
			default:
				schedule(key, time.Duration(i%20)*time.Millisecond, func() {})
			}
		}
		if round%2 == 1 {
			runtime.GOMAXPROCS(1 + round%3)
		}
		require.Eventually(t, func() bool { return blocked.Load() > 0 }, waitFor, pollEvery, "a task blocks")
		var stopped []shardwheel.Timer
		within(t, fmt.Sprintf("round %d: Stop", round), func() {
			if round%3 == 0 {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
				out, err := s.Shutdown(ctx)
				cancel()
				assert.ErrorIs(t, err, context.DeadlineExceeded, "tasks still blocked")
				stopped = out
				close(release)
				assert.Empty(t, s.Stop(), "a later Stop returns nothing, once the tasks have returned")
				return
			}
			go func() { time.Sleep(5 * time.Millisecond); close(release) }()
			stopped = s.Stop()
		})
		runtime.GOMAXPROCS(procs)
		for _, tm := range stopped {
			fates.Range(func(_, v any) bool {
				if f := v.(*fate); f.handle == tm {
					f.stopped.Add(1)
				}
				return true
			})
		}
		fates.Range(func(id, v any) bool {
			f := v.(*fate)
			if f.handle.Cancel() {
				f.cancelled.Add(1)
			}
			ends := f.ran.Load() + f.cancelled.Load() + f.stopped.Load()
			assert.EqualValues(t, 1, ends, "round %d, timer %d: ran %d, cancelled %d, stopped %d",
				round, id, f.ran.Load(), f.cancelled.Load(), f.stopped.Load())
			return true
		})
		assert.Zero(t, s.Pending(), "round %d", round)
	}
}
