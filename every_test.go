package shardwheel_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
)

var missedPolicies = []shardwheel.MissedPolicy{shardwheel.SkipMissed, shardwheel.BurstMissed, shardwheel.DelayMissed}

// TestEveryAcrossAStalledShard runs a series on the bubble's fake clock
// while its shard stalls (another timer's task, or the executor's run call,
// sleeps 5.5 periods on the shard goroutine) and its own task sometimes
// runs 2.5 periods, for each policy, inline and with an executor that runs
// tasks on goroutines of their own: the i-th run never starts before
// start + i·period, and runs never overlap.
func TestEveryAcrossAStalledShard(t *testing.T) {
	const period = 10 * time.Millisecond
	for _, policy := range missedPolicies {
		for _, exec := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/executor=%v", policy, exec), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					var stall atomic.Bool
					opts := []shardwheel.Option{shardwheel.WithShards(1)}
					if exec {
						opts = append(opts, shardwheel.WithExecutor(func(f func()) {
							if stall.Swap(false) {
								time.Sleep(55 * time.Millisecond) // the shard goroutine stalls
							}
							go f()
						}))
					}
					s, err := shardwheel.New(opts...)
					require.NoError(t, err)
					defer s.Stop()
					var mu sync.Mutex
					var starts []time.Duration
					var active, overlaps atomic.Int32
					start := time.Now()
					hb, err := s.Every(period, func() {
						if active.Add(1) > 1 {
							overlaps.Add(1)
						}
						defer active.Add(-1)
						mu.Lock()
						starts = append(starts, time.Since(start))
						n := len(starts)
						mu.Unlock()
						if n%7 == 3 {
							time.Sleep(25 * time.Millisecond) // a slow run
						}
					}, shardwheel.ByKey(1), shardwheel.OnMissed(policy))
					require.NoError(t, err)
					for round := range 3 {
						time.Sleep(150 * time.Millisecond)
						if exec {
							stall.Store(true)
							_, err = s.AfterFunc(0, func() {})
						} else {
							_, err = s.AfterFunc(0, func() { time.Sleep(55 * time.Millisecond) })
						}
						require.NoError(t, err, "round %d", round)
					}
					time.Sleep(100 * time.Millisecond)
					live, err := hb.CancelWait(context.Background())
					require.NoError(t, err)
					require.True(t, live)
					mu.Lock()
					defer mu.Unlock()
					require.Greater(t, len(starts), 20)
					for i, at := range starts {
						require.GreaterOrEqual(t, at, time.Duration(i+1)*period, "run %d early: %v", i+1, starts)
					}
					assert.Zero(t, overlaps.Load(), "runs overlapped")
					st := s.Stats().Total
					// A run handed over and not started when CancelWait ended
					// the series counts, and never starts.
					assert.Contains(t, []uint64{uint64(len(starts)), uint64(len(starts)) + 1}, st.PeriodicRuns)
					assert.NotZero(t, st.PeriodicMissed)
					assert.EqualValues(t, 3, st.Fired, "only the stalling timers fired")
				})
			})
		}
	}
}

// TestEveryDoesNotDrift: a series whose period is not a multiple of the
// tick runs, after many periods, still within a tick of its grid point.
func TestEveryDoesNotDrift(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := shardwheel.New(shardwheel.WithShards(1))
		require.NoError(t, err)
		defer s.Stop()
		const period = 2300 * time.Microsecond
		start := time.Now()
		runs := make(chan time.Duration, 2000)
		hb, err := s.Every(period, func() { runs <- time.Since(start) }, shardwheel.ByKey(1), shardwheel.OnMissed(shardwheel.SkipMissed))
		require.NoError(t, err)
		for k := 1; k <= 1000; k++ {
			at := <-runs
			point := time.Duration(k) * period
			require.GreaterOrEqual(t, at, point)
			require.Less(t, at, point+s.Tick(), "run %d drifted", k)
		}
		require.True(t, hb.Cancel())
	})
}

