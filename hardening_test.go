package shardwheel_test

import (
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

func TestNoGoroutineLeftAfterStop(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for _, affinity := range []bool{false, true} {
		s, err := shardwheel.New(shardwheel.WithShards(4), shardwheel.WithAffinity(affinity), shardwheel.WithTick(time.Millisecond))
		require.NoError(t, err)
		var ran atomic.Int64
		for i := range uint64(1000) {
			_, err := s.Schedule(i, time.Duration(i%3)*time.Millisecond, func() { ran.Add(1) })
			require.NoError(t, err)
		}
		s.Stop()
	}
}

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
		_, err := s.Schedule(i, time.Millisecond, task)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return ran.Load() == 100 && handled.Load() == 100 }, waitFor, pollEvery)
	st := s.Stats()
	assert.Equal(t, uint64(100), st.Total.Panics)
	assert.Equal(t, uint64(200), st.Total.Fired)
	assert.Zero(t, s.Pending())
}

// TestBlockingTaskDelaysButNeverReorders blocks a shard for many ticks: the
// timers that came due meanwhile all run afterwards, none lost, in deadline
// order, and the shard's tick lag shows the stall.
func TestBlockingTaskDelaysButNeverReorders(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(1), shardwheel.WithTick(time.Millisecond))
	const block = 50 * time.Millisecond
	var mu sync.Mutex
	var order []int
	_, err := s.Schedule(0, time.Millisecond, func() { time.Sleep(block) })
	require.NoError(t, err)
	for i := 1; i <= 40; i++ {
		_, err := s.Schedule(uint64(i), time.Duration(2+i)*time.Millisecond, func() {
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
		})
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return s.Pending() == 0 }, waitFor, pollEvery)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, order, 40)
	for i := 1; i < len(order); i++ {
		assert.Less(t, order[i-1], order[i], "timers ran out of deadline order: %v", order)
	}
	st := s.Stats()
	assert.GreaterOrEqual(t, time.Duration(st.Total.TickLag.Max()), block/2, "the stall shows as tick lag")
	assert.GreaterOrEqual(t, time.Duration(st.Total.Lateness.Max()), block/2, "and as lateness")
}

// TestScheduleRacingStop has producers schedule as fast as they can while
// Stop runs: each call either fails with ErrStopped or returns a timer that
// then ran or was returned by Stop. Nothing is lost.
func TestScheduleRacingStop(t *testing.T) {
	for round := range 20 {
		s, err := shardwheel.New(shardwheel.WithShards(3), shardwheel.WithTick(time.Millisecond), shardwheel.WithRingSize(16))
		require.NoError(t, err)
		var mu sync.Mutex
		accepted := map[shardwheel.Timeout]*atomic.Int32{}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for w := range 4 {
			wg.Go(func() {
				<-start
				for i := 0; ; i++ {
					runs := new(atomic.Int32)
					tm, err := s.Schedule(uint64(w<<20|i), time.Duration(i%3)*time.Millisecond, func() { runs.Add(1) })
					if err != nil {
						require.ErrorIs(t, err, shardwheel.ErrStopped)
						return
					}
					mu.Lock()
					accepted[tm] = runs
					mu.Unlock()
				}
			})
		}
		close(start)
		time.Sleep(time.Duration(round%5) * time.Millisecond)
		stopped := s.Stop()
		wg.Wait()
		inStop := map[shardwheel.Timeout]bool{}
		for _, tm := range stopped {
			inStop[tm] = true
		}
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

// TestStopUnderFullLoad stops a scheduler whose rings are full and whose
// transfer cap is hit every tick: every accepted timer is accounted for.
func TestStopUnderFullLoad(t *testing.T) {
	s, err := shardwheel.New(shardwheel.WithShards(2), shardwheel.WithTick(time.Millisecond),
		shardwheel.WithRingSize(8), shardwheel.WithTransferCap(10))
	require.NoError(t, err)
	var ran, accepted atomic.Int64
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				if _, err := s.Schedule(uint64(w<<20|i), 0, func() { ran.Add(1) }); err != nil {
					return
				}
				accepted.Add(1)
			}
		})
	}
	require.Eventually(t, func() bool { return s.Stats().Total.CapHits > 3 }, waitFor, pollEvery)
	stopped := s.Stop()
	wg.Wait()
	assert.Equal(t, accepted.Load(), ran.Load()+int64(len(stopped)))
	assert.Positive(t, s.Stats().Total.RingFull, "the slow path was exercised")
}

