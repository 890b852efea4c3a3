package shardwheel_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
)

// executorOptions are the ways tasks run: inline, on a goroutine each, and
// on a small pool of workers fed by a channel.
func executorOptions(t *testing.T) map[string][]shardwheel.Option {
	work := make(chan func(), 1024)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := range work {
				f()
			}
		}()
	}
	t.Cleanup(func() { close(work); wg.Wait() })
	return map[string][]shardwheel.Option{
		"inline":    {shardwheel.WithShards(2)},
		"goroutine": {shardwheel.WithShards(2), shardwheel.WithExecutor(func(f func()) { go f() })},
		"pool":      {shardwheel.WithShards(2), shardwheel.WithExecutor(func(f func()) { work <- f })},
	}
}

// TestCancelWaitAPI: the zero Timer, a pending timer (true, its task
// never runs), one cancelled or run already (false at once), and one Stop
// returned.
func TestCancelWaitAPI(t *testing.T) {
	ctx := context.Background()
	ok, err := shardwheel.Timer{}.CancelWait(ctx)
	assert.False(t, ok)
	assert.NoError(t, err)
	s := newScheduler(t)
	tm, err := s.AfterFunc(time.Hour, func() { t.Error("ran") }, shardwheel.ByKey(1))
	require.NoError(t, err)
	done, cancel := context.WithCancel(ctx)
	cancel()
	ok, err = tm.CancelWait(done) // nothing to wait for: ctx not looked at
	assert.True(t, ok)
	assert.NoError(t, err)
	ok, err = tm.CancelWait(ctx)
	assert.False(t, ok)
	assert.NoError(t, err)
	ran := make(chan struct{})
	tm, err = s.AfterFunc(0, func() { close(ran) }, shardwheel.ByKey(1))
	require.NoError(t, err)
	<-ran
	ok, err = tm.CancelWait(ctx)
	assert.False(t, ok)
	assert.NoError(t, err)
	tm, err = s.AfterFunc(time.Hour, noop, shardwheel.ByKey(1))
	require.NoError(t, err)
	require.Len(t, s.Stop(), 1)
	ok, err = tm.CancelWait(ctx)
	assert.False(t, ok)
	assert.NoError(t, err)
}

// TestCancelWaitWaits: a CancelWait during the task returns once the task
// has returned, for every executor; with a context done first, its error.
func TestCancelWaitWaits(t *testing.T) {
	for name, opts := range executorOptions(t) {
		t.Run(name, func(t *testing.T) {
			s := newScheduler(t, opts...)
			release := make(chan struct{})
			var once sync.Once
			free := func() { once.Do(func() { close(release) }) }
			t.Cleanup(free)
			started := make(chan struct{})
			var finished atomic.Bool
			tm, err := s.AfterFunc(0, func() {
				close(started)
				<-release
				finished.Store(true)
			}, shardwheel.ByKey(1))
			require.NoError(t, err)
			<-started
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			ok, err := tm.CancelWait(ctx)
			assert.False(t, ok)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.False(t, finished.Load())
			go func() {
				for range 100 {
					runtime.Gosched()
				}
				free()
			}()
			ok, err = tm.CancelWait(context.Background())
			assert.False(t, ok)
			assert.NoError(t, err)
			assert.True(t, finished.Load(), "returned before the task did")
		})
	}
}

// TestCancelWaitFromTheTask: from inside its own task, CancelWait returns
// false (a series: true) at once, inline and on an executor's goroutine.
func TestCancelWaitFromTheTask(t *testing.T) {
	for name, opts := range executorOptions(t) {
		for _, periodic := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/periodic=%v", name, periodic), func(t *testing.T) {
				s := newScheduler(t, opts...)
				var tm atomic.Pointer[shardwheel.Timer]
				type result struct {
					ok  bool
					err error
				}
				got := make(chan result, 4)
				task := func() {
					var h *shardwheel.Timer
					for h = tm.Load(); h == nil; h = tm.Load() {
						runtime.Gosched()
					}
					ok, err := h.CancelWait(context.Background())
					got <- result{ok, err}
				}
				var h shardwheel.Timer
				var err error
				if periodic {
					h, err = s.Every(time.Millisecond, task, shardwheel.ByKey(1), shardwheel.OnMissed(shardwheel.SkipMissed))
				} else {
					h, err = s.AfterFunc(time.Millisecond, task, shardwheel.ByKey(1))
				}
				require.NoError(t, err)
				tm.Store(&h)
				select {
				case r := <-got:
					assert.Equal(t, result{periodic, nil}, r)
				case <-time.After(waitFor):
					t.Fatal("CancelWait from its own task did not return")
				}
				assert.False(t, h.Pending())
			})
		}
	}
}

