package shardwheel_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
)

// A Scheduler made outside any testing/synctest bubble and shared with code
// that runs inside one (a package-level Scheduler, when that code's tests
// adopt synctest): its timers follow the real monotonic clock, whoever
// schedules them, and never run early on it; its contexts made inside the
// bubble are the context package's own, which follow the bubble's clock;
// nothing crashes the process. Tasks run on the shard goroutines, outside
// the bubble, so they report through atomics and channels made outside.

// ranAt records the clock reading at which each of n tasks ran, and closes
// done when all have.
type ranAt struct {
	s    *shardwheel.Scheduler
	at   []atomic.Int64
	left atomic.Int64
	done chan struct{}
}

func newRanAt(s *shardwheel.Scheduler, n int) *ranAt {
	r := &ranAt{s: s, at: make([]atomic.Int64, n), done: make(chan struct{})}
	r.left.Store(int64(n))
	return r
}

func (r *ranAt) task(i int) func() {
	return func() {
		if !r.at[i].CompareAndSwap(0, int64(shardwheel.ClockReading(r.s))) {
			panic("a task ran twice")
		}
		if r.left.Add(-1) == 0 {
			close(r.done)
		}
	}
}

// TestSharedSchedulerInsideABubbleIsNeverEarly schedules with every call
// from inside a bubble, and resets one made outside: each runs no earlier
// than its call's real clock reading plus its delay, and Deadline says no
// earlier either.
func TestSharedSchedulerInsideABubbleIsNeverEarly(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(2))
	ix := shardwheel.NewIndex[uint64](s)
	const delay = 30 * time.Millisecond
	const n = 6
	r := newRanAt(s, n)
	h, err := s.NewHandler(func(key uint64) { r.task(int(key))() })
	require.NoError(t, err)
	outside, err := s.AfterFunc(time.Hour, r.task(5))
	require.NoError(t, err)
	timeout := time.After(waitFor) // a channel of no bubble
	var calledAt [n]time.Duration
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		calls := []func() (shardwheel.Timer, error){
			func() (shardwheel.Timer, error) { return s.AfterFunc(delay, r.task(0), shardwheel.ByKey(1)) },
			func() (shardwheel.Timer, error) { return s.AfterFunc(delay, r.task(1)) },
			func() (shardwheel.Timer, error) { return h.AfterFunc(2, delay, shardwheel.ByKey(2)) },
			func() (shardwheel.Timer, error) { return h.AfterFunc(3, delay) },
			func() (shardwheel.Timer, error) { return ix.AfterFunc(4, delay, r.task(4)) },
		}
		// Deadline is the zero Time once the timer has run: on a busy host
		// the 30ms may be over before it is read. The timer's run is
		// checked below either way.
		deadlineNeverEarly := func(i int, tm shardwheel.Timer) {
			if dl := tm.Deadline(); !dl.IsZero() {
				assert.GreaterOrEqual(t, dl.Sub(shardwheel.Epoch(s)), calledAt[i]+delay,
					"call %d: Deadline is never before the call plus the delay, on the real clock", i)
			}
		}
		for i, call := range calls {
			calledAt[i] = shardwheel.ClockReading(s)
			tm, err := call()
			require.NoError(t, err)
			deadlineNeverEarly(i, tm)
		}
		calledAt[5] = shardwheel.ClockReading(s)
		require.True(t, outside.Reset(delay))
		deadlineNeverEarly(5, outside)
		select {
		case <-r.done:
		case <-timeout:
			t.Fatal("the timers never ran")
		}
		assert.Equal(t, start, time.Now(), "waiting for the shared Scheduler does not move the bubble's clock")
	})
	for i := range n {
		assert.GreaterOrEqual(t, time.Duration(r.at[i].Load()), calledAt[i]+delay, "timer %d ran early", i)
	}
	assert.Zero(t, s.Pending())
}

