package shardwheel_test

import (
	"context"
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

func TestPanickingTasksAreCountedAndHandled(t *testing.T) {
	var handled atomic.Int64
	s := newScheduler(t, shardwheel.WithShards(2), shardwheel.WithTick(time.Millisecond),
		shardwheel.WithPanicHandler(func(v any) {
			assert.Equal(t, "task failed", v)
			handled.Add(1)
		}))
	var ran atomic.Int64
	for i := range uint64(200) {
		task := func() { ran.Add(1) }
		if i%2 == 0 {
			task = func() { panic("task failed") }
		}
		_, err := s.AfterFunc(time.Millisecond, task, shardwheel.ByKey(i))
		require.NoError(t, err)
	}
	// Counters are published at the end of a pass, after the handler ran:
	// wait for them too, then check that nothing was counted twice.
	require.Eventually(t, func() bool {
		st := s.Stats().Total
		return ran.Load() >= 100 && handled.Load() >= 100 && st.Fired >= 200 && st.Panics >= 100
	}, waitFor, pollEvery)
	assert.Empty(t, s.Stop())
	st := s.Stats()
	assert.EqualValues(t, 100, ran.Load())
	assert.EqualValues(t, 100, handled.Load())
	assert.Equal(t, uint64(100), st.Total.Panics)
	assert.Equal(t, uint64(200), st.Total.Fired)
	assert.Zero(t, s.Pending())
}

func TestExecutorRunsTasks(t *testing.T) {
	var submitted atomic.Int64
	s := newScheduler(t, shardwheel.WithTick(time.Millisecond), shardwheel.WithExecutor(func(task func()) {
		submitted.Add(1)
		go task()
	}))
	ran := make(chan struct{})
	_, err := s.AfterFunc(time.Millisecond, func() { close(ran) }, shardwheel.ByKey(1))
	require.NoError(t, err)
	select {
	case <-ran:
	case <-time.After(waitFor):
		t.Fatal("task never ran")
	}
	assert.EqualValues(t, 1, submitted.Load())
}

// TestBlockingTaskDelaysButNeverReorders blocks a shard's runner for many
// ticks: the timers that came due meanwhile all run afterwards, none lost,
// in deadline order, and the shard's lateness shows the stall.
// WithBlockedAfter(0): the tasks behind a blocked one wait for it.
func TestBlockingTaskDelaysButNeverReorders(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(1), shardwheel.WithTick(time.Millisecond), stall)
	const block = 50 * time.Millisecond
	var mu sync.Mutex
	var order []int
	release := blockShard(t, s)
	for i := 1; i <= 40; i++ {
		_, err := s.AfterFunc(time.Duration(2+i)*time.Millisecond, func() {
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
		}, shardwheel.ByKey(uint64(i)))
		require.NoError(t, err)
	}
	time.Sleep(block) // the shard stays blocked past every deadline, and longer
	release()
	// Not Pending() == 0: a timer stops counting as pending when its task
	// starts, before the task has appended.
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order) >= 40
	}, waitFor, pollEvery)
	assert.Empty(t, s.Stop())
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, order, 40)
	for i := 1; i < len(order); i++ {
		assert.Less(t, order[i-1], order[i], "timers ran out of deadline order: %v", order)
	}
	st := s.Stats()
	assert.GreaterOrEqual(t, time.Duration(st.Total.Lateness.Max()), block/2, "the stall shows as lateness")
}

