package shardwheel_test

import (
	"errors"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
)

// newScheduler returns a scheduler stopped at the end of the test.
func newScheduler(t testing.TB, opts ...shardwheel.Option) *shardwheel.Scheduler {
	t.Helper()
	s, err := shardwheel.New(opts...)
	require.NoError(t, err)
	t.Cleanup(func() { s.Stop() })
	return s
}

const waitFor, pollEvery = 10 * time.Second, time.Millisecond

func TestInvalidOptionsNameOptionAndValue(t *testing.T) {
	tests := []struct {
		opt  shardwheel.Option
		want string
	}{
		{shardwheel.WithShards(0), "WithShards(0)"},
		{shardwheel.WithShards(-3), "WithShards(-3)"},
		{shardwheel.WithShards(shardwheel.MaxShards + 1), "WithShards(4097)"},
		{shardwheel.WithTick(999 * time.Microsecond), "WithTick(999µs)"},
		{shardwheel.WithTick(0), "WithTick(0s)"},
		{shardwheel.WithTick(2 * time.Hour), "WithTick(2h0m0s)"},
		{shardwheel.WithWheelSize(1), "WithWheelSize(1)"},
		{shardwheel.WithWheelSize(1<<16 + 1), "WithWheelSize(65537)"},
		{shardwheel.WithRingSize(0), "WithRingSize(0)"},
		{shardwheel.WithRingSize(shardwheel.MaxRingSize + 1), "WithRingSize(4194305)"},
		{shardwheel.WithTransferCap(0), "WithTransferCap(0)"},
		{shardwheel.WithMaxPending(-1), "WithMaxPending(-1)"},
		{shardwheel.WithExecutor(nil), "WithExecutor(nil)"},
		{shardwheel.WithPanicHandler(nil), "WithPanicHandler(nil)"},
		{nil, "Option(nil)"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			s, err := shardwheel.New(shardwheel.WithShards(1), tt.opt)
			require.Error(t, err)
			assert.Nil(t, s)
			assert.ErrorIs(t, err, shardwheel.ErrInvalidOption)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestValidOptions(t *testing.T) {
	s := newScheduler(t)
	assert.Equal(t, runtime.GOMAXPROCS(0), s.Shards())
	assert.Equal(t, shardwheel.DefaultTick, s.Tick())

	s = newScheduler(t, shardwheel.WithShards(3), shardwheel.WithTick(time.Millisecond),
		shardwheel.WithWheelSize(100), shardwheel.WithRingSize(10), shardwheel.WithTransferCap(1),
		shardwheel.WithMaxPending(5), shardwheel.WithAffinity(false))
	assert.Equal(t, 3, s.Shards())
	assert.Equal(t, time.Millisecond, s.Tick())
	assert.Greater(t, s.MaxDelay(), 365*24*time.Hour)
}

func TestScheduleRunsTaskOnceNeverEarly(t *testing.T) {
	s := newScheduler(t, shardwheel.WithTick(time.Millisecond))
	const n = 500
	var ran, early atomic.Int64
	for i := range n {
		delay := time.Duration(i%20) * time.Millisecond
		start := time.Now()
		_, err := s.Schedule(uint64(i), delay, func() {
			if time.Since(start) < delay {
				early.Add(1)
			}
			ran.Add(1)
		})
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return ran.Load() == n }, waitFor, pollEvery)
	assert.Zero(t, early.Load())
	assert.Zero(t, s.Pending())
}

func TestScheduleErrors(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(2), shardwheel.WithMaxPending(3))
	_, err := s.Schedule(1, time.Hour, nil)
	assert.ErrorIs(t, err, shardwheel.ErrNilTask)
	_, err = s.AfterFunc(time.Hour, nil)
	assert.ErrorIs(t, err, shardwheel.ErrNilTask)

	var ts []shardwheel.Timeout
	for i := range 3 {
		tm, err := s.Schedule(uint64(i), time.Hour, func() {})
		require.NoError(t, err)
		ts = append(ts, tm)
	}
	_, err = s.Schedule(99, time.Hour, func() {})
	assert.ErrorIs(t, err, shardwheel.ErrTooManyPending)
	assert.Equal(t, 3, s.Pending(), "a rejected schedule leaves no trace")
	require.True(t, ts[0].Cancel())
	_, err = s.AfterFunc(time.Hour, func() {})
	assert.NoError(t, err, "the limit counts pending timers, not schedules")

	s.Stop()
	_, err = s.Schedule(1, time.Hour, func() {})
	assert.ErrorIs(t, err, shardwheel.ErrStopped)
	_, err = s.AfterFunc(time.Hour, func() {})
	assert.ErrorIs(t, err, shardwheel.ErrStopped)
}

func TestMaxPendingSharedAcrossShards(t *testing.T) {
	// The limit is global even though tokens live in shards: one key (so
	// one shard) may use the whole limit.
	s := newScheduler(t, shardwheel.WithShards(4), shardwheel.WithMaxPending(100))
	for range 100 {
		_, err := s.Schedule(7, time.Hour, func() {})
		require.NoError(t, err)
	}
	_, err := s.Schedule(7, time.Hour, func() {})
	assert.ErrorIs(t, err, shardwheel.ErrTooManyPending)
	_, err = s.Schedule(8, time.Hour, func() {})
	assert.ErrorIs(t, err, shardwheel.ErrTooManyPending)
	assert.Equal(t, 100, s.Pending())
}

func TestZeroTimeoutIsInert(t *testing.T) {
	var tm shardwheel.Timeout
	assert.False(t, tm.Cancel())
	assert.False(t, tm.Reset(time.Second))
	assert.False(t, tm.Pending())
	assert.Zero(t, tm.Key())
	assert.True(t, tm.Deadline().IsZero())
}

func TestTimeoutAccessors(t *testing.T) {
	s := newScheduler(t)
	before := time.Now()
	tm, err := s.Schedule(42, time.Minute, func() {})
	require.NoError(t, err)
	assert.Equal(t, uint64(42), tm.Key())
	assert.True(t, tm.Pending())
	dl := tm.Deadline()
	assert.False(t, dl.Before(before.Add(time.Minute)), "deadline %v is early", dl)
	assert.True(t, dl.Before(time.Now().Add(time.Minute+2*s.Tick())), "deadline %v too late", dl)
	require.True(t, tm.Reset(2*time.Minute))
	assert.True(t, tm.Deadline().After(dl.Add(59*time.Second)))
	require.True(t, tm.Cancel())
	assert.True(t, tm.Deadline().IsZero())
	assert.Equal(t, uint64(42), tm.Key(), "the key outlives the timer")

	af, err := s.AfterFunc(time.Minute, func() {})
	require.NoError(t, err)
	assert.Equal(t, s.ShardOf(af.Key()), s.ShardOf(af.Key()))
}

func TestHugeAndNegativeDelays(t *testing.T) {
	s := newScheduler(t, shardwheel.WithTick(time.Millisecond))
	huge, err := s.Schedule(1, math.MaxInt64, func() { t.Error("huge delay ran") })
	require.NoError(t, err)
	assert.True(t, huge.Deadline().After(time.Now().Add(s.MaxDelay()-time.Second)))
	ran := make(chan struct{})
	_, err = s.Schedule(2, math.MinInt64, func() { close(ran) })
	require.NoError(t, err)
	select {
	case <-ran:
	case <-time.After(waitFor):
		t.Fatal("negative delay never ran")
	}
	assert.True(t, huge.Pending())
}

func TestStopReturnsExactlyTheUnfinishedTimers(t *testing.T) {
	s, err := shardwheel.New(shardwheel.WithShards(4))
	require.NoError(t, err)
	want := map[uint64]bool{}
	for i := range uint64(1000) {
		tm, err := s.Schedule(i, time.Hour, func() { t.Error("ran") })
		require.NoError(t, err)
		if i%3 == 0 {
			require.True(t, tm.Cancel())
		} else {
			want[i] = true
		}
	}
	assert.Equal(t, len(want), s.Pending())
	got := s.Stop()
	require.Len(t, got, len(want))
	for _, tm := range got {
		assert.True(t, want[tm.Key()], "key %d returned but not pending", tm.Key())
		delete(want, tm.Key())
		assert.False(t, tm.Pending())
		assert.False(t, tm.Cancel(), "Stop already accounted for it")
		assert.False(t, tm.Reset(time.Second))
	}
	assert.Empty(t, want)
	assert.Zero(t, s.Pending())
	assert.Nil(t, s.Stop(), "second Stop returns nothing")
}

func TestStopFromTask(t *testing.T) {
	for _, shards := range []int{1, 3} {
		s, err := shardwheel.New(shardwheel.WithShards(shards), shardwheel.WithTick(time.Millisecond))
		require.NoError(t, err)
		for i := range uint64(10) {
			_, err := s.Schedule(i, time.Hour, func() {})
			require.NoError(t, err)
		}
		returned := make(chan []shardwheel.Timeout, 1)
		_, err = s.Schedule(100, 0, func() { returned <- s.Stop() })
		require.NoError(t, err)
		select {
		case got := <-returned:
			assert.Len(t, got, 10)
		case <-time.After(waitFor):
			t.Fatal("Stop from a task deadlocked")
		}
		assert.Nil(t, s.Stop())
		assert.Zero(t, s.Pending())
	}
}

func TestConcurrentStopCallsWaitForTheFirst(t *testing.T) {
	s, err := shardwheel.New(shardwheel.WithShards(2))
	require.NoError(t, err)
	for i := range uint64(100) {
		_, err := s.Schedule(i, time.Hour, func() {})
		require.NoError(t, err)
	}
	var wg sync.WaitGroup
	var total atomic.Int64
	for range 8 {
		wg.Go(func() {
			total.Add(int64(len(s.Stop())))
			_, err := s.Schedule(1, time.Hour, func() {})
			assert.ErrorIs(t, err, shardwheel.ErrStopped, "every Stop returns after the stop is complete")
		})
	}
	wg.Wait()
	assert.EqualValues(t, 100, total.Load(), "exactly one Stop returns the timers")
}

func TestPanicHandlerAndShardSurvival(t *testing.T) {
	panics := make(chan any, 10)
	s := newScheduler(t, shardwheel.WithShards(1), shardwheel.WithTick(time.Millisecond),
		shardwheel.WithPanicHandler(func(v any) { panics <- v }))
	_, err := s.Schedule(1, 0, func() { panic("boom") })
	require.NoError(t, err)
	ran := make(chan struct{})
	_, err = s.Schedule(1, time.Millisecond, func() { close(ran) })
	require.NoError(t, err)
	select {
	case v := <-panics:
		assert.Equal(t, "boom", v)
	case <-time.After(waitFor):
		t.Fatal("panic handler not called")
	}
	select {
	case <-ran:
	case <-time.After(waitFor):
		t.Fatal("shard died with the panicking task")
	}
}

func TestExecutorRunsTasks(t *testing.T) {
	var submitted atomic.Int64
	s := newScheduler(t, shardwheel.WithTick(time.Millisecond), shardwheel.WithExecutor(func(task func()) {
		submitted.Add(1)
		go task()
	}))
	ran := make(chan struct{})
	_, err := s.Schedule(1, time.Millisecond, func() { close(ran) })
	require.NoError(t, err)
	select {
	case <-ran:
	case <-time.After(waitFor):
		t.Fatal("task never ran")
	}
	assert.EqualValues(t, 1, submitted.Load())
}

func TestSequentialKeysSpreadEvenly(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(8))
	const n = 800_000
	counts := make([]int, s.Shards())
	for k := range uint64(n) {
		counts[s.ShardOf(k)]++
	}
	for i, c := range counts {
		assert.InEpsilon(t, n/len(counts), c, 0.01, "shard %d has %d of %d keys", i, c, n)
	}
}