// TestPendingLimitUnderConcurrency races many producers against a limit:
// the limit is never exceeded, tokens are never lost, and a rejected call
// leaves no trace.
func TestPendingLimitUnderConcurrency(t *testing.T) {
	const limit = 1000
	s := newScheduler(t, shardwheel.WithShards(4), shardwheel.WithMaxPending(limit))
	var accepted atomic.Int64
	var handles sync.Map
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 400 {
				tm, err := s.Schedule(uint64(w*1000+i), time.Hour, func() {})
				if err != nil {
					require.ErrorIs(t, err, shardwheel.ErrTooManyPending)
					continue
				}
				accepted.Add(1)
				if i%4 == 0 { // some churn: give tokens back while others take
					require.True(t, tm.Cancel())
					accepted.Add(-1)
				} else {
					handles.Store(tm, true)
				}
				require.LessOrEqual(t, s.Pending(), limit+8, "Pending may overshoot only by in-flight rejected calls")
			}
		})
	}
	wg.Wait()
	require.LessOrEqual(t, accepted.Load(), int64(limit))
	require.EqualValues(t, accepted.Load(), s.Pending())
	// No token was lost: the remaining room can be filled exactly.
	scheduledBefore := s.Stats().Total.Scheduled
	for s.Pending() < limit {
		_, err := s.Schedule(uint64(s.Pending()), time.Hour, func() {})
		require.NoError(t, err)
	}
	_, err := s.Schedule(1, time.Hour, func() {})
	require.ErrorIs(t, err, shardwheel.ErrTooManyPending)
	assert.Equal(t, scheduledBefore+uint64(limit)-uint64(accepted.Load()), s.Stats().Total.Scheduled,
		"rejected calls did not reach a shard")
}

// FuzzSchedulerOps runs fuzzer-chosen sequences of every public entry point
// (Schedule with any delay, nil tasks, Cancel, Reset, zero and foreign
// handles, Stop and use after Stop) and checks each result against a model.
// Timers either never fire during the run (delays of at least an hour) or
// fire at once, so the model knows which are pending.
func FuzzSchedulerOps(f *testing.F) {
	f.Add([]byte{0, 1, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0})
	f.Add([]byte{0, 200, 0, 201, 0, 255, 6, 0, 1, 1, 2, 1})
	s2, err := shardwheel.New(shardwheel.WithShards(1))
	require.NoError(f, err)
	foreign, err := s2.Schedule(1, time.Hour, func() {})
	require.NoError(f, err)
	f.Cleanup(func() { s2.Stop() })
	delays := []time.Duration{
		time.Hour, 2 * time.Hour, math.MaxInt64, math.MaxInt64 - 1, time.Duration(math.MaxInt64 / 2),
		0, -1, math.MinInt64, -time.Hour, 1,
	}
	f.Fuzz(func(t *testing.T, ops []byte) {
		s, err := shardwheel.New(shardwheel.WithShards(2), shardwheel.WithTick(time.Millisecond))
		require.NoError(t, err)
		defer s.Stop()
		type timer struct {
			tm   shardwheel.Timeout
			long bool // never fires during the test
			live bool // model: pending
		}
		var timers []*timer
		stopped := false
		for i := 0; i+1 < len(ops); i += 2 {
			arg := int(ops[i+1])
			pick := func() *timer {
				if len(timers) == 0 {
					return &timer{}
				}
				return timers[arg%len(timers)]
			}
			switch ops[i] % 8 {
			case 0, 1: // schedule
				d := delays[arg%len(delays)]
				tm, err := s.Schedule(uint64(arg), d, func() {})
				if stopped {
					require.ErrorIs(t, err, shardwheel.ErrStopped)
					continue
				}
				require.NoError(t, err)
				long := d >= time.Hour
				timers = append(timers, &timer{tm: tm, long: long, live: long})
			case 2: // nil task
				_, err := s.Schedule(1, time.Hour, nil)
				require.ErrorIs(t, err, shardwheel.ErrNilTask)
			case 3: // cancel
				tm := pick()
				got := tm.tm.Cancel()
				if tm.long || !got {
					require.Equal(t, tm.live, got)
				}
				tm.live = false
			case 4: // reset to another long delay
				tm := pick()
				got := tm.tm.Reset(delays[arg%5])
				if tm.long {
					require.Equal(t, tm.live, got)
				}
			case 5: // zero and foreign handles
				var zero shardwheel.Timeout
				require.False(t, zero.Cancel())
				require.False(t, zero.Reset(time.Second))
				require.True(t, foreign.Pending(), "a handle acts on its own scheduler only")
			case 6: // stop
				got := s.Stop()
				if stopped {
					require.Nil(t, got)
				}
				returned := map[shardwheel.Timeout]bool{}
				for _, tm := range got {
					returned[tm] = true
				}
				for _, tm := range timers {
					// Every pending long timer comes back; a short one
					// may too, if its tick had not come yet.
					if tm.long {
						require.Equal(t, tm.live, returned[tm.tm])
					}
					tm.live = false
				}
				stopped = true
			default: // accessors on any handle
				tm := pick()
				if tm.long {
					require.Equal(t, tm.live, tm.tm.Pending())
					require.Equal(t, tm.live, !tm.tm.Deadline().IsZero())
				}
			}
			want := 0
			for _, tm := range timers {
				if tm.live {
					want++
				}
			}
			if !stopped {
				// Short timers may still be pending for a tick or two.
				require.GreaterOrEqual(t, s.Pending(), want)
			} else {
				require.Zero(t, s.Pending())
			}
		}
	})
}

