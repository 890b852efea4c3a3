package shardwheel_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
)

// listPlan gives the first of its points after prev, and the zero Time
// after the last; it records the prevs it was asked about.
type listPlan struct {
	mu     sync.Mutex
	points []time.Time
	asked  []time.Time
}

func (p *listPlan) Next(prev time.Time) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked = append(p.asked, prev)
	for _, t := range p.points {
		if t.After(prev) {
			return t
		}
	}
	return time.Time{}
}

// A series on a plan runs at each of its points, never earlier and within
// two ticks after (a bubble's clock: no wall-clock verdict), asks the plan
// with the point each run was planned for, and ends when the plan gives
// the zero Time, counted as cancelled.
func TestOnPlanRunsAtItsPoints(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := shardwheel.New(shardwheel.WithShards(2))
		require.NoError(t, err)
		defer s.Stop()
		start := time.Now()
		offsets := []time.Duration{3 * time.Millisecond, 10 * time.Millisecond, 11 * time.Millisecond,
			40 * time.Millisecond, 41 * time.Millisecond, 200 * time.Millisecond, 3 * time.Hour}
		plan := &listPlan{}
		for _, d := range offsets {
			plan.points = append(plan.points, start.Add(d))
		}
		var mu sync.Mutex
		var ran []time.Time
		tm, err := s.OnPlan(plan, func() {
			mu.Lock()
			ran = append(ran, time.Now())
			mu.Unlock()
		})
		require.NoError(t, err)
		time.Sleep(4 * time.Hour)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, ran, len(offsets))
		for i, at := range ran {
			assert.False(t, at.Before(plan.points[i]), "run %d early by %v", i, plan.points[i].Sub(at))
			assert.Less(t, at.Sub(plan.points[i]), 2*s.Tick(), "run %d late", i)
		}
		plan.mu.Lock()
		assert.Equal(t, append([]time.Time{start}, plan.points...), plan.asked, "Next hears the planned points")
		plan.mu.Unlock()
		assert.False(t, tm.Pending(), "the zero Time ended the series")
		st := s.Stats().Total
		assert.Equal(t, uint64(len(offsets)), st.PeriodicRuns)
		assert.Equal(t, uint64(1), st.Cancelled)
		assert.Zero(t, s.Pending())
	})
}

// planFunc adapts a function to Plan.
type planFunc func(prev time.Time) time.Time

func (f planFunc) Next(prev time.Time) time.Time { return f(prev) }

// Reset moves a plan's next run to delay from the call, and the plan goes
// on from that point; Cancel ends the series and CancelWait finds it
// ended.
func TestOnPlanReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := shardwheel.New(shardwheel.WithShards(1))
		require.NoError(t, err)
		defer s.Stop()
		var mu sync.Mutex
		var ran []time.Time
		tm, err := s.OnPlan(planFunc(func(prev time.Time) time.Time { return prev.Add(100 * time.Millisecond) }), func() {
			mu.Lock()
			ran = append(ran, time.Now())
			mu.Unlock()
		})
		require.NoError(t, err)
		time.Sleep(150 * time.Millisecond) // one run, at 100ms
		synctest.Wait()
		resetAt := time.Now()
		require.True(t, tm.Reset(30*time.Millisecond))
		time.Sleep(200 * time.Millisecond) // runs at reset+30ms and reset+130ms
		synctest.Wait()
		require.True(t, tm.Cancel())
		cancelled, err := tm.CancelWait(context.Background())
		require.NoError(t, err)
		assert.False(t, cancelled, "already ended")
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, ran, 3)
		for i, want := range []time.Time{resetAt.Add(30 * time.Millisecond), resetAt.Add(130 * time.Millisecond)} {
			at := ran[i+1]
			assert.False(t, at.Before(want), "run %d early", i+1)
			assert.Less(t, at.Sub(want), 2*s.Tick(), "run %d late", i+1)
		}
	})
}

// A plan whose point is not after its run's end runs at the next tick,
// each tick; a task may cancel its own series.
func TestOnPlanPointsInThePastRunAtTheNextTick(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(1), shardwheel.WithTick(time.Millisecond))
	var runs atomic.Int32
	var self atomic.Pointer[shardwheel.Timer]
	ready := make(chan struct{})
	tm, err := s.OnPlan(planFunc(func(prev time.Time) time.Time { return prev }), func() {
		<-ready
		if runs.Add(1) == 5 {
			assert.True(t, self.Load().Cancel())
		}
	})
	require.NoError(t, err)
	self.Store(&tm)
	close(ready)
	require.Eventually(t, func() bool { return !tm.Pending() }, waitFor, pollEvery)
	assert.Equal(t, int32(5), runs.Load())
}