// TestEveryAPI: the errors, the handle's methods on a series, the Handler
// form, and Stop returning a live series once.
func TestEveryAPI(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(2))
	_, err := s.Every(time.Second, nil, shardwheel.ByKey(1), shardwheel.OnMissed(shardwheel.SkipMissed))
	assert.ErrorIs(t, err, shardwheel.ErrNilTask)
	for _, p := range []time.Duration{0, -time.Second} {
		_, err = s.Every(p, noop, shardwheel.ByKey(1), shardwheel.OnMissed(shardwheel.SkipMissed))
		assert.ErrorIs(t, err, shardwheel.ErrBadPeriod)
	}
	_, err = s.Every(time.Second, noop, shardwheel.ByKey(1), shardwheel.OnMissed(shardwheel.MissedPolicy(3)))
	assert.ErrorIs(t, err, shardwheel.ErrInvalidOption)
	assert.ErrorContains(t, err, "OnMissed(MissedPolicy(3))")
	_, err = (shardwheel.Handler{}).Every(1, time.Second, shardwheel.ByKey(1), shardwheel.OnMissed(shardwheel.SkipMissed))
	assert.ErrorIs(t, err, shardwheel.ErrNilTask)
	assert.Equal(t, "BurstMissed", shardwheel.BurstMissed.String())
	assert.Equal(t, "MissedPolicy(9)", shardwheel.MissedPolicy(9).String())

	var keys sync.Map
	h, err := s.NewHandler(func(key uint64) { keys.Store(key, true) })
	require.NoError(t, err)
	hs, err := h.Every(42, 2*time.Millisecond, shardwheel.ByKey(42), shardwheel.OnMissed(shardwheel.SkipMissed))
	require.NoError(t, err)
	assert.Equal(t, uint64(42), hs.Key())
	require.Eventually(t, func() bool { _, ok := keys.Load(uint64(42)); return ok }, waitFor, pollEvery)
	require.True(t, hs.Pending())

	far, err := s.Every(time.Hour, noop, shardwheel.ByKey(7), shardwheel.OnMissed(shardwheel.DelayMissed))
	require.NoError(t, err)
	assert.True(t, far.Pending())
	d := time.Until(far.Deadline())
	assert.Greater(t, d, 59*time.Minute)
	assert.False(t, far.Reset(0), "a period <= 0 is refused")
	assert.True(t, far.Pending())
	require.True(t, far.Reset(2*time.Hour))
	assert.Greater(t, time.Until(far.Deadline()), 119*time.Minute)
	assert.Equal(t, 2, s.Pending(), "a series is one timer")

	got := s.Stop()
	require.Len(t, got, 2)
	for _, tm := range got {
		assert.NotNil(t, tm.Task())
		assert.False(t, tm.Pending())
		assert.False(t, tm.Cancel())
	}
	assert.Nil(t, s.Stop())
	_, err = s.Every(time.Second, noop, shardwheel.ByKey(1), shardwheel.OnMissed(shardwheel.SkipMissed))
	assert.ErrorIs(t, err, shardwheel.ErrStopped)
}

// TestEveryCountsInStats: a series is one timer (Scheduled, then
// Cancelled), its runs PeriodicRuns, and Pending counts it while it lives.
// PeriodicRuns counts a run as it is handed to the runner, so a run the
// cancel caught before it started is counted too: at most one more than
// the task saw.
func TestEveryCountsInStats(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(1))
	var runs atomic.Int64
	hb, err := s.Every(time.Millisecond, func() { runs.Add(1) }, shardwheel.ByKey(1), shardwheel.OnMissed(shardwheel.SkipMissed))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return runs.Load() >= 5 }, waitFor, pollEvery)
	assert.Equal(t, 1, s.Pending())
	_, err = hb.CancelWait(context.Background())
	require.NoError(t, err)
	assert.Zero(t, s.Pending())
	st := s.Stats().Total
	assert.EqualValues(t, 1, st.Scheduled)
	assert.EqualValues(t, 1, st.Cancelled)
	assert.Zero(t, st.Fired)
	ran := uint64(runs.Load())
	assert.Contains(t, []uint64{ran, ran + 1}, st.PeriodicRuns, "the task ran %d times", ran)
}