// TestChurnSoak runs random Schedule, Cancel, Reset and natural expiry from
// many goroutines for a bounded time (SHARDWHEEL_SOAK, default 2s, or 60s
// in CI) with an oracle that knows each timer's fate; a lost, duplicated or
// early timer fails with that timer's history.
func TestChurnSoak(t *testing.T) {
	d := soakDuration(t)
	s, err := shardwheel.New(shardwheel.WithTick(time.Millisecond), shardwheel.WithRingSize(256))
	require.NoError(t, err)
	o := newOracle()
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for w := range 2 * runtime.GOMAXPROCS(0) {
		wg.Go(func() { o.churn(t, s, uint64(w), deadline) })
	}
	wg.Wait()
	// Let the short timers run out, then stop and account for the rest.
	time.Sleep(60 * time.Millisecond)
	o.finish(t, s.Stop())
	require.Zero(t, s.Pending())
	t.Logf("soak %v: %d timers, %d ran, %d cancelled, %d stopped, %d resets",
		d, o.created.Load(), o.ran.Load(), o.cancelled.Load(), o.stopped.Load(), o.resets.Load())
}

func ExampleScheduler_Stats() {
	s, err := shardwheel.New(shardwheel.WithShards(2))
	if err != nil {
		panic(err)
	}
	defer s.Stop()
	for i := range uint64(10) {
		if _, err := s.Schedule(i, time.Hour, func() {}); err != nil {
			panic(err)
		}
	}
	st := s.Stats()
	fmt.Println("pending:", st.Pending, "scheduled:", st.Total.Scheduled, "shards:", len(st.Shards))
	// Output:
	// pending: 10 scheduled: 10 shards: 2
}

// TestTaskSchedulingIntoItsOwnFullRing has a task, running inline on its
// shard, schedule more timers than the shard's rings hold: the shard cannot
// wait for itself to drain them, so it must file them directly, not hang.
func TestTaskSchedulingIntoItsOwnFullRing(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(1), shardwheel.WithRingSize(1), shardwheel.WithTick(time.Millisecond))
	const n = 5000
	var ran atomic.Int64
	_, err := s.AfterFunc(0, func() {
		for range n {
			if _, err := s.AfterFunc(time.Millisecond, func() { ran.Add(1) }); err != nil {
				t.Error(err)
				return
			}
		}
	})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return ran.Load() == n }, waitFor, pollEvery)
	assert.Positive(t, s.Stats().Total.RingFull)
	assert.Zero(t, s.Pending())
}
