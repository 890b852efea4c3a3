package shard

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel/pool"
)

// schedSeries schedules f every period on sh from now, by sh's clock.
func schedSeries(sh *Shard, key uint64, period time.Duration, missed uint8, f func()) (Ref, Reject) {
	return sh.Schedule(&Request{Key: key, Now: sh.clock.Now(), Task: Task{Func: f},
		Period: period, Missed: missed})
}

// stepBy advances the clock by d in moves of at most step, with a pass
// after each.
func (h *harness) stepBy(d, step time.Duration) {
	for ; d > 0; d -= step {
		h.clock.Advance(min(d, step))
		h.pass()
	}
}

var policies = []uint8{SkipMissed, BurstMissed, DelayMissed}

// TestSeriesRunsOnItsGrid: a series runs at start + k·period, never
// before, and no later than the first pass at or after that point's tick,
// for periods that are and are not multiples of the tick (no drift from
// rounding), from a start that is not on a tick.
func TestSeriesRunsOnItsGrid(t *testing.T) {
	for _, period := range []time.Duration{testTick, 3 * testTick, 2500 * time.Microsecond, 7*testTick + 300*time.Microsecond, 333 * time.Microsecond} {
		t.Run(period.String(), func(t *testing.T) {
			h := newHarness(t)
			h.clock.Advance(400 * time.Microsecond)
			h.pass()
			start := h.clock.Now()
			var runs []time.Duration
			r, rej := schedSeries(h.sh, 1, period, SkipMissed, func() { runs = append(runs, h.clock.Now()) })
			require.Equal(t, Accepted, rej)
			const step = 250 * time.Microsecond
			h.stepBy(200*testTick, step)
			require.NotEmpty(t, runs)
			k := 0
			for i, at := range runs {
				// With a period under a tick, Skip serves several
				// points per tick: the run serves the first not served.
				k++
				point := start + time.Duration(k)*period
				require.GreaterOrEqual(t, at, point, "run %d early", i)
				tickStart := h.sh.tickTime(h.sh.ceilTick(point))
				require.Less(t, at, tickStart+step, "run %d late: point %v", i, point)
				for start+time.Duration(k+1)*period <= at {
					k++ // points that came by the run: it served them all
				}
			}
			if period >= testTick {
				want, end := 0, h.clock.Now()
				for k := 1; h.sh.tickTime(h.sh.ceilTick(start+time.Duration(k)*period)) <= end; k++ {
					want++
				}
				require.Equal(t, want, len(runs), "one run per point come")
			}
			assert.True(t, h.sh.Pending(r))
			assert.EqualValues(t, 1, h.pending(), "a series is one timer")
			st := h.sh.statsNow()
			assert.EqualValues(t, len(runs), st.PeriodicRuns)
			assert.Zero(t, st.Fired, "runs are not fired timers")
			require.True(t, h.sh.Cancel(r))
			h.step(2 * period)
			assert.Zero(t, h.pending())
			assert.Zero(t, h.sh.h.w.count, "the node was freed")
		})
	}
}

// TestSeriesPolicies: a shard stalled for 5.5 periods, then each policy.
// Skip runs once and goes on at the next future point; Burst runs once per
// missed point, one a tick (each run files the next), then on the grid;
// Delay runs once and restarts the grid a period after the run. All count
// 4 missed points.
func TestSeriesPolicies(t *testing.T) {
	const period = 10 * testTick
	for _, policy := range policies {
		t.Run(fmt.Sprint(policy), func(t *testing.T) {
			h := newHarness(t)
			start := h.clock.Now()
			var runs []time.Duration
			_, rej := schedSeries(h.sh, 1, period, policy, func() { runs = append(runs, h.clock.Now()-start) })
			require.Equal(t, Accepted, rej)
			h.pass()
			h.clock.Advance(55 * testTick) // stalled: no pass
			h.pass()
			require.Equal(t, []time.Duration{55 * testTick}, runs)
			st := h.sh.statsNow()
			assert.EqualValues(t, 4, st.PeriodicMissed)
			assert.EqualValues(t, len(runs), st.PeriodicRuns)
			runs = nil
			h.step(30 * testTick)
			switch policy {
			case SkipMissed:
				require.Equal(t, []time.Duration{60 * testTick, 70 * testTick, 80 * testTick}, runs, "back on the grid")
			case BurstMissed:
				require.Equal(t, []time.Duration{56 * testTick, 57 * testTick, 58 * testTick, 59 * testTick, 60 * testTick, 70 * testTick, 80 * testTick},
					runs, "the missed points one a tick, then back on the grid")
			case DelayMissed:
				require.Equal(t, []time.Duration{65 * testTick, 75 * testTick, 85 * testTick}, runs, "the grid restarted at the run")
			}
			assert.EqualValues(t, 4, h.sh.statsNow().PeriodicMissed, "nothing missed on time")
		})
	}
}