// A Next that panics ends the series, and its panic is reported beside
// the task's own, both counted in Stats; a task's panic alone lets the
// plan choose.
func TestOnPlanNextPanics(t *testing.T) {
	panics := make(chan any, 4)
	s := newScheduler(t, shardwheel.WithShards(1), shardwheel.WithTick(time.Millisecond),
		shardwheel.WithPanicHandler(func(v any) { panics <- v }))
	var calls, runs atomic.Int32
	plan := planFunc(func(prev time.Time) time.Time {
		if calls.Add(1) == 3 {
			panic("plan broke")
		}
		return prev.Add(time.Millisecond)
	})
	tm, err := s.OnPlan(plan, func() {
		if runs.Add(1) <= 2 {
			panic(fmt.Sprint("task broke ", runs.Load()))
		}
	})
	require.NoError(t, err)
	var got []any
	for range 3 {
		select {
		case v := <-panics:
			got = append(got, v)
		case <-time.After(waitFor):
			t.Fatalf("panics reported: %v", got)
		}
	}
	// Run 2's task and plan both panicked: both are reported, in either
	// order after run 1's.
	assert.Equal(t, "task broke 1", got[0])
	assert.ElementsMatch(t, []any{"task broke 2", "plan broke"}, got[1:])
	require.Eventually(t, func() bool { return !tm.Pending() }, waitFor, pollEvery, "the plan's panic ended the series")
	assert.False(t, tm.Cancel())
	assert.Equal(t, int32(2), runs.Load())
	assert.Equal(t, int32(3), calls.Load())
	require.Eventually(t, func() bool { return s.Stats().Total.Panics == 3 }, waitFor, pollEvery)
}

// Outside a bubble too, Next hears exactly the point it returned for the
// run that just ran, and the first run's prev is the call's time; a point
// already passed (an hour ago, or in year 1) runs at once, and the next
// Next still hears it.
func TestOnPlanNextHearsItsOwnPoints(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(1), shardwheel.WithTick(time.Millisecond))
	var mu sync.Mutex
	var asked, gave []time.Time
	steps := []func(prev time.Time) time.Time{
		func(prev time.Time) time.Time { return prev.Add(-time.Hour) },
		func(prev time.Time) time.Time { return prev.Add(time.Hour + 3*time.Millisecond) },
		func(prev time.Time) time.Time { return time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC) },
		func(prev time.Time) time.Time { return time.Now().Add(2 * time.Millisecond) },
		func(prev time.Time) time.Time { return time.Time{} },
	}
	plan := planFunc(func(prev time.Time) time.Time {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, prev)
		next := steps[len(asked)-1](prev)
		gave = append(gave, next)
		return next
	})
	before := time.Now()
	tm, err := s.OnPlan(plan, noop)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return !tm.Pending() }, waitFor, pollEvery)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, asked, len(steps))
	assert.False(t, asked[0].Before(before), "the first prev is the call's time")
	for i := 1; i < len(steps)-1; i++ {
		if i == 3 {
			continue // year 1 is further back than MaxDelay: brought in
		}
		assert.True(t, asked[i].Equal(gave[i-1]), "Next %d heard %v, not the point %v it gave", i, asked[i], gave[i-1])
	}
}

// Once Stop has begun a plan's series runs no more: the task of a series
// Stop returned runs alone, without asking the plan.
func TestOnPlanTaskAfterStopAsksNoPlan(t *testing.T) {
	s, err := shardwheel.New(shardwheel.WithShards(1))
	require.NoError(t, err)
	var calls, runs atomic.Int32
	tm, err := s.OnPlan(planFunc(func(prev time.Time) time.Time { calls.Add(1); return prev.Add(time.Hour) }),
		func() { runs.Add(1) })
	require.NoError(t, err)
	left := s.Stop()
	require.Equal(t, []shardwheel.Timer{tm}, left)
	task := tm.Task()
	require.NotNil(t, task)
	task()
	assert.Equal(t, int32(1), runs.Load())
	assert.Equal(t, int32(1), calls.Load(), "only OnPlan's call for the first point")
}

