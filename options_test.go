package shardwheel_test

import (
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
	"github.com/shardwheel/shardwheel/shard"
)

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
		{shardwheel.WithWheelSize(3), "WithWheelSize(3): must be a power of two in [2, 65536]"},
		{shardwheel.WithWheelSize(100), "WithWheelSize(100)"},
		{shardwheel.WithInitialCapacity(0), "WithInitialCapacity(0)"},
		{shardwheel.WithInitialCapacity(maxInitialCapacity + 1), "WithInitialCapacity(4194305)"},
		{shardwheel.WithTransferCap(0), "WithTransferCap(0)"},
		{shardwheel.WithMaxPending(-1), "WithMaxPending(-1)"},
		{shardwheel.WithBlockedAfter(-time.Millisecond), "WithBlockedAfter(-1ms)"},
		{shardwheel.WithBlockedAfter(500 * time.Microsecond), "WithBlockedAfter(500µs): must be 0 (off) or at least the tick (1ms)"},
		{shardwheel.WithMaxBlockedTasks(0), "WithMaxBlockedTasks(0)"},
		{shardwheel.WithMaxBlockedTasks(shardwheel.MaxBlockedTasks + 1), "WithMaxBlockedTasks(1048577)"},
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
		shardwheel.WithWheelSize(128), shardwheel.WithInitialCapacity(10), shardwheel.WithTransferCap(1),
		shardwheel.WithMaxPending(5), shardwheel.WithAffinity(false))
	assert.Equal(t, 3, s.Shards())
	assert.Equal(t, time.Millisecond, s.Tick())
	assert.Greater(t, s.MaxDelay(), 365*24*time.Hour)
}

// FuzzOptions checks New against the documented ranges of each option: it
// rejects every configuration outside them, accepts every one inside them
// that fits in memory, and a scheduler it accepts has the shards and tick
// asked for and takes a timer.
func FuzzOptions(f *testing.F) {
	f.Add(1, int64(time.Millisecond), 512, 8192, 100000, 0)
	f.Add(0, int64(0), 0, 0, 0, -1)
	f.Add(-1, int64(-1), 1<<20, 1<<30, -5, 1<<30)
	f.Add(63, int64(time.Hour), 2, 1, 1, 1)
	f.Fuzz(func(t *testing.T, shards int, tick int64, wheel, ring, cap, maxPending int) {
		shards %= 64 // keep each run cheap: a valid config starts goroutines
		ring %= 1 << 16
		s, err := shardwheel.New(shardwheel.WithShards(shards), shardwheel.WithTick(time.Duration(tick)),
			shardwheel.WithWheelSize(wheel), shardwheel.WithInitialCapacity(ring),
			shardwheel.WithTransferCap(cap), shardwheel.WithMaxPending(maxPending))
		valid := shards >= 1 &&
			time.Duration(tick) >= shardwheel.MinTick && time.Duration(tick) <= shardwheel.MaxTick &&
			wheel >= 2 && wheel <= shardwheel.MaxWheelSize && wheel&(wheel-1) == 0 &&
			ring >= 1 && ring <= maxInitialCapacity &&
			cap >= 1 && maxPending >= 0
		if valid && errors.Is(err, shardwheel.ErrInvalidOption) && strings.Contains(err.Error(), "MiB") {
			valid = false // in range, but more memory than the process may use
		}
		if !valid {
			require.ErrorIs(t, err, shardwheel.ErrInvalidOption)
			require.Nil(t, s)
			return
		}
		require.NoError(t, err, "a configuration inside the documented ranges")
		defer s.Stop()
		require.Equal(t, shards, s.Shards())
		require.Equal(t, time.Duration(tick), s.Tick())
		tm, err := s.AfterFunc(time.Hour, func() {}, shardwheel.ByKey(1))
		require.NoError(t, err, "every valid configuration takes at least one timer")
		stopped := s.Stop()
		require.Len(t, stopped, 1)
		require.Equal(t, tm.Key(), stopped[0].Key())
	})
}

// TestDefaultTickAndMaxDelay: the default tick is 1ms, and MaxDelay is
// 2^36-2 ticks: about 795 days at 1ms, 21.8 years at 10ms.
func TestDefaultTickAndMaxDelay(t *testing.T) {
	assert.Equal(t, time.Millisecond, shardwheel.DefaultTick)
	s := newScheduler(t)
	assert.Equal(t, shardwheel.DefaultTick, s.Tick())
	// 2^36-2 ticks: the wheel keeps a margin of two below 2^36
	assert.Equal(t, time.Duration(1<<36-2)*time.Millisecond, s.MaxDelay())
	s10 := newScheduler(t, shardwheel.WithTick(10*time.Millisecond))
	assert.Equal(t, time.Duration(1<<36-2)*10*time.Millisecond, s10.MaxDelay())
	// 795 days at the default 1ms, 21.8 years at 10ms
	assert.InDelta(t, 795.0, s.MaxDelay().Hours()/24, 0.6)
	assert.InDelta(t, 21.8, s10.MaxDelay().Hours()/24/365.25, 0.05)
}

// TestSmallestWheelSizesRunTimersAtEveryLevel: wheel sizes 2, 4 and 8 (2
// builds the wheel of 4) are accepted, and timers at every level of such a
// wheel run once, never early, cascading down its many levels.
func TestSmallestWheelSizesRunTimersAtEveryLevel(t *testing.T) {
	for _, size := range []int{2, 4, 8} {
		s := newScheduler(t, shardwheel.WithShards(1), shardwheel.WithWheelSize(size))
		var wg sync.WaitGroup
		early, runs := atomic.Int32{}, atomic.Int32{}
		for _, ms := range []int{0, 1, 2, 3, 5, 9, 17, 33, 70, 130} {
			delay := time.Duration(ms) * time.Millisecond
			before := time.Now()
			wg.Add(1)
			_, err := s.AfterFunc(delay, func() {
				if time.Since(before) < delay {
					early.Add(1)
				}
				runs.Add(1)
				wg.Done()
			}, shardwheel.ByKey(uint64(ms)))
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

// TestWheelSizeTickAndPendingLimits: wheel sizes that are powers of two
// from 2 to 65536 are accepted (2 builds the wheel of 4), ticks 1ms to 1h;
// sizes that are not powers of two, and sizes, ticks and pending limits
// outside their ranges, and a nil Option are ErrInvalidOption, and the
// error names the option and its value.
func TestWheelSizeTickAndPendingLimits(t *testing.T) {
	assert.Equal(t, shard.Footprint(4, 2), shard.Footprint(2, 2), "sizes 2 and 4 both use 4")
	assert.NotEqual(t, shard.Footprint(4, 2), shard.Footprint(8, 2))
	for _, n := range []int{2, 4, 512, 65536} {
		newScheduler(t, shardwheel.WithShards(1), shardwheel.WithWheelSize(n))
	}
	for _, n := range []int{-1, 0, 1, 3, 5, 6, 100, 511, 513, 65535, 65537} {
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