// TestSeriesSlowTask: a task that takes 2.5 periods (it moves the clock
// itself) misses the points that come while it runs; the policy decides
// what comes next, and a run never begins before the last one returned.
func TestSeriesSlowTask(t *testing.T) {
	const period = 10 * testTick
	for _, policy := range policies {
		t.Run(fmt.Sprint(policy), func(t *testing.T) {
			h := newHarness(t)
			start := h.clock.Now()
			var runs []time.Duration
			slow := true
			_, rej := schedSeries(h.sh, 1, period, policy, func() {
				runs = append(runs, h.clock.Now()-start)
				if slow {
					slow = false
					h.clock.Advance(25 * testTick) // the task runs long
				}
			})
			require.Equal(t, Accepted, rej)
			for h.clock.Now()-start < 60*testTick {
				h.step(testTick)
			}
			switch policy {
			case SkipMissed:
				// 10 ran until 35: 20 and 30 missed, next at 40.
				require.Equal(t, []time.Duration{10 * testTick, 40 * testTick, 50 * testTick, 60 * testTick}, runs)
			case BurstMissed:
				// 20 and 30 run one a tick after 35, then 40...
				require.Equal(t, []time.Duration{10 * testTick, 36 * testTick, 37 * testTick, 40 * testTick, 50 * testTick, 60 * testTick}, runs)
			case DelayMissed:
				// the grid restarts at 35: 45, 55.
				require.Equal(t, []time.Duration{10 * testTick, 45 * testTick, 55 * testTick}, runs)
			}
			assert.EqualValues(t, 2, h.sh.statsNow().PeriodicMissed)
		})
	}
}

// TestSeriesBurstIsBounded: a series that can never catch up (its period
// is far below the tick) runs once a tick, each run filing the next, not
// forever, and the shard's other timers still run on time.
func TestSeriesBurstIsBounded(t *testing.T) {
	h := newHarness(t)
	runs := 0
	_, rej := schedSeries(h.sh, 1, time.Microsecond, BurstMissed, func() { runs++ })
	require.Equal(t, Accepted, rej)
	other := h.schedule(2, 3*testTick)
	h.step(testTick)
	require.Equal(t, 1, runs)
	h.step(2 * testTick)
	require.Equal(t, 3, runs)
	require.Contains(t, h.fired, 2, "the other timer ran at its tick")
	require.False(t, h.sh.Pending(other))
}

// TestSeriesCancel: Cancel ends a series between runs and during one (from
// its own task: true, the run finishes, none starts after), and a second
// Cancel returns false. The node is freed.
func TestSeriesCancel(t *testing.T) {
	for _, during := range []bool{false, true} {
		t.Run(fmt.Sprintf("during=%v", during), func(t *testing.T) {
			h := newHarness(t)
			var r Ref
			runs := 0
			var got []bool
			r, rej := schedSeries(h.sh, 1, 5*testTick, SkipMissed, func() {
				runs++
				if during && runs == 2 {
					got = append(got, h.sh.Cancel(r), h.sh.Cancel(r), h.sh.Pending(r))
				}
			})
			require.Equal(t, Accepted, rej)
			h.step(12 * testTick)
			require.Equal(t, 2, runs)
			if !during {
				got = append(got, h.sh.Cancel(r), h.sh.Cancel(r), h.sh.Pending(r))
			}
			require.Equal(t, []bool{true, false, false}, got)
			h.step(30 * testTick)
			require.Equal(t, 2, runs, "no run after the Cancel")
			assert.Zero(t, h.pending())
			assert.Zero(t, h.sh.h.w.count)
			st := h.sh.statsNow()
			assert.EqualValues(t, 1, st.Cancelled)
			assert.Zero(t, st.HeldCancelled, "the node was freed")
		})
	}
}

