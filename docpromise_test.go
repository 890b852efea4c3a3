package shardwheel_test

// Hostile tests of the promises of README.md and the doc comments, written
// by a reviewer against the documentation rather than the code.

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
	"github.com/shardwheel/shardwheel/shard"
)

// "Schedule(key, delay, task) runs task once, no earlier than the call plus
// delay on the monotonic clock ... Deadlines are rounded up to the tick grid."
// "Deadline returns when the timer is due ... it may be up to a tick after
// schedule time plus delay."
func TestDocDeadlineAnchoredAtTheCall(t *testing.T) {
	for _, tick := range []time.Duration{shardwheel.DefaultTick, 7 * time.Millisecond} {
		s := newScheduler(t, shardwheel.WithShards(1), shardwheel.WithTick(tick))
		const n = 20
		var wg sync.WaitGroup
		wg.Add(n)
		early := atomic.Int32{}
		for i := range n {
			delay := time.Duration(i) * time.Millisecond
			before := time.Now()
			var tm shardwheel.Timeout
			var err error
			tm, err = s.Schedule(uint64(i), delay, func() {
				if time.Since(before) < delay {
					early.Add(1)
				}
				wg.Done()
			})
			after := time.Now()
			require.NoError(t, err)
			if d := tm.Deadline(); !d.IsZero() {
				assert.False(t, d.Before(before.Add(delay)), "Deadline before call+delay (tick %v, delay %v)", tick, delay)
				assert.True(t, d.Before(after.Add(delay+tick)), "Deadline a tick or more after call+delay (tick %v, delay %v): %v", tick, delay, d.Sub(after.Add(delay)))
			}
		}
		wg.Wait()
		assert.Zero(t, early.Load(), "tasks ran early at tick %v", tick)
	}
}

// "delay <= 0: Runs at the first tick that starts at or after the call: the
// next tick". So a delay-0 timer runs at most a tick after the call (plus
// lag), and its Deadline is within a tick of the call.
func TestDocNonPositiveDelayRunsWithinATick(t *testing.T) {
	const tick = 100 * time.Millisecond
	s := newScheduler(t, shardwheel.WithShards(1), shardwheel.WithTick(tick))
	for _, d := range []time.Duration{0, -time.Hour, -1 << 63} {
		ran := make(chan time.Duration, 1)
		before := time.Now()
		tm, err := s.Schedule(1, d, func() { ran <- time.Since(before) })
		require.NoError(t, err)
		if dl := tm.Deadline(); !dl.IsZero() {
			assert.False(t, dl.Before(before), "delay %v: Deadline before the call", d)
			assert.True(t, dl.Before(time.Now().Add(tick)), "delay %v: Deadline a tick or more after the call: %v", d, time.Until(dl))
		}
		select {
		case took := <-ran:
			assert.Less(t, took, tick+50*time.Millisecond, "delay %v ran %v after the call", d, took)
		case <-time.After(waitFor):
			t.Fatalf("delay %v never ran", d)
		}
	}
}

// "WithTick(d) | 1ms" and "DefaultTick is 1ms".
func TestDocDefaultTick(t *testing.T) {
	assert.Equal(t, time.Millisecond, shardwheel.DefaultTick)
	s := newScheduler(t)
	assert.Equal(t, shardwheel.DefaultTick, s.Tick())
	// "2^36 ticks": in fact 2^36-2, a margin the README rounds away
	assert.Equal(t, time.Duration(1<<36-2)*time.Millisecond, s.MaxDelay())
	s10 := newScheduler(t, shardwheel.WithTick(10*time.Millisecond))
	assert.Equal(t, time.Duration(1<<36-2)*10*time.Millisecond, s10.MaxDelay())
	// "795 days at the default 1ms, 21.8 years at 10ms"
	assert.InDelta(t, 795.0, s.MaxDelay().Hours()/24, 0.6)
	assert.InDelta(t, 21.8, s10.MaxDelay().Hours()/24/365.25, 0.05)
}