// TestGoexitingTaskLeavesItsShardRunning: a task that calls runtime.Goexit
// (as t.FailNow does) and one that panics with nil, inline or through an
// executor, are reported to the panic handler and counted in Panics, once
// each; their shard goes on running its other timers, never early, and a
// series whose runs do it goes on too. Stop still returns what is pending
// and leaves no goroutine behind.
func TestGoexitingTaskLeavesItsShardRunning(t *testing.T) {
	isGoexit := func(t *testing.T, v any) {
		err, ok := v.(error)
		require.True(t, ok, "reported %T %v", v, v)
		assert.ErrorIs(t, err, shardwheel.ErrTaskGoexit)
	}
	isNilPanic := func(t *testing.T, v any) {
		var pe *runtime.PanicNilError
		err, ok := v.(error)
		require.True(t, ok, "reported %T %v", v, v)
		assert.ErrorAs(t, err, &pe)
	}
	goexit := func() { runtime.Goexit() }
	panicNil := func() { panic(nil) } //nolint:govet // the point of the test
	executors := map[string][]shardwheel.Option{
		"inline":        nil,
		"inline-pinned": {shardwheel.WithAffinity(true)},
		"in-run":        {shardwheel.WithExecutor(func(f func()) { f() })},
		"goroutine":     {shardwheel.WithExecutor(func(f func()) { go f() })},
	}
	for name, exec := range executors {
		for _, c := range []struct {
			kind  string
			abort func()
			check func(*testing.T, any)
		}{{"goexit", goexit, isGoexit}, {"panic-nil", panicNil, isNilPanic}} {
			if c.kind == "panic-nil" && name == "goroutine" {
				continue // the executor's goroutine panics: the executor's to recover
			}
			t.Run(name+"/"+c.kind, func(t *testing.T) {
				defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
				var mu sync.Mutex
				var reported []any
				opts := append([]shardwheel.Option{shardwheel.WithShards(1), shardwheel.WithTick(time.Millisecond),
					shardwheel.WithPanicHandler(func(v any) {
						mu.Lock()
						reported = append(reported, v)
						mu.Unlock()
					})}, exec...)
				s, err := shardwheel.New(opts...)
				require.NoError(t, err)
				const aborts = 4 // one one-shot timer, three runs of a series
				var ran atomic.Int64
				var early atomic.Int64
				schedule := func(n int) {
					for i := range n {
						d := time.Duration(i%8) * time.Millisecond
						at := time.Now()
						_, err := s.AfterFunc(d, func() {
							if time.Since(at) < d {
								early.Add(1)
							}
							ran.Add(1)
						}, shardwheel.ByKey(uint64(i)))
						require.NoError(t, err)
					}
				}
				_, err = s.AfterFunc(0, c.abort, shardwheel.ByKey(0))
				require.NoError(t, err)
				var beats atomic.Int64
				hb, err := s.Every(time.Millisecond, func() {
					if beats.Add(1) <= aborts-1 {
						c.abort()
					}
				}, shardwheel.ByKey(0), shardwheel.OnMissed(shardwheel.SkipMissed))
				require.NoError(t, err)
				schedule(100)
				require.Eventually(t, func() bool { return ran.Load() == 100 && beats.Load() > aborts }, waitFor, pollEvery,
					"timers on the shard ran: %d of 100, %d beats", ran.Load(), beats.Load())
				require.True(t, hb.Cancel(), "the series lives on")
				require.Eventually(t, func() bool {
					mu.Lock()
					defer mu.Unlock()
					return len(reported) >= aborts && s.Stats().Total.Panics >= aborts
				}, waitFor, pollEvery)
				schedule(100) // after the shard goroutine was replaced
				require.Eventually(t, func() bool { return ran.Load() == 200 }, waitFor, pollEvery)
				assert.Zero(t, early.Load(), "timers ran early")
				hour, err := s.AfterFunc(time.Hour, noop, shardwheel.ByKey(1))
				require.NoError(t, err)
				assert.Equal(t, []shardwheel.Timer{hour}, s.Stop())
				mu.Lock()
				defer mu.Unlock()
				assert.Len(t, reported, aborts, "each reported once")
				for _, v := range reported {
					c.check(t, v)
				}
				assert.EqualValues(t, aborts, s.Stats().Total.Panics)
			})
		}
	}
}

// TestPanicHandlerThatEndsItsGoroutine: a panic handler that calls
// runtime.Goexit (t.Fatal in a test's handler) ends the goroutine it runs
// on, which inline is the shard goroutine: the shard goes on with a new
// one, the panic is counted once and the handler called once for it; with
// an executor the run still finishes (CancelWait returns) and a series
// runs on. The same holds when the handler ends its goroutine reporting a
// task's own Goexit.
func TestPanicHandlerThatEndsItsGoroutine(t *testing.T) {
	executors := map[string][]shardwheel.Option{
		"inline":    nil,
		"in-run":    {shardwheel.WithExecutor(func(f func()) { f() })},
		"goroutine": {shardwheel.WithExecutor(func(f func()) { go func() { defer func() { _ = recover() }(); f() }() })},
	}
	aborts := map[string]func(){
		"panic":  func() { panic("boom") },
		"goexit": func() { runtime.Goexit() },
	}
	for name, exec := range executors {
		for kind, abort := range aborts {
			if kind == "panic" && name == "goroutine" {
				continue // the executor's goroutine panics: the executor's to report
			}
			t.Run(name+"/"+kind, func(t *testing.T) {
				var handled atomic.Int64
				opts := append([]shardwheel.Option{shardwheel.WithShards(1), shardwheel.WithTick(time.Millisecond),
					shardwheel.WithPanicHandler(func(any) {
						handled.Add(1)
						runtime.Goexit()
					})}, exec...)
				s := newScheduler(t, opts...)
				started := make(chan struct{})
				first, err := s.AfterFunc(0, func() { close(started); abort() })
				require.NoError(t, err)
				<-started
				ctx, cancel := context.WithTimeout(context.Background(), waitFor)
				defer cancel()
				_, err = first.CancelWait(ctx)
				require.NoError(t, err, "the aborted run finishes")
				var ran atomic.Int64
				for range 10 {
					_, err := s.AfterFunc(time.Millisecond, func() { ran.Add(1) })
					require.NoError(t, err)
				}
				var beats atomic.Int64
				hb, err := s.Every(time.Millisecond, func() {
					if beats.Add(1) == 1 {
						abort()
					}
				}, shardwheel.OnMissed(shardwheel.SkipMissed))
				require.NoError(t, err)
				require.Eventually(t, func() bool { return ran.Load() == 10 && beats.Load() >= 3 },
					waitFor, pollEvery, "the shard goes on: %d of 10 timers ran, the series ran %d times", ran.Load(), beats.Load())
				_, err = hb.CancelWait(ctx)
				require.NoError(t, err)
				require.Eventually(t, func() bool { return s.Stats().Total.Panics == 2 }, waitFor, pollEvery,
					"Panics %d, want 2", s.Stats().Total.Panics)
				assert.Equal(t, int64(2), handled.Load(), "the handler is called once per abort")
			})
		}
	}
}