// TestSeriesReset: Reset restarts the grid from the call with the new
// period: later (found at the old slot) and earlier (the attention stack),
// between runs and from the series' own task; d <= 0 is refused.
func TestSeriesReset(t *testing.T) {
	for _, tc := range []struct {
		name   string
		during bool
		d      time.Duration
		want   []time.Duration
	}{
		{"later", false, 25 * testTick, []time.Duration{10 * testTick, 37 * testTick, 62 * testTick}},
		{"earlier", false, 3 * testTick, []time.Duration{10 * testTick, 15 * testTick, 18 * testTick, 21 * testTick, 24 * testTick, 27 * testTick, 30 * testTick}},
		{"in task", true, 7 * testTick, []time.Duration{10 * testTick, 17 * testTick, 24 * testTick, 31 * testTick}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			start := h.clock.Now()
			var r Ref
			var runs []time.Duration
			r, rej := schedSeries(h.sh, 1, 10*testTick, SkipMissed, func() {
				runs = append(runs, h.clock.Now()-start)
				if tc.during && len(runs) == 1 {
					require.True(t, h.sh.Reset(r, 0, tc.d))
				}
			})
			require.Equal(t, Accepted, rej)
			h.step(12 * testTick)
			if !tc.during {
				require.False(t, h.sh.Reset(r, 0, 0), "a period <= 0 is refused")
				require.False(t, h.sh.Reset(r, 0, -testTick))
				require.True(t, h.sh.Reset(r, 0, tc.d))
			}
			for h.clock.Now()-start < tc.want[len(tc.want)-1] {
				h.step(testTick)
			}
			require.Equal(t, tc.want, runs)
			require.True(t, h.sh.Pending(r))
		})
	}
}

// TestSeriesQueued: a series scheduled while the wheel is held waits in
// the queue like any timer, and a Reset meanwhile is what the holder
// files.
func TestSeriesQueued(t *testing.T) {
	h := newHarness(t)
	start := h.clock.Now()
	unhold := holdWheel(t, h.sh)
	var runs []time.Duration
	r, rej := schedSeries(h.sh, 1, 10*testTick, SkipMissed, func() { runs = append(runs, h.clock.Now()-start) })
	require.Equal(t, Accepted, rej)
	r2, rej := schedSeries(h.sh, 2, 10*testTick, SkipMissed, func() {})
	require.Equal(t, Accepted, rej)
	require.True(t, h.sh.Reset(r2, 0, 4*testTick))
	unhold()
	h.step(25 * testTick)
	require.Equal(t, []time.Duration{10 * testTick, 20 * testTick}, runs)
	require.EqualValues(t, 8, h.sh.statsNow().PeriodicRuns, "2 + 6 runs of the reset one")
	require.True(t, h.sh.Cancel(r))
	require.True(t, h.sh.Cancel(r2))
}

// executorHarness is a harness whose executor keeps the runs it is given
// until the test runs them: a run may then return ticks after the shard
// handed it over.
func executorHarness(t *testing.T) (*harness, *[]func()) {
	var held []func()
	h := newHarness(t, func(c *Config) { c.Run = func(f func()) { held = append(held, f) } })
	return h, &held
}

// TestSeriesExecutorNeverOverlaps: with an executor, a series' next run
// begins only after the executor's run returned, however many grid points
// pass meanwhile; then the policy applies, counted by the run.
func TestSeriesExecutorNeverOverlaps(t *testing.T) {
	const period = 10 * testTick
	for _, policy := range policies {
		t.Run(fmt.Sprint(policy), func(t *testing.T) {
			h, held := executorHarness(t)
			start := h.clock.Now()
			var runs []time.Duration
			r, rej := schedSeries(h.sh, 1, period, policy, func() { runs = append(runs, h.clock.Now()-start) })
			require.Equal(t, Accepted, rej)
			h.step(10 * testTick)
			require.Len(t, *held, 1, "handed over at its point")
			h.step(45 * testTick) // the executor sits on the run: 20..50 pass
			require.Len(t, *held, 1, "no run while one is in flight")
			run, _ := h.sh.running(r)
			require.True(t, run)
			f := (*held)[0]
			*held = nil
			f() // the task runs at 55 and returns: the series goes back to the wheel
			run, _ = h.sh.running(r)
			require.False(t, run)
			require.EqualValues(t, 4, h.sh.statsNow().PeriodicMissed)
			h.pass()
			// Drain the executor at each pass from here on.
			for h.clock.Now()-start < 90*testTick {
				h.step(testTick)
				for len(*held) > 0 {
					f := (*held)[0]
					*held = (*held)[1:]
					f()
					h.pass()
				}
			}
			switch policy {
			case SkipMissed:
				require.Equal(t, []time.Duration{55 * testTick, 60 * testTick, 70 * testTick, 80 * testTick, 90 * testTick}, runs)
			case BurstMissed:
				// 20, 30, 40, 50 back to back (one pass each), then on the grid.
				require.Equal(t, []time.Duration{55 * testTick, 56 * testTick, 56 * testTick, 56 * testTick, 56 * testTick, 60 * testTick, 70 * testTick, 80 * testTick, 90 * testTick}, runs)
			case DelayMissed:
				require.Equal(t, []time.Duration{55 * testTick, 65 * testTick, 75 * testTick, 85 * testTick}, runs)
			}
			require.True(t, h.sh.Cancel(r))
			h.step(2 * period)
			require.Empty(t, *held)
			assert.Zero(t, h.pending())
			assert.Zero(t, h.sh.h.w.count)
		})
	}
}

