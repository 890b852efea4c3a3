package shard

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
)

// startShardWith is startShard (a real shard goroutine on a manual clock)
// with mutate applied to its Config.
func startShardWith(t *testing.T, mutate func(*Config)) (*Shard, *ManualClock) {
	t.Helper()
	clock := &ManualClock{}
	cfg := Config{
		Tick: testTick, WheelSize: 64, FirstBlock: 64, TransferCap: 1000,
		Clock: clock, Tokens: 1 << 30, Limited: true, Lanes: 2,
		OnPanic: func(v any) { t.Errorf("panic: %v", v) },
	}
	if mutate != nil {
		mutate(&cfg)
	}
	sh, err := New(cfg)
	require.NoError(t, err)
	sh.Start()
	t.Cleanup(func() { sh.Close(); <-sh.Exited() })
	return sh, clock
}

// executors are the ways a task may run: inline on the shard goroutine,
// on a goroutine of its own, and synchronously inside the executor's run
// call (on the shard goroutine, but through the executor).
var executors = map[string]func(*Config){
	"inline":    nil,
	"goroutine": func(c *Config) { c.Run = func(f func()) { go f() } },
	"sync":      func(c *Config) { c.Run = func(f func()) { f() } },
}

// advanceUntil moves the clock a quarter tick at a time until cond holds.
func advanceUntil(t *testing.T, clock *ManualClock, cond func() bool) {
	t.Helper()
	require.Eventually(t, func() bool {
		if cond() {
			return true
		}
		clock.Advance(testTick / 4)
		return false
	}, waitFor, pollEvery)
}

type waitResult struct {
	ok       bool
	err      error
	finished bool // the task had returned when CancelWait did
}

// TestCancelWaitWaitsForTheTask: a CancelWait that comes while the task
// runs returns false only once the task has returned, inline or on the
// executor's goroutine; a context done first ends the wait with its error.
func TestCancelWaitWaitsForTheTask(t *testing.T) {
	for name, exec := range executors {
		for _, withCtx := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/ctx=%v", name, withCtx), func(t *testing.T) {
				sh, clock := startShardWith(t, exec)
				release := make(chan struct{})
				var once sync.Once
				free := func() { once.Do(func() { close(release) }) }
				t.Cleanup(free) // before the shard's: a failed test must not hang in its task
				var started, finished atomic.Bool
				r, rej := sched(sh, 1, 3*testTick, func() {
					started.Store(true)
					<-release
					finished.Store(true)
				})
				require.Equal(t, Accepted, rej)
				advanceUntil(t, clock, started.Load)
				running, self := sh.Running(r)
				require.True(t, running)
				require.False(t, self)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				got := make(chan waitResult, 1)
				go func() {
					ok, err := sh.CancelWait(ctx, r)
					got <- waitResult{ok, err, finished.Load()}
				}()
				require.Eventually(t, func() bool { return sh.waiters.Load() == 1 }, waitFor, pollEvery)
				select {
				case res := <-got:
					t.Fatalf("CancelWait returned %+v while the task ran", res)
				default:
				}
				if withCtx {
					cancel()
					res := <-got
					assert.Equal(t, waitResult{false, context.Canceled, false}, res)
					free()
					require.Eventually(t, func() bool { r, _ := sh.Running(r); return !r }, waitFor, pollEvery)
					return
				}
				free()
				res := <-got
				assert.Equal(t, waitResult{false, nil, true}, res)
				require.Eventually(t, func() bool { return sh.waiters.Load() == 0 }, waitFor, pollEvery)
			})
		}
	}
}

// TestCancelWaitFromItsOwnTask: called from inside the timer's own task,
// CancelWait returns false at once (a periodic timer: true, the series
// ends), whichever goroutine runs the task; from another timer's task it
// waits as from anywhere.
func TestCancelWaitFromItsOwnTask(t *testing.T) {
	for name, exec := range executors {
		for _, periodic := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/periodic=%v", name, periodic), func(t *testing.T) {
				sh, clock := startShardWith(t, exec)
				var ref atomic.Pointer[Ref]
				got := make(chan waitResult, 1)
				task := func() {
					r := ref.Load()
					for r == nil { // the task may run before Schedule returns
						r = ref.Load()
					}
					ok, err := sh.CancelWait(context.Background(), *r)
					got <- waitResult{ok: ok, err: err}
				}
				var r Ref
				var rej Reject
				if periodic {
					r, rej = schedSeries(sh, 1, 2*testTick, SkipMissed, task)
				} else {
					r, rej = sched(sh, 1, 2*testTick, task)
				}
				require.Equal(t, Accepted, rej)
				ref.Store(&r)
				var res waitResult
				advanceUntil(t, clock, func() bool {
					select {
					case res = <-got:
						return true
					default:
						return false
					}
				})
				assert.Equal(t, waitResult{ok: periodic}, res)
				assert.False(t, sh.Pending(r))
				clock.Advance(10 * testTick)
				select {
				case res := <-got:
					t.Fatalf("the series ran again: %+v", res)
				default:
				}
			})
		}
	}
}