// TestSeriesAndSlackWithoutAKeyStayLocal: the forms without a key file
// on the caller's P's shard and run there, with key 0 (the Handler forms
// pass their key to the handler); a period shorter than the tick is
// refused.
func TestSeriesAndSlackWithoutAKeyStayLocal(t *testing.T) {
	withGOMAXPROCS(1, func() { // one P: P 0's shard
		s := newScheduler(t, shardwheel.WithShards(3), shardwheel.WithTick(time.Millisecond))
		ran := make(chan int, 8)
		series, err := s.Every(2*time.Millisecond, func() { ran <- shardwheel.RunningShard(s) }, shardwheel.OnMissed(shardwheel.SkipMissed))
		require.NoError(t, err)
		assert.Zero(t, series.Key())
		assert.Equal(t, 0, shardwheel.FiledOn(series))
		within, err := s.AfterFunc(time.Millisecond, func() { ran <- shardwheel.RunningShard(s) }, shardwheel.Slack(5*time.Millisecond))
		require.NoError(t, err)
		assert.Zero(t, within.Key())
		assert.Equal(t, 0, shardwheel.FiledOn(within))
		for range 3 {
			select {
			case on := <-ran:
				assert.Equal(t, 0, on, "ran on the shard that filed it")
			case <-time.After(waitFor):
				t.Fatal("did not run")
			}
		}
		assert.True(t, series.Cancel())

		keys := make(chan uint64, 64)
		h, err := s.NewHandler(func(k uint64) { keys <- k })
		require.NoError(t, err)
		hs, err := h.Every(7, 2*time.Millisecond)
		require.NoError(t, err)
		assert.Equal(t, 0, shardwheel.FiledOn(hs))
		_, err = h.AfterFunc(9, time.Millisecond, shardwheel.Slack(time.Millisecond))
		require.NoError(t, err)
		got := map[uint64]bool{}
		for !got[7] || !got[9] {
			select {
			case k := <-keys:
				require.Contains(t, []uint64{7, 9}, k, "the handler gets its timer's key")
				got[k] = true
			case <-time.After(waitFor):
				t.Fatalf("handler timers did not both run: %v", got)
			}
		}
		hs.Cancel()

		for _, p := range []time.Duration{0, -time.Second, 999 * time.Microsecond} {
			_, err = s.Every(p, noop, shardwheel.OnMissed(shardwheel.SkipMissed))
			assert.ErrorIs(t, err, shardwheel.ErrBadPeriod, "period %v", p)
			_, err = s.Every(p, noop, shardwheel.ByKey(1), shardwheel.OnMissed(shardwheel.SkipMissed))
			assert.ErrorIs(t, err, shardwheel.ErrBadPeriod, "period %v", p)
		}
		_, err = s.Every(time.Second, nil, shardwheel.OnMissed(shardwheel.SkipMissed))
		assert.ErrorIs(t, err, shardwheel.ErrNilTask)
		_, err = s.AfterFunc(time.Second, nil, shardwheel.Slack(time.Second))
		assert.ErrorIs(t, err, shardwheel.ErrNilTask)
		_, err = (shardwheel.Handler{}).Every(1, time.Second)
		assert.ErrorIs(t, err, shardwheel.ErrNilTask)
		_, err = (shardwheel.Handler{}).AfterFunc(1, time.Second, shardwheel.Slack(time.Second))
		assert.ErrorIs(t, err, shardwheel.ErrNilTask)
	})
}

