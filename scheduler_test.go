package shardwheel_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"log/slog"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
)

func TestScheduleRunsTaskOnceNeverEarly(t *testing.T) {
	s := newScheduler(t, shardwheel.WithTick(time.Millisecond))
	const n = 500
	var ran, early atomic.Int64
	runs := make([]atomic.Int32, n)
	for i := range n {
		delay := time.Duration(i%20) * time.Millisecond
		start := time.Now()
		_, err := s.AfterFunc(delay, func() {
			if time.Since(start) < delay {
				early.Add(1)
			}
			runs[i].Add(1)
			ran.Add(1)
		}, shardwheel.ByKey(uint64(i)))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return ran.Load() >= n }, waitFor, pollEvery)
	// Stop waits for running tasks and no task runs after it: the counts
	// below are final, so a timer that ran twice, however late, shows.
	assert.Empty(t, s.Stop(), "every timer ran")
	for i := range runs {
		assert.EqualValues(t, 1, runs[i].Load(), "timer %d", i)
	}
	assert.EqualValues(t, n, ran.Load())
	assert.Zero(t, early.Load())
	assert.Zero(t, s.Pending())
}

func TestScheduleErrors(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(2), shardwheel.WithMaxPending(3))
	_, err := s.AfterFunc(time.Hour, nil, shardwheel.ByKey(1))
	assert.ErrorIs(t, err, shardwheel.ErrNilTask)
	_, err = s.AfterFunc(time.Hour, nil)
	assert.ErrorIs(t, err, shardwheel.ErrNilTask)

	var ts []shardwheel.Timer
	for i := range 3 {
		tm, err := s.AfterFunc(time.Hour, func() {}, shardwheel.ByKey(uint64(i)))
		require.NoError(t, err)
		ts = append(ts, tm)
	}
	_, err = s.AfterFunc(time.Hour, func() {}, shardwheel.ByKey(99))
	assert.ErrorIs(t, err, shardwheel.ErrTooManyPending)
	assert.Equal(t, 3, s.Pending(), "a rejected schedule leaves no trace")
	require.True(t, ts[0].Cancel())
	_, err = s.AfterFunc(time.Hour, func() {})
	assert.NoError(t, err, "the limit counts pending timers, not schedules")

	s.Stop()
	_, err = s.AfterFunc(time.Hour, func() {}, shardwheel.ByKey(1))
	assert.ErrorIs(t, err, shardwheel.ErrStopped)
	_, err = s.AfterFunc(time.Hour, func() {})
	assert.ErrorIs(t, err, shardwheel.ErrStopped)
}

func TestHugeAndNegativeDelays(t *testing.T) {
	s := newScheduler(t, shardwheel.WithTick(time.Millisecond))
	huge, err := s.AfterFunc(math.MaxInt64, func() { t.Error("huge delay ran") }, shardwheel.ByKey(1))
	require.NoError(t, err)
	assert.True(t, huge.Deadline().After(time.Now().Add(s.MaxDelay()-time.Second)))
	ran := make(chan struct{})
	_, err = s.AfterFunc(math.MinInt64, func() { close(ran) }, shardwheel.ByKey(2))
	require.NoError(t, err)
	select {
	case <-ran:
	case <-time.After(waitFor):
		t.Fatal("negative delay never ran")
	}
	assert.True(t, huge.Pending())
}

// TestWarnsOnceBeyondLiveLimit: New logs one warning when live Schedulers
// exceed the limit (64), not one per New; stopped ones do not count.
func TestWarnsOnceBeyondLiveLimit(t *testing.T) {
	var buf bytes.Buffer
	// slog.SetDefault redirects package log too, and setting the old
	// default back does not undo that.
	defer log.SetFlags(log.Flags())
	defer log.SetOutput(log.Writer())
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	shardwheel.RearmLiveWarning()
	base := shardwheel.LiveSchedulers()
	var made []*shardwheel.Scheduler
	defer func() {
		for _, s := range made {
			s.Stop()
		}
		assert.Equal(t, base, shardwheel.LiveSchedulers())
	}()
	newOne := func() {
		s, err := shardwheel.New(shardwheel.WithShards(1))
		require.NoError(t, err)
		made = append(made, s)
	}
	// A stopped Scheduler is not live.
	newOne()
	made[0].Stop()
	for shardwheel.LiveSchedulers() < shardwheel.WarnSchedulersForTest {
		newOne()
	}
	assert.Empty(t, buf.String(), "no warning at the limit")
	newOne()
	newOne()
	assert.Equal(t, 1, strings.Count(buf.String(), "too many live Schedulers"), buf.String())
	assert.Contains(t, buf.String(), fmt.Sprintf("live=%d limit=%d", shardwheel.WarnSchedulersForTest+1, shardwheel.WarnSchedulersForTest))
}

// TestNonPositiveDelayRunsWithinATick: a timer with delay 0, negative or
// math.MinInt64 runs at the next tick, so at most a tick after the call
// (plus lag, which a synctest bubble's clock leaves out), and its Deadline
// is within a tick of the call.
func TestNonPositiveDelayRunsWithinATick(t *testing.T) {
	synctest.Test(t, testNonPositiveDelayRunsWithinATick)
}

func testNonPositiveDelayRunsWithinATick(t *testing.T) {
	const tick = 100 * time.Millisecond
	s := newScheduler(t, shardwheel.WithShards(1), shardwheel.WithTick(tick))
	time.Sleep(tick / 3) // calls between ticks
	for _, d := range []time.Duration{0, -time.Hour, -1 << 63} {
		ran := make(chan time.Duration, 1)
		before := time.Now()
		tm, err := s.AfterFunc(d, func() { ran <- time.Since(before) }, shardwheel.ByKey(1))
		require.NoError(t, err)
		if dl := tm.Deadline(); !dl.IsZero() {
			assert.False(t, dl.Before(before), "delay %v: Deadline before the call", d)
			assert.True(t, dl.Before(time.Now().Add(tick)), "delay %v: Deadline a tick or more after the call: %v", d, time.Until(dl))
		}
		select {
		case took := <-ran:
			assert.LessOrEqual(t, took, tick, "delay %v ran %v after the call", d, took)
		case <-time.After(waitFor):
			t.Fatalf("delay %v never ran", d)
		}
	}
}

// TestShutdownEndsLiveness: a Scheduler is live from New until stopped;
// Shutdown with a done context stops it too, and a later Stop or Shutdown
// does not count it twice.
func TestShutdownEndsLiveness(t *testing.T) {
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