// TestSeriesExecutorCancelInFlight: a series cancelled while its executor
// holds its run: true, the run still runs, and its end frees the node
// instead of filing it; a Cancel racing the run's end (cancelling) too.
func TestSeriesExecutorCancelInFlight(t *testing.T) {
	for _, midCancel := range []bool{false, true} {
		t.Run(fmt.Sprintf("cancelling=%v", midCancel), func(t *testing.T) {
			h, held := executorHarness(t)
			runs := 0
			r, rej := schedSeries(h.sh, 1, 5*testTick, SkipMissed, func() { runs++ })
			require.Equal(t, Accepted, rej)
			h.step(5 * testTick)
			require.Len(t, *held, 1)
			n := h.sh.arena.Node(r.idx)
			if midCancel {
				// A Cancel stopped between its two CASes.
				s := state(n.State.Load())
				cs, ok, _ := cancel(n, s, 0)
				require.True(t, ok)
				(*held)[0]()
				endCancel(n, cs)
				h.sh.cancelled(0)
			} else {
				require.True(t, h.sh.Cancel(r))
				require.False(t, h.sh.Pending(r))
				(*held)[0]()
			}
			require.Equal(t, 1, runs, "the run in progress finishes")
			h.step(20 * testTick)
			require.Equal(t, 1, runs)
			assert.Zero(t, h.pending())
			assert.Zero(t, h.sh.h.w.count)
			assert.Zero(t, h.sh.statsNow().HeldCancelled, "freed")
		})
	}
}

// TestSeriesDrain: Stop claims a pending series and a running one, once,
// and a claimed series never runs again. The pending one is passed to
// keep with its task; the one whose run the executor holds is not: that
// run, which returns after Stop, is its last, and nobody is given its
// task to run a second time.
func TestSeriesDrain(t *testing.T) {
	h, held := executorHarness(t)
	ran := 0
	r1, _ := schedSeries(h.sh, 1, 5*testTick, SkipMissed, func() { ran++ })
	r2, _ := schedSeries(h.sh, 2, 50*testTick, SkipMissed, func() { ran++ })
	h.step(5 * testTick)
	require.Len(t, *held, 1)
	running, _ := h.sh.running(r1)
	require.True(t, running)
	h.sh.Close()
	claimed := map[Ref]bool{}
	h.sh.Drain(func(r Ref, _ uint64, _ time.Duration, task Task) bool {
		require.False(t, claimed[r])
		require.NotNil(t, task.Func)
		claimed[r] = true
		return true
	})
	require.Equal(t, map[Ref]bool{r2: true}, claimed)
	require.False(t, h.sh.Pending(r1), "claimed all the same")
	(*held)[0]() // the run in flight returns after Stop
	require.Equal(t, 1, ran)
	require.False(t, h.sh.Pending(r1))
	require.False(t, h.sh.Pending(r2))
	require.Nil(t, h.sh.Claimed(r1).Func)
	require.NotNil(t, h.sh.Claimed(r2).Func)
	require.EqualValues(t, 2, h.sh.Stats().Stopped)
}