// TestMissedPoliciesAfterAStall tells the three policies apart by what a
// series does after its shard stalled (blockShard, on the real clock) for
// at least nine periods: a deficit, the grid points come by less the runs
// made, that SkipMissed keeps (one run served them all), BurstMissed
// makes up (a run each), and DelayMissed keeps too, its grid restarted a
// period after the run that caught up returned. Each bound it asserts
// follows from "never early" alone: the host's speed changes how long the
// test waits, never its outcome.
func TestMissedPoliciesAfterAStall(t *testing.T) {
	const period = 20 * time.Millisecond
	for _, policy := range missedPolicies {
		t.Run(policy.String(), func(t *testing.T) {
			s := newScheduler(t, shardwheel.WithShards(1), stall)
			var mu sync.Mutex
			var starts []time.Duration // of each run, since before the Every call
			var released atomic.Bool
			caughtUp := make(chan time.Duration, 1) // DelayMissed: the catching-up run's start
			finish := make(chan struct{})           // DelayMissed: lets that run return
			var returned atomic.Int64               // DelayMissed: when it returned, at the latest
			before := time.Now()
			since := func() time.Duration { return time.Since(before) }
			hb, err := s.Every(period, func() {
				at := since()
				mu.Lock()
				starts = append(starts, at)
				mu.Unlock()
				if policy == shardwheel.DelayMissed && released.Load() && len(caughtUp) == 0 && returned.Load() == 0 {
					caughtUp <- at
					<-finish
					returned.Store(int64(since()))
				}
			}, shardwheel.ByKey(1), shardwheel.OnMissed(policy))
			require.NoError(t, err)
			after := since() // the grid's anchor lies in [0, after]
			runs := func() int { mu.Lock(); defer mu.Unlock(); return len(starts) }
			defer func() {
				if t.Failed() {
					mu.Lock()
					defer mu.Unlock()
					t.Logf("runs started at %v (the Every call took %v)", starts, after)
				}
			}()
			last := func() time.Duration { mu.Lock(); defer mu.Unlock(); return starts[len(starts)-1] }
			// Grid points come by at since() = d: at least pointsLo(d), at
			// most pointsHi(d).
			pointsLo := func(d time.Duration) int { return int((d - after) / period) }
			pointsHi := func(d time.Duration) int { return int(d / period) }

			require.Eventually(t, func() bool { return runs() >= 2 }, waitFor, pollEvery, "the series runs")
			release := blockShard(t, s)
			n0 := runs()
			stalledFrom := last() // no run starts while the shard is blocked
			require.Eventually(t, func() bool { return since() >= stalledFrom+9*period }, waitFor, pollEvery)
			require.Equal(t, n0, runs(), "a run started while the shard was blocked")
			released.Store(true)
			release()

			switch policy {
			case shardwheel.SkipMissed:
				// The run that catches up, then one on the grid: the
				// nine points and more missed stay missed.
				require.Eventually(t, func() bool { return runs() >= n0+2 }, waitFor, pollEvery)
				r := runs()
				assert.LessOrEqual(t, r, pointsHi(since())-6, "SkipMissed made up missed points")
			case shardwheel.BurstMissed:
				// A run for every point missed: the deficit closes.
				require.Eventually(t, func() bool {
					d := since()
					return runs() >= pointsLo(d)-1
				}, waitFor, pollEvery, "BurstMissed never made up the missed points")
			case shardwheel.DelayMissed:
				var start time.Duration
				select {
				case start = <-caughtUp:
				case <-time.After(waitFor):
					t.Fatal("no run after the stall")
				}
				require.Equal(t, n0+1, runs(), "one run catches up")
				// Let it return halfway between two points of the old
				// grid, so that the old grid's next point comes well
				// before the new grid's first.
				require.Eventually(t, func() bool {
					phase := (since() - after) % period
					return phase >= 4*period/10 && phase <= 6*period/10
				}, waitFor, pollEvery)
				close(finish)
				require.Eventually(t, func() bool { return runs() >= n0+3 }, waitFor, pollEvery)
				end := time.Duration(returned.Load())
				require.Positive(t, end)
				mu.Lock()
				next, then := starts[n0+1], starts[n0+2]
				mu.Unlock()
				assert.GreaterOrEqual(t, next, end+period,
					"the grid restarts a period after the run that caught up returned (it started at %v)", start)
				assert.GreaterOrEqual(t, then, end+2*period, "and goes on from there")
				assert.LessOrEqual(t, runs(), pointsHi(since())-6, "DelayMissed made up missed points")
			}
			assert.Positive(t, s.Stats().Total.PeriodicMissed)
			require.True(t, hb.Cancel())
		})
	}
}