// "WithWheelSize(n) | 512 | 2..65536, rounded up to a power of two | (4 at
// least: sizes 2 and 4 both use 4)": every valid size is accepted and
// timers at every level of such a wheel run once, never early.
func TestDocTinyWheelsWork(t *testing.T) {
	for _, size := range []int{2, 3, 4, 5} {
		s := newScheduler(t, shardwheel.WithShards(1), shardwheel.WithWheelSize(size))
		var wg sync.WaitGroup
		early, runs := atomic.Int32{}, atomic.Int32{}
		for _, ms := range []int{0, 1, 2, 3, 5, 9, 17, 33, 70, 130} {
			delay := time.Duration(ms) * time.Millisecond
			before := time.Now()
			wg.Add(1)
			_, err := s.Schedule(uint64(ms), delay, func() {
				if time.Since(before) < delay {
					early.Add(1)
				}
				runs.Add(1)
				wg.Done()
			})
			require.NoError(t, err)
		}
		wg.Wait()
		assert.Zero(t, early.Load(), "size %d", size)
		assert.EqualValues(t, 10, runs.Load(), "size %d", size)
		// counters are published once per pass, after the pass's tasks
		require.Eventually(t, func() bool { return s.Stats().Total.Fired == 10 }, waitFor, pollEvery)
		st := s.Stats()
		assert.Positive(t, st.Total.Refiled, "size %d: a 130ms timer in a 4-slot wheel must cascade", size)
		assert.LessOrEqual(t, uint64(st.Total.RefiledPeak), st.Total.Refiled)
	}
}

// "tick lag (how late a shard started a tick it planned to wake for; a
// shard parked with nothing due plans none, so an idle pause is not lag)"
func TestDocIdlePauseIsNotTickLag(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(1), shardwheel.WithTick(time.Millisecond))
	for range 3 {
		time.Sleep(150 * time.Millisecond) // idle: the shard parks
		done := make(chan struct{})
		_, err := s.Schedule(1, 0, func() { close(done) })
		require.NoError(t, err)
		<-done
	}
	st := s.Stats().Total
	assert.Less(t, st.TickLag.Max(), int64(100*time.Millisecond), "idle pauses show as tick lag: %v", time.Duration(st.TickLag.Max()))
}

// "lateness (how late tasks started against their deadline's tick ...)":
// a timer that waited its delay out is not late by its delay.
func TestDocLatenessIsFromTheDeadlineTick(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(1))
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		_, err := s.Schedule(uint64(i), 100*time.Millisecond, wg.Done)
		require.NoError(t, err)
	}
	wg.Wait()
	require.Eventually(t, func() bool { return s.Stats().Total.Lateness.Count() == 20 }, waitFor, pollEvery)
	st := s.Stats().Total
	assert.Less(t, st.Lateness.Max(), int64(80*time.Millisecond), "lateness counts the delay: %v", time.Duration(st.Lateness.Max()))
}

