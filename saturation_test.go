package shardwheel_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
)

// Every public input that becomes a deadline saturates as package time
// does: a delay at or below 0 means now, a delay beyond MaxDelay means
// MaxDelay, and nothing wraps round into the past or the far future.

// extremeDelays are the delays every call is tried with, and what each
// must become: due at once (the next tick), or clamped to MaxDelay.
func extremeDelays(s *shardwheel.Scheduler) []struct {
	name string
	d    time.Duration
	now  bool // due at once; else due at MaxDelay or at d
} {
	return []struct {
		name string
		d    time.Duration
		now  bool
	}{
		{"MinInt64", math.MinInt64, true},
		{"-1", -1, true},
		{"0", 0, true},
		{"1", 1, true},
		{"MaxDelay", s.MaxDelay(), false},
		{"MaxDelay+1", s.MaxDelay() + 1, false},
		{"MaxInt64", math.MaxInt64, false},
	}
}

// checkDue checks that t, scheduled between before and after with delay d,
// is due where d says: within a tick or two of the call if now, else at
// MaxDelay (or d, if less) after the call, never earlier.
func checkDue(t *testing.T, s *shardwheel.Scheduler, tm shardwheel.Timer, before, after time.Time, d time.Duration, now bool) {
	t.Helper()
	if now {
		// Due at the next tick, or already run.
		if dl := tm.Deadline(); !dl.IsZero() {
			assert.False(t, dl.Before(before), "due %v before the call", before.Sub(dl))
			assert.True(t, dl.Before(after.Add(2*s.Tick())), "due %v after the call", dl.Sub(after))
		}
		return
	}
	want := min(d, s.MaxDelay())
	dl := tm.Deadline()
	require.True(t, tm.Pending(), "a far timer must still be pending")
	assert.False(t, dl.Before(before.Add(want)), "due %v before the call plus %v", before.Add(want).Sub(dl), want)
	assert.True(t, dl.Before(after.Add(want+2*s.Tick())), "due %v after the call plus %v", dl.Sub(after.Add(want)), want)
}

// TestExtremeDelaysSaturate tries every scheduling call, Reset and
// Index.Reset with the extreme delays.
func TestExtremeDelaysSaturate(t *testing.T) {
	s := newScheduler(t, shardwheel.WithTick(time.Millisecond))
	ix := shardwheel.NewIndex[uint64](s)
	h, err := s.NewHandler(func(uint64) {})
	require.NoError(t, err)
	var key uint64
	calls := map[string]func(d time.Duration) (shardwheel.Timer, error){
		"AfterFunc": func(d time.Duration) (shardwheel.Timer, error) { return s.AfterFunc(d, noop) },
		"AfterFunc, ByKey": func(d time.Duration) (shardwheel.Timer, error) {
			key++
			return s.AfterFunc(d, noop, shardwheel.ByKey(key))
		},
		"Index.AfterFunc": func(d time.Duration) (shardwheel.Timer, error) {
			key++
			return ix.AfterFunc(key, d, noop)
		},
		"AfterFunc, ByKey, Slack": func(d time.Duration) (shardwheel.Timer, error) {
			key++
			return s.AfterFunc(d, noop, shardwheel.ByKey(key), shardwheel.Slack(time.Millisecond))
		},
		"AfterFunc, Slack":  func(d time.Duration) (shardwheel.Timer, error) { return s.AfterFunc(d, noop, shardwheel.Slack(0)) },
		"Handler.AfterFunc": func(d time.Duration) (shardwheel.Timer, error) { key++; return h.AfterFunc(key, d) },
		"Handler.AfterFunc, ByKey": func(d time.Duration) (shardwheel.Timer, error) {
			key++
			return h.AfterFunc(key, d, shardwheel.ByKey(key))
		},
		"Index.AfterFunc, ByKey, Slack": func(d time.Duration) (shardwheel.Timer, error) {
			key++
			return ix.AfterFunc(key, d, noop, shardwheel.ByKey(key), shardwheel.Slack(time.Millisecond))
		},
		"Reset": func(d time.Duration) (shardwheel.Timer, error) {
			tm, err := s.AfterFunc(time.Hour, noop)
			if err == nil && !tm.Reset(d) {
				err = errors.New("Reset returned false")
			}
			return tm, err
		},
		"Index.Reset": func(d time.Duration) (shardwheel.Timer, error) {
			key++
			tm, err := ix.AfterFunc(key, time.Hour, noop)
			if err == nil && !ix.Reset(key, d) {
				err = errors.New("Index.Reset returned false")
			}
			return tm, err
		},
	}
	for name, call := range calls {
		for _, c := range extremeDelays(s) {
			t.Run(fmt.Sprintf("%s(%s)", name, c.name), func(t *testing.T) {
				before := time.Now()
				tm, err := call(c.d)
				after := time.Now()
				require.NoError(t, err)
				checkDue(t, s, tm, before, after, c.d, c.now)
				tm.Cancel()
			})
		}
	}
}