func TestSentinelErrorsAreDistinct(t *testing.T) {
	errs := []error{shardwheel.ErrStopped, shardwheel.ErrTooManyPending, shardwheel.ErrNilTask, shardwheel.ErrInvalidOption}
	for i, a := range errs {
		for j, b := range errs {
			assert.Equal(t, i == j, errors.Is(a, b))
		}
	}
}

func FuzzOptions(f *testing.F) {
	f.Add(1, int64(time.Millisecond), 512, 8192, 100000, 0)
	f.Add(0, int64(0), 0, 0, 0, -1)
	f.Add(-1, int64(-1), 1<<20, 1<<30, -5, 1<<30)
	f.Fuzz(func(t *testing.T, shards int, tick int64, wheel, ring, cap, maxPending int) {
		shards %= 64 // keep each run cheap: a valid config starts goroutines
		s, err := shardwheel.New(shardwheel.WithShards(shards), shardwheel.WithTick(time.Duration(tick)),
			shardwheel.WithWheelSize(wheel), shardwheel.WithRingSize(ring%(1<<16)),
			shardwheel.WithTransferCap(cap), shardwheel.WithMaxPending(maxPending))
		if err != nil {
			require.ErrorIs(t, err, shardwheel.ErrInvalidOption)
			require.Nil(t, s)
			return
		}
		tm, err := s.Schedule(1, time.Hour, func() {})
		if maxPending != 0 && maxPending < 1 {
			require.Error(t, err)
		} else {
			require.NoError(t, err)
		}
		stopped := s.Stop()
		if err == nil {
			require.Len(t, stopped, 1)
			require.Equal(t, tm.Key(), stopped[0].Key())
		}
	})
}