// TestSharedSchedulerContextsInsideABubble: a context made inside a bubble
// from a shared Scheduler is the context package's own: it expires on the
// bubble's clock, its Done, Err, Cause, children and context.AfterFunc work
// there, and it holds no wheel timer (none would crash closing a channel
// of the bubble from outside).
func TestSharedSchedulerContextsInsideABubble(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(2))
	errCause := errors.New("too slow")
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		parent, cancelParent := context.WithCancel(context.Background())
		defer cancelParent()
		ctxs := []struct {
			name string
			make func() (context.Context, context.CancelFunc)
			want error
		}{
			{"WithTimeout", func() (context.Context, context.CancelFunc) { return s.WithTimeout(parent, time.Hour) }, context.DeadlineExceeded},
			{"WithTimeoutCause", func() (context.Context, context.CancelFunc) {
				return s.WithTimeoutCause(parent, time.Hour, errCause)
			}, errCause},
			{"WithDeadline", func() (context.Context, context.CancelFunc) {
				return s.WithDeadline(parent, time.Now().Add(time.Hour))
			}, context.DeadlineExceeded},
			{"WithDeadlineCause", func() (context.Context, context.CancelFunc) {
				return s.WithDeadlineCause(parent, time.Now().Add(time.Hour), errCause)
			}, errCause},
		}
		for _, c := range ctxs {
			ctx, cancel := c.make()
			assert.Zero(t, s.Pending(), "%s: no wheel timer", c.name)
			child, cancelChild := context.WithCancel(ctx)
			var after atomic.Bool
			context.AfterFunc(ctx, func() { after.Store(true) })
			assert.NoError(t, ctx.Err())
			<-ctx.Done()
			assert.Equal(t, start.Add(time.Hour), time.Now(), "%s: expires at its deadline on the bubble's clock", c.name)
			assert.Equal(t, context.DeadlineExceeded, ctx.Err(), c.name)
			assert.Equal(t, c.want, context.Cause(ctx), c.name)
			<-child.Done()
			assert.Equal(t, context.DeadlineExceeded, child.Err(), c.name)
			synctest.Wait()
			assert.True(t, after.Load(), "%s: context.AfterFunc ran", c.name)
			cancelChild()
			cancel()
			start = time.Now()
		}
		// A cancel before the deadline, and a parent that ends first.
		ctx, cancel := s.WithTimeout(parent, time.Minute)
		cancel()
		assert.Equal(t, context.Canceled, ctx.Err())
		ctx, cancel = s.WithTimeout(parent, time.Minute)
		defer cancel()
		cancelParent()
		<-ctx.Done()
		assert.Equal(t, context.Canceled, ctx.Err())
	})
}

// TestSharedSchedulerStoppedInsideABubble: Stop and Shutdown called inside
// a bubble stop a Scheduler made outside: they return its timers, scheduled
// inside and outside, which never run; nothing crashes.
func TestSharedSchedulerStoppedInsideABubble(t *testing.T) {
	for _, how := range []string{"Stop", "Shutdown"} {
		t.Run(how, func(t *testing.T) {
			s := newUnstopped(t, shardwheel.WithShards(2))
			var ran atomic.Int64
			_, err := s.AfterFunc(time.Hour, func() { ran.Add(1) })
			require.NoError(t, err)
			synctest.Test(t, func(t *testing.T) {
				_, err := s.AfterFunc(time.Hour, func() { ran.Add(1) }, shardwheel.ByKey(7))
				require.NoError(t, err)
				var out []shardwheel.Timer
				if how == "Stop" {
					out = s.Stop()
				} else {
					out, err = s.Shutdown(context.Background())
					require.NoError(t, err)
				}
				assert.Len(t, out, 2)
				for _, tm := range out {
					assert.False(t, tm.Pending())
					assert.NotNil(t, tm.Task())
				}
				_, err = s.AfterFunc(time.Millisecond, func() { ran.Add(1) })
				assert.ErrorIs(t, err, shardwheel.ErrStopped)
			})
			assert.Zero(t, ran.Load())
			assert.Zero(t, s.Pending())
		})
	}
}