// "PassTime is how long each pass took"; "SlowestPass is the longest pass
// the worker made and what it did"; "Total adds up the shards: counts sum,
// peaks take the maximum"; with Stats off SlowestPass.Duration is zero.
func TestDocPassTimeAndSlowestPass(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(2))
	var wg sync.WaitGroup
	for i := range 2000 {
		wg.Add(1)
		_, err := s.Schedule(uint64(i), time.Duration(i%50)*time.Millisecond, wg.Done)
		require.NoError(t, err)
	}
	wg.Wait()
	require.Eventually(t, func() bool { return s.Stats().Total.Fired == 2000 }, waitFor, pollEvery)
	st := s.Stats()
	require.Positive(t, st.Total.PassTime.Count())
	sp := st.Total.SlowestPass
	assert.Positive(t, sp.Duration)
	// the slowest pass is the largest recorded pass time (histogram error < 1/64)
	assert.InEpsilon(t, float64(st.Total.PassTime.Max()), float64(sp.Duration), 1.0/32)
	assert.Positive(t, sp.Transferred+sp.Refiled+sp.Fired, "the slowest pass did nothing?")
	var fired uint64
	maxPeak := 0
	for _, sh := range st.Shards {
		fired += sh.Fired
		maxPeak = max(maxPeak, sh.RefiledPeak)
		assert.LessOrEqual(t, sh.SlowestPass.Duration, sp.Duration)
	}
	assert.Equal(t, fired, st.Total.Fired)
	assert.Equal(t, maxPeak, st.Total.RefiledPeak)
	assert.EqualValues(t, 2000, st.Total.Fired)

	off := newScheduler(t, shardwheel.WithShards(1), shardwheel.WithStats(false))
	done := make(chan struct{})
	_, err := off.Schedule(1, 0, func() { close(done) })
	require.NoError(t, err)
	<-done
	require.Eventually(t, func() bool { return off.Stats().Total.Fired == 1 }, waitFor, pollEvery)
	ost := off.Stats().Total
	assert.Zero(t, ost.SlowestPass.Duration)
	assert.Zero(t, ost.PassTime.Count())
	assert.EqualValues(t, 1, ost.Fired)
}

// "Pending limit never exceeded; rejected calls leave no trace; no token
// lost" and "the flag that makes it so never hides a returned token": once
// a timer has ended (ran, cancelled, cancelled by key), the very next
// Schedule on any shard succeeds.
func TestDocFreedTokenIsFoundAtOnce(t *testing.T) {
	const shards = 4
	s := newScheduler(t, shardwheel.WithShards(shards), shardwheel.WithMaxPending(1))
	keys := make([][]uint64, shards)
	for i := range shards {
		keys[i] = keysFor(s, i, 1)
	}
	for round := range 200 {
		from, to := round%shards, (round*3+1)%shards
		tm, err := s.Schedule(keys[from][0], time.Hour, noop)
		require.NoError(t, err, "round %d", round)
		before := s.Stats().Total
		_, err = s.Schedule(keys[to][0], time.Hour, noop)
		require.ErrorIs(t, err, shardwheel.ErrTooManyPending, "round %d", round)
		_, err = s.ScheduleKey(keys[to][0], time.Hour, noop)
		require.ErrorIs(t, err, shardwheel.ErrTooManyPending, "round %d", round)
		after := s.Stats().Total
		assert.Equal(t, before.Scheduled, after.Scheduled, "a rejected call left a trace")
		assert.Equal(t, 1, s.Pending())
		switch round % 3 {
		case 0:
			require.True(t, tm.Cancel())
		case 1:
			ran := make(chan struct{})
			require.True(t, tm.Cancel())
			_, err = s.Schedule(keys[from][0], 0, func() { close(ran) })
			require.NoError(t, err)
			<-ran // its token is back before its task runs
		case 2:
			require.True(t, tm.Cancel())
			k, err := s.ScheduleKey(keys[from][0], time.Hour, noop)
			require.NoError(t, err)
			require.True(t, s.CancelKey(keys[from][0]))
			require.False(t, k.Pending())
		}
		tm2, err := s.Schedule(keys[to][0], time.Hour, noop)
		require.NoError(t, err, "round %d: a freed token was not found", round)
		require.True(t, tm2.Cancel())
		require.Equal(t, 0, s.Pending())
	}
}