// TestExtremeSlackAndPeriodsSaturate tries a timer's slack and a series'
// period (and its Reset) with the extreme durations: slack never moves a
// deadline earlier, and a period below the tick is refused.
func TestExtremeSlackAndPeriodsSaturate(t *testing.T) {
	s := newScheduler(t, shardwheel.WithTick(time.Millisecond))
	for _, c := range extremeDelays(s) {
		t.Run("slack "+c.name, func(t *testing.T) {
			before := time.Now()
			tm, err := s.AfterFunc(time.Hour, noop, shardwheel.Slack(c.d))
			require.NoError(t, err)
			dl := tm.Deadline()
			assert.False(t, dl.Before(before.Add(time.Hour)), "slack %v made it early", c.d)
			assert.True(t, dl.Before(time.Now().Add(time.Hour+max(min(c.d, s.MaxDelay()), 0)+2*s.Tick())))
			tm.Cancel()
		})
		t.Run("period "+c.name, func(t *testing.T) {
			before := time.Now()
			tm, err := s.Every(c.d, noop, shardwheel.OnMissed(shardwheel.SkipMissed))
			if c.d < s.Tick() {
				require.ErrorIs(t, err, shardwheel.ErrBadPeriod)
				return
			}
			require.NoError(t, err)
			checkDue(t, s, tm, before, time.Now(), c.d, false)
			tm.Cancel()
		})
		t.Run("series Reset "+c.name, func(t *testing.T) {
			tm, err := s.Every(time.Hour, noop, shardwheel.OnMissed(shardwheel.SkipMissed))
			require.NoError(t, err)
			defer tm.Cancel()
			before := time.Now()
			if c.d < s.Tick() {
				assert.False(t, tm.Reset(c.d), "a period below the tick is refused, as Every refuses it")
				return
			}
			require.True(t, tm.Reset(c.d))
			checkDue(t, s, tm, before, time.Now(), c.d, false)
		})
	}
}

// TestExtremeContextTimeoutsSaturate: WithTimeout with every extreme
// timeout, and WithDeadline with dates from the zero Time to the far
// future, give what package context gives: done at once for a deadline
// that has passed, never for one centuries ahead, and the deadline asked
// for.
func TestExtremeContextTimeoutsSaturate(t *testing.T) {
	s := newScheduler(t, shardwheel.WithTick(time.Millisecond))
	for _, c := range extremeDelays(s) {
		t.Run("WithTimeout "+c.name, func(t *testing.T) {
			before := time.Now()
			ctx, cancel := s.WithTimeout(context.Background(), c.d)
			defer cancel()
			after := time.Now()
			dl, ok := ctx.Deadline()
			require.True(t, ok)
			if c.d <= 0 {
				require.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)
				return
			}
			// package context's deadline is now plus the timeout, which
			// time.Time.Add takes centuries ahead without wrapping.
			assert.False(t, dl.Before(before.Add(c.d)), "deadline %v, before the call plus %v", dl, c.d)
			assert.False(t, dl.After(after.Add(c.d)), "deadline %v, after the call plus %v", dl, c.d)
			if c.d > time.Second {
				assert.NoError(t, ctx.Err(), "a context of %v is not done at once", c.d)
			}
		})
	}
	now := time.Now()
	for _, c := range []struct {
		name string
		d    time.Time
		done bool
	}{
		{"zero Time", time.Time{}, true},
		{"year 1", time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), true},
		{"an hour ago", now.Add(-time.Hour), true},
		{"in an hour", now.Add(time.Hour), false},
		{"beyond MaxDelay", now.Add(s.MaxDelay() + time.Hour), false},
		{"year 9999", time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), false},
		{"now plus MaxInt64", now.Add(math.MaxInt64), false},
		{"far future", time.Unix(1<<62, 0), false},
	} {
		t.Run("WithDeadline "+c.name, func(t *testing.T) {
			ctx, cancel := s.WithDeadline(context.Background(), c.d)
			defer cancel()
			dl, ok := ctx.Deadline()
			require.True(t, ok)
			assert.True(t, dl.Equal(c.d), "deadline %v, want %v", dl, c.d)
			if c.done {
				assert.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)
			} else {
				assert.NoError(t, ctx.Err())
			}
		})
	}
}

// TestShutdownWithExtremeDeadlines: Shutdown's context may have any
// deadline; a far one never times out, a past one returns its error at
// worst, and either way every timer is returned once.
func TestShutdownWithExtremeDeadlines(t *testing.T) {
	for _, c := range []struct {
		name string
		d    time.Time
	}{
		{"zero Time", time.Time{}},
		{"an hour ago", time.Now().Add(-time.Hour)},
		{"year 9999", time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"far future", time.Unix(1<<62, 0)},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := shardwheel.New()
			require.NoError(t, err)
			tm, err := s.AfterFunc(time.Hour, noop)
			require.NoError(t, err)
			ctx, cancel := context.WithDeadline(context.Background(), c.d)
			defer cancel()
			out, err := s.Shutdown(ctx)
			if c.d.After(time.Now()) {
				require.NoError(t, err)
			} else if err != nil {
				require.ErrorIs(t, err, context.DeadlineExceeded)
			}
			require.Equal(t, []shardwheel.Timer{tm}, out)
			require.NoError(t, func() error { _, err := s.Shutdown(context.Background()); return err }())
		})
	}
}