// TestSeriesAllocatesNothingPerRun: after its start, a series' runs
// allocate nothing, inline or with an executor.
func TestSeriesAllocatesNothingPerRun(t *testing.T) {
	for _, exec := range []bool{false, true} {
		t.Run(fmt.Sprintf("executor=%v", exec), func(t *testing.T) {
			h := newHarness(t, func(c *Config) {
				if exec {
					c.Run = func(f func()) { f() }
				}
			})
			runs := 0
			_, rej := schedSeries(h.sh, 1, testTick, SkipMissed, func() { runs++ })
			require.Equal(t, Accepted, rej)
			h.step(10 * testTick) // warm up
			allocs := testing.AllocsPerRun(200, func() { h.step(testTick) })
			if exec && !cheapGoroutineToken {
				assert.LessOrEqual(t, allocs, 1.0, "the run's goroutine token alone")
			} else {
				assert.Zero(t, allocs)
			}
			assert.GreaterOrEqual(t, runs, 210)
		})
	}
}

// A run is in Stats from the moment it starts, as a fired timer is: the
// pass may go on holding the wheel after it (with Stats then showing the
// figures published before the pass), and a caller whose CancelWait saw
// the run end must find it counted.
func TestSeriesRunIsCountedWhenItStarts(t *testing.T) {
	for _, missed := range []uint8{SkipMissed, BurstMissed} {
		t.Run(fmt.Sprintf("missed=%d", missed), func(t *testing.T) {
			h := newHarness(t)
			runs := uint64(0)
			_, rej := schedSeries(h.sh, 1, testTick, missed, func() {
				runs++
				assert.Equal(t, runs, h.sh.statsNow().PeriodicRuns, "seen from inside run %d", runs)
			})
			require.Equal(t, Accepted, rej)
			h.step(3 * testTick)
			h.clock.Advance(3 * testTick) // missed points: a burst runs them back to back
			h.pass()
			require.GreaterOrEqual(t, runs, uint64(4))
		})
	}
}

// TestSeriesRecordReuse: an ended series' record serves a later series,
// and neither a Reset of the ended one's stale Ref nor a grid it stored
// late (a Reset that raced its end: its CAS lands in the record's next
// life) moves the later series off its own grid; the later series' own
// Reset still takes.
func TestSeriesRecordReuse(t *testing.T) {
	h := newHarness(t)
	// b takes a's node, and with it a's record (the free list may hand
	// out another node first: try a few times).
	var runs []time.Duration
	var a, b Ref
	var recA *pool.Series
	var start time.Duration
	for range 100 {
		var rej Reject
		a, rej = schedSeries(h.sh, 1, 5*testTick, SkipMissed, func() {})
		require.Equal(t, Accepted, rej)
		recA = h.sh.arena.Slot(a.idx).FindSeries()
		require.NotNil(t, recA)
		require.True(t, h.sh.Cancel(a))
		h.step(10 * testTick) // frees a's node: the record goes back
		require.Nil(t, h.sh.arena.Slot(a.idx).FindSeries())

		start, runs = h.clock.Now(), runs[:0]
		b, rej = schedSeries(h.sh, 2, 7*testTick, SkipMissed, func() { runs = append(runs, h.clock.Now()) })
		require.Equal(t, Accepted, rej)
		if h.sh.arena.Slot(b.idx).FindSeries() == recA {
			break
		}
		require.True(t, h.sh.Cancel(b))
		h.step(10 * testTick)
	}
	require.Same(t, recA, h.sh.arena.Slot(b.idx).FindSeries(), "the record is reused")
	require.Zero(t, start%testTick, "the harness steps by ticks")

	assert.False(t, h.sh.Reset(a, 1, testTick), "a stale Ref's Reset")
	// What a Reset of a that raced its end may leave: a's grid, CASed
	// into the record after its reuse.
	recA.Grid.Store(&pool.Grid{Life: a.gen, Anchor: int64(h.clock.Now()), Period: int64(testTick)})
	h.stepBy(30*testTick, testTick)
	assert.Equal(t, []time.Duration{start + 7*testTick, start + 14*testTick, start + 21*testTick, start + 28*testTick}, runs,
		"b keeps its own grid")

	// b's own Reset replaces the foreign grid.
	runs = runs[:0]
	resetAt := h.clock.Now()
	require.True(t, h.sh.Reset(b, 2, 3*testTick))
	h.stepBy(10*testTick, testTick)
	assert.Equal(t, []time.Duration{resetAt + 3*testTick, resetAt + 6*testTick, resetAt + 9*testTick}, runs,
		"b's Reset takes")
	require.True(t, h.sh.Cancel(b))
}