// Options that do not apply, a nil plan, a plan with no first point and a
// nil task are refused, naming the call; after Stop, ErrStopped. ByKey
// files the series on its key's shard.
func TestOnPlanErrorsAndPlacement(t *testing.T) {
	s, err := shardwheel.New(shardwheel.WithShards(4), shardwheel.WithTick(time.Millisecond))
	require.NoError(t, err)
	every := planFunc(func(prev time.Time) time.Time { return prev.Add(time.Millisecond) })
	for name, call := range map[string]func() (shardwheel.Timer, error){
		"OnMissed": func() (shardwheel.Timer, error) {
			return s.OnPlan(every, noop, shardwheel.OnMissed(shardwheel.BurstMissed))
		},
		"Slack":    func() (shardwheel.Timer, error) { return s.OnPlan(every, noop, shardwheel.Slack(time.Millisecond)) },
		"nil plan": func() (shardwheel.Timer, error) { return s.OnPlan(nil, noop) },
		"no first": func() (shardwheel.Timer, error) {
			return s.OnPlan(planFunc(func(time.Time) time.Time { return time.Time{} }), noop)
		},
	} {
		_, err := call()
		require.ErrorIs(t, err, shardwheel.ErrInvalidOption, name)
		assert.Contains(t, err.Error(), "OnPlan", name)
	}
	_, err = s.OnPlan(every, nil)
	assert.ErrorIs(t, err, shardwheel.ErrNilTask)
	assert.Zero(t, s.Pending(), "a refused call schedules nothing")

	// A first run at once, then an hour's wait: Stop finds the series
	// filed, not handed to its runner (it would keep that run).
	var first atomic.Bool
	once := planFunc(func(prev time.Time) time.Time {
		if first.CompareAndSwap(false, true) {
			return prev.Add(time.Millisecond)
		}
		return prev.Add(time.Hour)
	})
	ranOn := make(chan int, 1)
	tm, err := s.OnPlan(once, func() { ranOn <- shardwheel.RunningShard(s) }, shardwheel.ByKey(9))
	require.NoError(t, err)
	assert.Equal(t, uint64(9), tm.Key())
	select {
	case got := <-ranOn:
		assert.Equal(t, s.ShardOf(9), got)
	case <-time.After(waitFor):
		t.Fatal("the series never ran")
	}
	require.Eventually(t, func() bool { return time.Until(tm.Deadline()) > 30*time.Minute }, waitFor, pollEvery,
		"filed an hour on")
	left := s.Stop()
	assert.Contains(t, left, tm, "Stop returns a live plan's series")
	_, err = s.OnPlan(every, noop)
	assert.ErrorIs(t, err, shardwheel.ErrStopped)
}

// backoff doubles the wait after each run, from 10ms.
type backoff struct{ wait time.Duration }

func (b *backoff) Next(prev time.Time) time.Time {
	if b.wait == 0 {
		b.wait = 10 * time.Millisecond
	} else {
		b.wait *= 2
	}
	return prev.Add(b.wait)
}

// A retry with exponential backoff: the plan chooses each next point;
// the task ends the series once it succeeds.
func ExampleScheduler_OnPlan() {
	s, err := shardwheel.New()
	if err != nil {
		panic(err)
	}
	defer s.Stop()
	done := make(chan struct{})
	var attempts int
	var retry shardwheel.Timer
	ready := make(chan struct{})
	retry, err = s.OnPlan(&backoff{}, func() {
		<-ready
		attempts++
		fmt.Println("attempt", attempts)
		if attempts == 3 { // it worked
			retry.Cancel()
			close(done)
		}
	})
	if err != nil {
		panic(err)
	}
	close(ready)
	<-done
	// Output:
	// attempt 1
	// attempt 2
	// attempt 3
}

// A point beyond MaxDelay from the run is brought in to MaxDelay, as a
// delay is for AfterFunc.
func TestOnPlanFarPointsAreBroughtIn(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(1), shardwheel.WithTick(time.Millisecond))
	var asked atomic.Int32
	far := 200 * 365 * 24 * time.Hour
	plan := planFunc(func(prev time.Time) time.Time {
		if asked.Add(1) == 1 {
			return prev.Add(time.Millisecond)
		}
		return prev.Add(far)
	})
	var runs atomic.Int32
	tm, err := s.OnPlan(plan, func() { runs.Add(1) })
	require.NoError(t, err)
	require.Eventually(t, func() bool { return runs.Load() == 1 && asked.Load() == 2 }, waitFor, pollEvery)
	require.Eventually(t, func() bool { return time.Until(tm.Deadline()) > time.Hour }, waitFor, pollEvery, "filed at its next point")
	assert.LessOrEqual(t, time.Until(tm.Deadline()), s.MaxDelay()+2*s.Tick())
	assert.Greater(t, far, s.MaxDelay(), "the test's point is beyond MaxDelay")
	assert.True(t, tm.Cancel())
}
