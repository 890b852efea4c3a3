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
	advanceByUntil(t, clock, testTick/4, cond)
}

// advanceByUntil moves the clock step at a time until cond holds. A cond
// that needs the clock to move far (a second of ticks for the shard
// goroutine's next look at its runs) takes a large step: the clock moves
// once a poll, and a CPU-starved race build polls a few hundred times in
// waitFor, not the tens of thousands pollEvery allows.
func advanceByUntil(t *testing.T, clock *ManualClock, step time.Duration, cond func() bool) {
	t.Helper()
	require.Eventually(t, func() bool {
		if cond() {
			return true
		}
		clock.Advance(step)
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
				running, self := sh.running(r)
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
					require.Eventually(t, func() bool { r, _ := sh.running(r); return !r }, waitFor, pollEvery)
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
// of executor and the clock moving under both. A CancelWait that finds
// the task running must wait for it: every 16th timer's task runs, alone
// with its CancelWait, until that call has registered as a waiter (or
// returned), so that some calls surely catch a run in flight and wait
// (the others may or may not), and the test fails unless some did and
// each of them waited.
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
			var cancelled, waited, caught, sawWaiter atomic.Int64
			for i := range n {
				held := i%16 == 0 // the task runs until its CancelWait waits (or returns)
				if held {
					wg.Wait() // no other CancelWait is waiting meanwhile
				}
				var started, returned, done atomic.Bool
				r, rej := sched(sh, uint64(i), time.Duration(i%3)*testTick/2, func() {
					started.Store(true)
					for deadline := time.Now().Add(waitFor); held && time.Now().Before(deadline); {
						if sh.waiters.Load() > 0 {
							sawWaiter.Add(1)
							break
						}
						if returned.Load() {
							break
						}
						runtime.Gosched()
					}
					for range i % 5 {
						runtime.Gosched() // a little work, long enough to be caught in
					}
					done.Store(true)
				})
				require.Equal(t, Accepted, rej)
				wg.Add(1)
				go func() {
					defer wg.Done()
					if held {
						for deadline := time.Now().Add(waitFor); !started.Load() && time.Now().Before(deadline); {
							runtime.Gosched()
						}
					} else {
						for range i % 7 {
							runtime.Gosched() // before, at or after the expiry
						}
					}
					inFlight := started.Load() && !done.Load()
					ok, err := sh.CancelWait(context.Background(), r)
					returned.Store(true)
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
				if held || i%256 == 0 {
					wg.Wait()
				}
			}
			wg.Wait()
			close(stop)
			ticker.Wait()
			t.Logf("%d cancelled, %d waited for, %d of them caught running, %d seen waiting by their task",
				cancelled.Load(), waited.Load(), caught.Load(), sawWaiter.Load())
			assert.EqualValues(t, n, cancelled.Load()+waited.Load())
			assert.Positive(t, caught.Load(), "no CancelWait caught a run in flight: the wait went untested")
			assert.Positive(t, sawWaiter.Load(), "no task saw its CancelWait wait for it")
		})
	}
}

// TestExecRunsArePooled: with an executor, runs reuse their records: a
// shard that ran many timers, a few at a time, made a few, and every run
// left the run table when it returned.
func TestExecRunsArePooled(t *testing.T) {
	sh, clock := startShardWith(t, executors["goroutine"])
	var ran atomic.Int64
	for i := range 200 {
		_, rej := sched(sh, uint64(i), testTick, func() { ran.Add(1) })
		require.Equal(t, Accepted, rej)
		advanceUntil(t, clock, func() bool { return ran.Load() == int64(i+1) })
	}
	require.Eventually(t, func() bool { return runsPublished(sh) == 0 }, waitFor, pollEvery, "every run ended")
	sh.Close()
	<-sh.Exited()
	assert.Less(t, sh.runs.made, 10)
}

// runsPublished returns the run words in sh's run tables.
func runsPublished(sh *Shard) int {
	n := 0
	for tab := sh.runTab.Load(); tab != nil; tab = tab.older.Load() {
		for i := range tab.words {
			if tab.words[i].Load() != 0 {
				n++
			}
		}
	}
	return n
}

// handOverBurst hands n timers, all due at the same tick, to an executor
// that keeps every run in flight (it holds the funcs it is given), and
// returns the bytes and allocations the shard goroutine's pass made. The
// held runs are run, and so returned, before it returns.
func handOverBurst(t *testing.T, sh *Shard, clock *ManualClock, held *[]func(), n int) (bytes, mallocs uint64) {
	t.Helper()
	var ran atomic.Int64
	task := func() { ran.Add(1) }
	for i := range n {
		_, rej := sched(sh, uint64(i), testTick, task)
		require.Equal(t, Accepted, rej)
	}
	clock.Advance(testTick)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	passNow(sh)
	runtime.ReadMemStats(&after)
	require.Len(t, *held, n, "every run handed over")
	for _, f := range *held {
		f()
	}
	*held = (*held)[:0]
	require.EqualValues(t, n, ran.Load())
	return after.TotalAlloc - before.TotalAlloc, after.Mallocs - before.Mallocs
}