// TestCancelWaitSeries: CancelWait on a series whose run is in progress
// ends the series (true) and returns once the run has returned; between
// runs it returns true at once; on an ended series false.
func TestCancelWaitSeries(t *testing.T) {
	for name, exec := range executors {
		t.Run(name, func(t *testing.T) {
			sh, clock := startShardWith(t, exec)
			release := make(chan struct{})
			var once sync.Once
			free := func() { once.Do(func() { close(release) }) }
			t.Cleanup(free)
			var runs atomic.Int32
			var inRun atomic.Bool
			r, rej := schedSeries(sh, 1, 2*testTick, SkipMissed, func() {
				inRun.Store(true)
				if runs.Add(1) == 2 {
					<-release
				}
				inRun.Store(false)
			})
			require.Equal(t, Accepted, rej)
			advanceUntil(t, clock, func() bool { return runs.Load() == 2 })
			got := make(chan waitResult, 1)
			go func() {
				ok, err := sh.CancelWait(context.Background(), r)
				got <- waitResult{ok, err, !inRun.Load()}
			}()
			require.Eventually(t, func() bool { return sh.waiters.Load() == 1 }, waitFor, pollEvery)
			require.False(t, sh.Pending(r), "cancelled while its run goes on")
			free()
			assert.Equal(t, waitResult{true, nil, true}, <-got)
			clock.Advance(20 * testTick)
			require.EqualValues(t, 2, runs.Load(), "no run after")
			ok, err := sh.CancelWait(context.Background(), r)
			assert.False(t, ok)
			assert.NoError(t, err)

			r2, rej := schedSeries(sh, 2, time.Hour, SkipMissed, func() {})
			require.Equal(t, Accepted, rej)
			ok, err = sh.CancelWait(context.Background(), r2)
			assert.True(t, ok)
			assert.NoError(t, err)
		})
	}
}

// TestCancelWaitRacesExpiry races CancelWait with expiry many times: true
// means the task never runs, false that it has returned, with every kind
// of executor and the clock moving under both.
func TestCancelWaitRacesExpiry(t *testing.T) {
	for name, exec := range executors {
		t.Run(name, func(t *testing.T) {
			sh, clock := startShardWith(t, exec)
			stop := make(chan struct{})
			var ticker sync.WaitGroup
			ticker.Add(1)
			go func() {
				defer ticker.Done()
				for {
					select {
					case <-stop:
						return
					default:
						clock.Advance(testTick / 8)
					}
				}
			}()
			const n = 3000
			var wg sync.WaitGroup
			var cancelled, waited atomic.Int64
			for i := range n {
				var started, done atomic.Bool
				r, rej := sched(sh, uint64(i), time.Duration(i%3)*testTick/2, func() {
					started.Store(true)
					for range i % 5 {
						runtime.Gosched() // a little work, long enough to be caught in
					}
					done.Store(true)
				})
				require.Equal(t, Accepted, rej)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range i % 7 {
						runtime.Gosched() // before, at or after the expiry
					}
					ok, err := sh.CancelWait(context.Background(), r)
					assert.NoError(t, err)
					if ok {
						cancelled.Add(1)
						assert.False(t, started.Load(), "cancelled, yet it started")
						return
					}
					waited.Add(1)
					assert.True(t, done.Load(), "CancelWait returned before the task did")
				}()
				if i%256 == 0 {
					wg.Wait()
				}
			}
			wg.Wait()
			close(stop)
			ticker.Wait()
			t.Logf("%d cancelled, %d waited for", cancelled.Load(), waited.Load())
			assert.EqualValues(t, n, cancelled.Load()+waited.Load())
		})
	}
}

// TestExecRunsArePooled: with an executor, runs reuse their records: a
// shard that ran many timers, a few at a time, made a few.
func TestExecRunsArePooled(t *testing.T) {
	sh, clock := startShardWith(t, executors["goroutine"])
	var ran atomic.Int64
	for i := range 200 {
		_, rej := sched(sh, uint64(i), testTick, func() { ran.Add(1) })
		require.Equal(t, Accepted, rej)
		advanceUntil(t, clock, func() bool { return ran.Load() == int64(i+1) })
	}
	runs := *sh.runs.Load()
	assert.Less(t, len(runs), 10)
	require.Eventually(t, func() bool {
		for _, r := range runs {
			if r.word.Load() != 0 {
				return false
			}
		}
		return true
	}, waitFor, pollEvery, "every run ended")
}