// Keyed timers: "Keyed calls never see plain timers, even on the same key";
// "ScheduleKey ... replaces it: the old one is cancelled (never runs, its
// handle reports not pending, counted as cancelled) before the new one is
// visible"; "once a timer has ended ..., keyed calls no longer find it".
func TestDocKeyedNeverSeesPlainAndReplaces(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(2))
	const k = 42
	plainRan := atomic.Int32{}
	plain, err := s.Schedule(k, time.Hour, func() { plainRan.Add(1) })
	require.NoError(t, err)
	_, ok := s.Lookup(k)
	assert.False(t, ok)
	assert.False(t, s.CancelKey(k))
	assert.False(t, s.ResetKey(k, 0))
	assert.True(t, plain.Pending())

	oldRan := atomic.Int32{}
	old, err := s.ScheduleKey(k, time.Hour, func() { oldRan.Add(1) })
	require.NoError(t, err)
	c0 := s.Stats().Total.Cancelled
	nw, err := s.ScheduleKey(k, time.Hour, noop)
	require.NoError(t, err)
	assert.False(t, old.Pending())
	assert.False(t, old.Cancel(), "replaced timer cancellable again")
	assert.Equal(t, c0+1, s.Stats().Total.Cancelled)
	got, ok := s.Lookup(k)
	require.True(t, ok)
	assert.Equal(t, nw, got)

	// cancelled through its handle: keyed calls no longer find it
	require.True(t, nw.Cancel())
	_, ok = s.Lookup(k)
	assert.False(t, ok)
	assert.False(t, s.ResetKey(k, time.Hour))
	assert.False(t, s.CancelKey(k))
	assert.True(t, plain.Pending(), "keyed calls touched the plain timer")
	require.Eventually(t, func() bool { return shardwheel.IndexLen(s) == 0 }, waitFor, pollEvery)

	// ran: keyed calls no longer find it; its entry goes at the next pass
	ran := make(chan struct{})
	_, err = s.ScheduleKey(k, 0, func() { close(ran) })
	require.NoError(t, err)
	<-ran
	_, ok = s.Lookup(k)
	assert.False(t, ok)
	assert.False(t, s.ResetKey(k, time.Hour))
	assert.False(t, s.CancelKey(k))
	require.Eventually(t, func() bool { return shardwheel.IndexLen(s) == 0 }, waitFor, pollEvery)

	assert.True(t, plain.Pending())
	assert.Zero(t, plainRan.Load())
	assert.Zero(t, oldRan.Load())
	assert.True(t, plain.Cancel())
}

// "ResetKey is true iff the key had a pending indexed timer, which then runs
// delay from the call (never earlier), not at its old deadline."
func TestDocResetKeyMovesEarlierAndLater(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(1))
	const k = 7
	var at atomic.Int64
	start := time.Now()
	_, err := s.ScheduleKey(k, time.Hour, func() { at.Store(int64(time.Since(start))) })
	require.NoError(t, err)
	before := time.Since(start)
	require.True(t, s.ResetKey(k, 30*time.Millisecond))
	require.Eventually(t, func() bool { return at.Load() != 0 }, waitFor, pollEvery)
	assert.GreaterOrEqual(t, time.Duration(at.Load()), before+30*time.Millisecond)
	assert.False(t, s.ResetKey(k, time.Hour), "ResetKey found a timer that ran")
}

// "Concurrent ScheduleKeys on one key leave exactly one indexed and cancel
// the rest."
func TestDocConcurrentScheduleKeyLeavesOne(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(2))
	const k, g, per = 99, 8, 200
	var mu sync.Mutex
	var all []shardwheel.Timeout
	var wg sync.WaitGroup
	for range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				tm, err := s.ScheduleKey(k, time.Hour, noop)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				all = append(all, tm)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	pending := 0
	var last shardwheel.Timeout
	for _, tm := range all {
		if tm.Pending() {
			pending++
			last = tm
		}
	}
	require.Equal(t, 1, pending)
	assert.Equal(t, 1, s.Pending())
	got, ok := s.Lookup(k)
	require.True(t, ok)
	assert.Equal(t, last, got)
	st := s.Stats().Total
	assert.EqualValues(t, g*per-1, st.Cancelled)
	require.True(t, s.CancelKey(k))
	assert.Equal(t, 0, s.Pending())
}

type docCtxKey struct{}