// TestExecutorHandOverIsLinear: handing a burst of timers to an executor
// costs each timer the same, however many runs are in flight, and a
// burst after the runs returned allocates nothing (where the goroutine
// token is cheap): twice the burst costs about twice the bytes, not four
// times (each new run record once copied the list of all of them).
func TestExecutorHandOverIsLinear(t *testing.T) {
	const n = 2000
	burst := func(sizes ...int) (bytes, mallocs []uint64) {
		held := make([]func(), 0, 2*n)
		sh, clock := benchShard(t, func(c *Config) {
			c.FirstBlock = 4 * n
			c.Run = func(f func()) { held = append(held, f) }
		})
		for _, size := range sizes {
			b, m := handOverBurst(t, sh, clock, &held, size)
			bytes, mallocs = append(bytes, b), append(mallocs, m)
		}
		return bytes, mallocs
	}
	small, _ := burst(n)
	large, mallocs := burst(2*n, 2*n)
	t.Logf("hand-over on a fresh shard: %d timers %d B (%.0f B/timer), %d timers %d B (%.0f B/timer); again: %d B, %d allocations",
		n, small[0], float64(small[0])/n, 2*n, large[0], float64(large[0])/(2*n), large[1], mallocs[1])
	assert.Less(t, float64(large[0])/(2*n), 512.0, "bytes per timer handed over")
	assert.Less(t, float64(large[0]), 2.5*float64(small[0])+64<<10, "twice the timers, about twice the bytes")
	if cheapGoroutineToken {
		assert.Less(t, float64(mallocs[1])/(2*n), 0.01, "a burst the shard has seen before allocates nothing per run")
	}
}

// TestExecutorBurstIsGivenBack: once a burst of runs has returned, the
// shard goroutine unlinks the run tables it grew through at its next look
// (a second of ticks later), and within four seconds gives back the
// execRuns and the large table: a CancelWait then looks at one small
// table, as before the burst, and the shard keeps runKeepMin records.
// Parked with nothing due, it still wakes for those looks.
func TestExecutorBurstIsGivenBack(t *testing.T) {
	const n = 20000
	var held []func()
	sh, clock := benchShard(t, func(c *Config) {
		c.FirstBlock = n
		c.Run = func(f func()) { held = append(held, f) }
	})
	heldBurst(t, sh, clock, n)
	tables := func() (n, buckets int) {
		for tab := sh.runTab.Load(); tab != nil; tab = tab.older.Load() {
			n, buckets = n+1, buckets+tab.buckets()
		}
		return n, buckets
	}
	grown, _ := tables()
	assert.Greater(t, grown, 1, "the burst grew the table")
	assert.Equal(t, n, runsPublished(sh))
	runHeld(&held)
	assert.Zero(t, runsPublished(sh))
	// Play the shard goroutine: pass whenever it planned to wake, until
	// it parks untimed.
	start := clock.Now()
	for sh.timed {
		require.LessOrEqual(t, clock.Now()-start, 4*time.Second, "still looking")
		clock.Advance(max(sh.tickTime(sh.wakeTick)-clock.Now(), 0))
		passNow(sh)
		if clock.Now() >= start+time.Second {
			chain, _ := tables()
			require.Equal(t, 1, chain, "a second later, one table")
		}
	}
	t.Logf("everything given back %v after the burst", clock.Now()-start)
	chain, buckets := tables()
	assert.Equal(t, 1, chain)
	assert.LessOrEqual(t, buckets, 2*runBucketsFor(runKeepMin), "the large table replaced")
	assert.Equal(t, runKeepMin, sh.runs.made, "the burst's records given back")
	assert.False(t, sh.runs.wake, "nothing left to give back")
}

// TestCancelWaitDuringABurst: thousands of runs in flight at once on
// executor goroutines (the run table grows through a chain of tables
// while they are handed over), with goroutines calling CancelWait on them
// and on timers not due yet meanwhile: each CancelWait on a run in flight
// returns once its task has returned, each on a pending timer cancels it,
// and once the runs have returned the shard goroutine's looks leave one
// table, with nothing published in it.
func TestCancelWaitDuringABurst(t *testing.T) {
	n := 20000
	if raceEnabled || testing.Short() {
		n = 3000
	}
	sh, clock := startShardWith(t, executors["goroutine"])
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free)
	var started, done atomic.Int64
	type timer struct {
		r        Ref
		finished atomic.Bool
	}
	burst := make([]*timer, n)
	for i := range burst {
		tm := &timer{}
		r, rej := sched(sh, uint64(i), testTick, func() {
			started.Add(1)
			<-release
			tm.finished.Store(true)
			done.Add(1)
		})
		require.Equal(t, Accepted, rej)
		tm.r = r
		burst[i] = tm
	}
	far := make([]Ref, n/10)
	for i := range far {
		r, rej := sched(sh, uint64(i), time.Hour, func() { t.Error("a cancelled timer ran") })
		require.Equal(t, Accepted, rej)
		far[i] = r
	}
	advanceUntil(t, clock, func() bool { return started.Load() > int64(n/2) })
	chain := 0
	for tab := sh.runTab.Load(); tab != nil; tab = tab.older.Load() {
		chain++
	}
	t.Logf("%d runs started, %d tables", started.Load(), chain)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 * 16 {
				tm := burst[i]
				ok, err := sh.CancelWait(context.Background(), tm.r)
				assert.NoError(t, err)
				assert.False(t, ok, "a run in flight is not cancelled")
				assert.True(t, tm.finished.Load(), "CancelWait returned before its task did")
			}
			for i := w; i < len(far); i += 8 {
				ok, err := sh.CancelWait(context.Background(), far[i])
				assert.NoError(t, err)
				assert.True(t, ok)
			}
		})
	}
	require.Eventually(t, func() bool { return sh.waiters.Load() > 0 }, waitFor, pollEvery)
	advanceUntil(t, clock, func() bool { return started.Load() == int64(n) })
	free()
	wg.Wait()
	require.Eventually(t, func() bool { return done.Load() == int64(n) }, waitFor, pollEvery)
	// The older tables are unlinked at the shard goroutine's next look at
	// its runs, a second of ticks on (trimRuns): a sixteenth of that a
	// poll.
	advanceByUntil(t, clock, time.Duration(sh.sweepCheck)*testTick/16, func() bool {
		tab := sh.runTab.Load()
		return runsPublished(sh) == 0 && tab.older.Load() == nil
	})
}