// TestEveryWithTheLongestPeriodNeverRunsEarly: a period beyond MaxDelay
// (math.MaxInt64 among them) is clamped to it, for the series' grid as for
// its first run: with every policy the series stays pending and never runs
// early (its grid arithmetic once overflowed, and such a series ran at
// once, again and again).
func TestEveryWithTheLongestPeriodNeverRunsEarly(t *testing.T) {
	for _, policy := range missedPolicies {
		s := newScheduler(t, shardwheel.WithShards(2), shardwheel.WithTick(time.Millisecond))
		for _, period := range []time.Duration{1<<63 - 1, 1 << 62, s.MaxDelay() + 1} {
			s := newScheduler(t, shardwheel.WithShards(2), shardwheel.WithTick(time.Millisecond))
			var ran atomic.Int32
			tm, err := s.Every(period, func() { ran.Add(1) }, shardwheel.ByKey(7), shardwheel.OnMissed(policy))
			require.NoError(t, err)
			time.Sleep(20 * time.Millisecond)
			assert.Zero(t, ran.Load(), "policy %v, period %v: ran early", policy, period)
			assert.True(t, tm.Pending())
			assert.Contains(t, s.Stop(), tm)
		}
	}
}

// TestEveryResetRacingTheEndMovesNoOtherSeries: a goroutine Resets, to a
// millisecond, the series another is about to Cancel and series it
// cancelled, while that one starts new series (hour-long, each live for
// thousands of calls) that take the ended series' nodes and records. A
// series that took up such a Reset's grid would run within the test
// without a Reset of its own.
func TestEveryResetRacingTheEndMovesNoOtherSeries(t *testing.T) {
	s := newScheduler(t)
	type series struct {
		handle     shardwheel.Timer
		resetTried atomic.Bool // set before a Reset of this series
	}
	const live, ended = 2048, 4096
	var wrong, staleTrue atomic.Int64
	var next atomic.Pointer[series] // the series to be cancelled next
	var cancelled [ended]atomic.Pointer[series]
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(1)
	go func() { // the resetter
		defer wg.Done()
		for i := uint64(0); ; i++ {
			select {
			case <-done:
				return
			default:
			}
			if p := next.Load(); p != nil && i%2 == 0 {
				p.resetTried.Store(true)
				p.handle.Reset(time.Millisecond)
			} else if p := cancelled[(i*2654435761)%ended].Load(); p != nil && p.handle.Reset(time.Millisecond) {
				staleTrue.Add(1)
			}
		}
	}()
	ring := make([]*series, live)
	for i := range 40 * live {
		p := new(series)
		var err error
		p.handle, err = s.Every(time.Hour, func() {
			if !p.resetTried.Load() {
				wrong.Add(1)
			}
		})
		require.NoError(t, err)
		if old := ring[i%live]; old != nil {
			next.Store(old)
			require.True(t, old.handle.Cancel())
			cancelled[i%ended].Store(old)
		}
		ring[i%live] = p
	}
	close(done)
	wg.Wait()
	for _, p := range ring {
		p.handle.Cancel()
	}
	assert.Zero(t, wrong.Load(), "series ran at a grid another series' Reset made")
	assert.Zero(t, staleTrue.Load(), "Resets of cancelled series returned true")
}

// TestFreeingSeriesBesideBusyPoolsAndGC: a series' node is often freed by
// a goroutine pinned to its P (a Cancel that takes the timer back, a
// producer holding the wheel), which must not block. Its record and a
// plan's state are kept for reuse there: were that a sync.Pool's Put, the
// first after a garbage collection takes a lock that other pools' first
// Puts hold, and a pinned goroutine parked on it stops the process
// ("schedule: holding locks"). Other goroutines make those pools and
// collections meanwhile.
func TestFreeingSeriesBesideBusyPoolsAndGC(t *testing.T) {
	s := newScheduler(t)
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range max(runtime.GOMAXPROCS(0)-1, 1) {
		wg.Go(func() {
			for !stop.Load() {
				new(sync.Pool).Put(new(int)) // its first Put takes the pools' lock
			}
		})
	}
	wg.Go(func() {
		for !stop.Load() {
			runtime.GC()
		}
	})
	plan := planFunc(func(prev time.Time) time.Time { return prev.Add(time.Hour) })
	for i := range 200_000 {
		var tm shardwheel.Timer
		var err error
		if i%4 == 0 {
			tm, err = s.OnPlan(plan, noop)
		} else {
			tm, err = s.Every(time.Hour, noop)
		}
		require.NoError(t, err)
		require.True(t, tm.Cancel()) // on this P: often taken back and freed at once, pinned
	}
	stop.Store(true)
	wg.Wait()
}