// Contexts: Deadline, Err, Cause, values, idempotent cancel, Pending drops
// at once.
func TestDocContextBasics(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(2))
	parent := context.WithValue(context.Background(), docCtxKey{}, "v")
	d := time.Now().Add(time.Hour)
	ctx, cancel := s.WithDeadline(parent, d)
	got, ok := ctx.Deadline()
	require.True(t, ok)
	assert.True(t, got.Equal(d))
	assert.Equal(t, "v", ctx.Value(docCtxKey{}))
	assert.NoError(t, ctx.Err())
	assert.NoError(t, context.Cause(ctx))
	assert.Equal(t, 1, s.Pending())
	cancel()
	assert.Equal(t, 0, s.Pending(), "Pending did not drop at once")
	select {
	case <-ctx.Done():
	default:
		t.Fatal("not done when the CancelFunc returned")
	}
	assert.ErrorIs(t, ctx.Err(), context.Canceled)
	assert.ErrorIs(t, context.Cause(ctx), context.Canceled)
	cancel()
	cancel()
	assert.ErrorIs(t, ctx.Err(), context.Canceled)

	// the Cause variant: cause after the deadline, never early
	cause := errors.New("too slow")
	start := time.Now()
	ctx2, cancel2 := s.WithTimeoutCause(parent, 20*time.Millisecond, cause)
	defer cancel2()
	<-ctx2.Done()
	assert.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond)
	assert.ErrorIs(t, ctx2.Err(), context.DeadlineExceeded)
	assert.ErrorIs(t, context.Cause(ctx2), cause)
	cancel2()
	assert.ErrorIs(t, ctx2.Err(), context.DeadlineExceeded, "a late cancel changed Err")

	// parent's earlier deadline wins, as in package context
	pctx, pcancel := context.WithTimeout(context.Background(), time.Minute)
	defer pcancel()
	pd, _ := pctx.Deadline()
	ctx3, cancel3 := s.WithTimeout(pctx, time.Hour)
	defer cancel3()
	got3, _ := ctx3.Deadline()
	assert.True(t, got3.Equal(pd))

	// parent cancelled with a cause: the parent's error and cause
	pc, pcc := context.WithCancelCause(context.Background())
	ctx4, cancel4 := s.WithTimeoutCause(pc, time.Hour, cause)
	defer cancel4()
	pcc(errParent)
	assert.ErrorIs(t, ctx4.Err(), context.Canceled)
	assert.ErrorIs(t, context.Cause(ctx4), errParent)
	<-ctx4.Done()
	require.Eventually(t, func() bool { return s.Pending() == 0 }, waitFor, pollEvery)
}

var errParent = errors.New("parent gone")

// "A deadline in the past or timeout <= 0 gives a context that is already
// done", with the cause passed in.
func TestDocContextPastDeadline(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(1))
	cause := errors.New("late")
	for _, mk := range []func() (context.Context, context.CancelFunc){
		func() (context.Context, context.CancelFunc) { return s.WithTimeout(context.Background(), 0) },
		func() (context.Context, context.CancelFunc) { return s.WithTimeout(context.Background(), -time.Hour) },
		func() (context.Context, context.CancelFunc) {
			return s.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		},
		func() (context.Context, context.CancelFunc) {
			return s.WithTimeoutCause(context.Background(), -1, cause)
		},
		func() (context.Context, context.CancelFunc) {
			return s.WithDeadlineCause(context.Background(), time.Time{}, cause)
		},
	} {
		ctx, cancel := mk()
		select {
		case <-ctx.Done():
		default:
			t.Fatal("a past deadline gave a context that is not done")
		}
		assert.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)
		cancel()
		assert.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)
	}
	ctx, cancel := s.WithTimeoutCause(context.Background(), -1, cause)
	defer cancel()
	assert.ErrorIs(t, context.Cause(ctx), cause)
	assert.Equal(t, 0, s.Pending())
}