// TestCancelWaitWaitsForTheTaskNotTheRunCall: with an executor whose run
// call outlives the task it was given, CancelWait returns once the task
// has returned, not when the run call does.
func TestCancelWaitWaitsForTheTaskNotTheRunCall(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	s := newScheduler(t, shardwheel.WithShards(1), shardwheel.WithExecutor(func(task func()) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			task()
		}()
		<-done
		<-release // the run call lingers after its task has returned
	}))
	var returned atomic.Bool
	tm, err := s.AfterFunc(0, func() { returned.Store(true) })
	require.NoError(t, err)
	require.Eventually(t, returned.Load, waitFor, time.Millisecond, "the task never ran")

	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	ok, err := tm.CancelWait(ctx)
	require.NoError(t, err, "CancelWait waited for the executor's run call, not for the task")
	assert.False(t, ok)
}

// TestCancelWaitRacesExpiry races CancelWait with expiry many times on
// every executor: true means the task never runs, false that it has
// returned. A CancelWait that finds the task running must wait for it:
// every 16th timer's task holds on until its CancelWait has been called,
// so that some calls surely catch a run in flight (the others may or may
// not), and the test fails unless some did and each of them waited.
func TestCancelWaitRacesExpiry(t *testing.T) {
	for name, opts := range executorOptions(t) {
		t.Run(name, func(t *testing.T) {
			s := newScheduler(t, opts...)
			const n = 4000
			var wg sync.WaitGroup
			var cancelled, waited, caught atomic.Int64
			for i := range n {
				held := i%16 == 0 // the task runs until its CancelWait is called
				var started, calling, done atomic.Bool
				tm, err := s.AfterFunc(time.Duration(i%4)*time.Millisecond/2, func() {
					started.Store(true)
					for deadline := time.Now().Add(waitFor); held && !calling.Load() && time.Now().Before(deadline); {
						runtime.Gosched()
					}
					for range i%5 + 4*btoi(held) {
						runtime.Gosched() // a little work, long enough to be caught in
					}
					done.Store(true)
				})
				require.NoError(t, err)
				wg.Add(1)
				go func() {
					defer wg.Done()
					if held {
						for deadline := time.Now().Add(waitFor); !started.Load() && time.Now().Before(deadline); {
							runtime.Gosched()
						}
					} else {
						time.Sleep(time.Duration(i%3) * time.Millisecond / 3) // before, at or after the expiry
					}
					inFlight := started.Load() && !done.Load()
					calling.Store(true)
					ok, err := tm.CancelWait(context.Background())
					assert.NoError(t, err)
					if ok {
						cancelled.Add(1)
						assert.False(t, started.Load(), "cancelled, yet it started")
						return
					}
					waited.Add(1)
					assert.True(t, done.Load(), "CancelWait returned before the task did")
					if inFlight {
						caught.Add(1)
					}
				}()
				if i%512 == 511 {
					wg.Wait()
				}
			}
			wg.Wait()
			t.Logf("%d cancelled, %d waited for, %d of them caught running", cancelled.Load(), waited.Load(), caught.Load())
			assert.EqualValues(t, n, cancelled.Load()+waited.Load())
			assert.Positive(t, caught.Load(), "no CancelWait caught a run in flight: the wait went untested")
		})
	}
}

// btoi is 1 for true and 0 for false.
func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestCancelWaitSeries: CancelWait on a series whose run is in progress
// returns true once that run has returned, and no run starts after.
func TestCancelWaitSeries(t *testing.T) {
	for name, opts := range executorOptions(t) {
		t.Run(name, func(t *testing.T) {
			s := newScheduler(t, opts...)
			var runs, active atomic.Int32
			inRun := make(chan struct{}, 1)
			hb, err := s.Every(time.Millisecond, func() {
				active.Add(1)
				defer active.Add(-1)
				if runs.Add(1) == 3 {
					inRun <- struct{}{}
					time.Sleep(5 * time.Millisecond)
				}
			}, shardwheel.ByKey(1), shardwheel.OnMissed(shardwheel.BurstMissed))
			require.NoError(t, err)
			<-inRun
			ok, err := hb.CancelWait(context.Background())
			assert.True(t, ok)
			assert.NoError(t, err)
			assert.Zero(t, active.Load(), "the run in progress has returned")
			after := runs.Load()
			time.Sleep(10 * time.Millisecond)
			assert.Equal(t, after, runs.Load(), "no run after")
		})
	}
}