// "A deadline is never lost. Where the wheel cannot hold it (after Stop, at
// the WithMaxPending limit, or beyond MaxDelay) the call returns
// context.WithDeadlineCause(parent, d, cause) instead."
func TestDocContextFallbacks(t *testing.T) {
	cause := errors.New("fallback cause")
	check := func(t *testing.T, s *shardwheel.Scheduler) {
		start := time.Now()
		ctx, cancel := s.WithTimeoutCause(context.Background(), 20*time.Millisecond, cause)
		defer cancel()
		select {
		case <-ctx.Done():
		case <-time.After(waitFor):
			t.Fatal("deadline lost")
		}
		assert.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond)
		assert.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)
		assert.ErrorIs(t, context.Cause(ctx), cause)
	}
	t.Run("after Stop", func(t *testing.T) {
		s := newScheduler(t, shardwheel.WithShards(1))
		s.Stop()
		check(t, s)
	})
	t.Run("at the limit", func(t *testing.T) {
		s := newScheduler(t, shardwheel.WithShards(2), shardwheel.WithMaxPending(1))
		_, err := s.Schedule(1, time.Hour, noop)
		require.NoError(t, err)
		check(t, s)
		assert.Equal(t, 1, s.Pending())
	})
	t.Run("beyond MaxDelay", func(t *testing.T) {
		s := newScheduler(t, shardwheel.WithShards(1))
		d := time.Now().Add(s.MaxDelay() + time.Hour)
		ctx, cancel := s.WithDeadlineCause(context.Background(), d, cause)
		got, ok := ctx.Deadline()
		require.True(t, ok)
		assert.True(t, got.Equal(d))
		assert.Equal(t, 0, s.Pending())
		cancel()
		assert.ErrorIs(t, ctx.Err(), context.Canceled)
	})
	t.Run("made before Stop", func(t *testing.T) {
		s := newScheduler(t, shardwheel.WithShards(1))
		start := time.Now()
		ctx, cancel := s.WithTimeoutCause(context.Background(), 40*time.Millisecond, cause)
		defer cancel()
		ctx2, cancel2 := s.WithTimeout(context.Background(), time.Hour)
		assert.Empty(t, s.Stop(), "Stop returned a context's timer")
		<-ctx.Done()
		assert.GreaterOrEqual(t, time.Since(start), 40*time.Millisecond)
		assert.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)
		assert.ErrorIs(t, context.Cause(ctx), cause)
		assert.NoError(t, ctx2.Err())
		cancel2()
		assert.ErrorIs(t, ctx2.Err(), context.Canceled)
	})
}

// "Timeout.Task() gives back the task of each timer Stop returned ...; for
// every other timer it returns nil."
func TestDocTaskOnlyAfterStop(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(2))
	pending, err := s.Schedule(1, time.Hour, noop)
	require.NoError(t, err)
	assert.Nil(t, pending.Task())
	cancelled, err := s.Schedule(2, time.Hour, noop)
	require.NoError(t, err)
	require.True(t, cancelled.Cancel())
	ran := make(chan struct{})
	fired, err := s.Schedule(3, 0, func() { close(ran) })
	require.NoError(t, err)
	<-ran
	assert.Nil(t, cancelled.Task())
	assert.Nil(t, fired.Task())
	keyed, err := s.ScheduleKey(4, time.Hour, noop)
	require.NoError(t, err)
	replaced, err := s.ScheduleKey(5, time.Hour, noop)
	require.NoError(t, err)
	_, err = s.ScheduleKey(5, time.Hour, noop)
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
	assert.Nil(t, shardwheel.Timeout{}.Task())
	_, ok := s.Lookup(4)
	assert.False(t, ok)
	assert.Zero(t, shardwheel.IndexLen(s))
}

// "Shutdown(ctx) is Stop that stops waiting when ctx is done and then
// returns ctx.Err() ... It still claims every pending timer, the hung
// shard's included" - including timers due in the very tick of the hung
// task, which the shard had not started yet.
func TestDocShutdownClaimsTheHungTicksOtherTimers(t *testing.T) {
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
	var tms []shardwheel.Timeout
	for i := range n {
		tm, err := s.Schedule(uint64(i), 10*time.Millisecond, task)
		require.NoError(t, err)
		tms = append(tms, tm)
	}
	far, err := s.Schedule(100, time.Hour, noop)
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
	_, err = s.Schedule(1, 0, noop)
	assert.ErrorIs(t, err, shardwheel.ErrStopped)
}

// At the WithMaxPending limit, does ScheduleKey replace the key's timer?
// "a rejected call leaves no trace and replaces nothing": the doc allows a
// rejection; this test pins down that replacing needs a spare token.
func TestDocScheduleKeyAtTheLimitNeedsASpareToken(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(1), shardwheel.WithMaxPending(1))
	old, err := s.ScheduleKey(1, time.Hour, noop)
	require.NoError(t, err)
	_, err = s.ScheduleKey(1, time.Hour, noop)
	require.ErrorIs(t, err, shardwheel.ErrTooManyPending)
	assert.True(t, old.Pending(), "a rejected ScheduleKey replaced the old timer")
	got, ok := s.Lookup(1)
	require.True(t, ok)
	assert.Equal(t, old, got)
}

// "Pending() counts the ones that have not ended" and "Summed over the
// shards, at quiescence and after Stop, Scheduled = Fired + Cancelled +
// Stopped + Scheduler.Pending()", with contexts' timers handed over by Stop
// counted as stopped.
func TestDocStatsAddUpAfterStopWithContexts(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(2))
	ran := make(chan struct{})
	_, err := s.Schedule(1, 0, func() { close(ran) })
	require.NoError(t, err)
	<-ran
	c, err := s.Schedule(2, time.Hour, noop)
	require.NoError(t, err)
	require.True(t, c.Cancel())
	_, err = s.ScheduleKey(3, time.Hour, noop)
	require.NoError(t, err)
	_, err = s.ScheduleKey(3, time.Hour, noop) // replaces: one cancelled
	require.NoError(t, err)
	_, cancel := s.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	_, cancel2 := s.WithTimeout(context.Background(), time.Hour)
	cancel2()
	assert.Equal(t, 2, s.Pending())
	out := s.Stop()
	assert.Len(t, out, 1)
	assert.Equal(t, 0, s.Pending())
	st := s.Stats()
	tot := st.Total
	assert.EqualValues(t, 6, tot.Scheduled)
	assert.EqualValues(t, 1, tot.Fired)
	assert.EqualValues(t, 3, tot.Cancelled)
	assert.EqualValues(t, 2, tot.Stopped)
	assert.Equal(t, tot.Scheduled, tot.Fired+tot.Cancelled+tot.Stopped+uint64(st.Pending))
}

// "(4 at least: sizes 2 and 4 both use 4)"; "WithWheelSize(n) | 512 |
// 2..65536"; "WithTick(d) | 1ms | 1ms..1h"; the error names option and value.
func TestDocOptionLimitsAndMessages(t *testing.T) {
	assert.Equal(t, shard.Footprint(4, 2), shard.Footprint(2, 2), "sizes 2 and 4 both use 4")
	assert.Equal(t, shard.Footprint(4, 2), shard.Footprint(3, 2))
	assert.NotEqual(t, shard.Footprint(4, 2), shard.Footprint(8, 2))
	for _, n := range []int{2, 3, 4, 65536} {
		newScheduler(t, shardwheel.WithShards(1), shardwheel.WithWheelSize(n))
	}
	for _, n := range []int{-1, 0, 1, 65537} {
		_, err := shardwheel.New(shardwheel.WithWheelSize(n))
		require.ErrorIs(t, err, shardwheel.ErrInvalidOption)
		assert.Contains(t, err.Error(), "WithWheelSize(")
	}
	_, err := shardwheel.New(shardwheel.WithTick(500 * time.Microsecond))
	require.ErrorIs(t, err, shardwheel.ErrInvalidOption)
	assert.Equal(t, "shardwheel: invalid option: WithTick(500µs): must be in [1ms, 1h0m0s]", err.Error())
	_, err = shardwheel.New(shardwheel.WithTick(time.Hour + 1))
	require.ErrorIs(t, err, shardwheel.ErrInvalidOption)
	_, err = shardwheel.New(shardwheel.WithMaxPending(-1))
	require.ErrorIs(t, err, shardwheel.ErrInvalidOption)
	_, err = shardwheel.New(nil)
	require.ErrorIs(t, err, shardwheel.ErrInvalidOption)
}

// "WithTransferCap(n) ... new timers moved from the queue into the wheel
// per tick per shard; the rest wait" and the Stats that show it: timers
// scheduled while the shard's wheel is held (here by a blocked task) wait
// in its queue.
func TestDocTransferCapShowsInStats(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(1), shardwheel.WithTransferCap(10))
	var wg sync.WaitGroup
	const n = 300
	wg.Add(n)
	release := blockShard(t, s)
	for i := range n {
		_, err := s.Schedule(uint64(i), 0, wg.Done)
		require.NoError(t, err)
	}
	assert.Equal(t, n, s.Stats().Total.Queued, "queued behind the blocked task")
	release()
	wg.Wait()
	require.Eventually(t, func() bool { return s.Stats().Total.Fired == n+1 }, waitFor, pollEvery, "the timers and the blocking task")
	st := s.Stats().Total
	assert.LessOrEqual(t, st.TransferPeak, 10)
	assert.Positive(t, st.CapHits)
	assert.Positive(t, st.QueuedPeak)
	assert.Zero(t, st.Queued)
}

// "TicksSkipped counts ticks the shard slept through because nothing was
// due (an idle shard does not wake every tick)."
func TestDocIdleShardSkipsTicks(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(1))
	done := make(chan struct{})
	_, err := s.Schedule(1, 300*time.Millisecond, func() { close(done) })
	require.NoError(t, err)
	<-done
	require.Eventually(t, func() bool { return s.Stats().Total.Fired == 1 }, waitFor, pollEvery)
	st := s.Stats().Total
	assert.GreaterOrEqual(t, st.TicksSkipped, uint64(200), "ticks %d skipped %d", st.Ticks, st.TicksSkipped)
	assert.Less(t, st.Ticks, uint64(100), "an idle shard woke every tick")
}

// Keyed index entries: "its entry is gone at once (by key, replaced, Stop)".
func TestDocIndexEntryGoesAtOnceByKey(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(2))
	for k := uint64(0); k < 50; k++ {
		_, err := s.ScheduleKey(k, time.Hour, noop)
		require.NoError(t, err)
		_, err = s.ScheduleKey(k, time.Hour, noop)
		require.NoError(t, err)
	}
	assert.Equal(t, 50, shardwheel.IndexLen(s), "a replaced entry stayed")
	for k := uint64(0); k < 25; k++ {
		require.True(t, s.CancelKey(k))
		require.False(t, s.CancelKey(k))
	}
	assert.Equal(t, 25, shardwheel.IndexLen(s), "CancelKey left its entry")
	assert.Equal(t, 25, s.Pending())
	out := s.Stop()
	assert.Len(t, out, 25)
	assert.Zero(t, shardwheel.IndexLen(s))
	_, err := s.ScheduleKey(1, time.Hour, noop)
	assert.ErrorIs(t, err, shardwheel.ErrStopped)
	assert.False(t, s.ResetKey(30, 0))
	assert.False(t, s.CancelKey(30))
}

// "A Scheduler is live when made and not stopped": Shutdown with a done
// context stops it too, and a later Stop does not count it twice.
func TestDocShutdownEndsLiveness(t *testing.T) {
	base := shardwheel.LiveSchedulers()
	s, err := shardwheel.New(shardwheel.WithShards(1))
	require.NoError(t, err)
	assert.Equal(t, base+1, shardwheel.LiveSchedulers())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _ = s.Shutdown(ctx)
	assert.Equal(t, base, shardwheel.LiveSchedulers())
	s.Stop()
	_, _ = s.Shutdown(context.Background())
	assert.Equal(t, base, shardwheel.LiveSchedulers())
}
