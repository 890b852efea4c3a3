package shardwheel_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/shardwheel/shardwheel"
)

// The conformance suite: the context package's own tests of WithDeadline,
// WithTimeout and their Cause variants (src/context/x_test.go), run against
// package context and against a Scheduler side by side. Each case states
// the context package's answer; both implementations must give it.

// impl is one implementation of the four functions.
type impl struct {
	name              string
	WithDeadline      func(context.Context, time.Time) (context.Context, context.CancelFunc)
	WithTimeout       func(context.Context, time.Duration) (context.Context, context.CancelFunc)
	WithDeadlineCause func(context.Context, time.Time, error) (context.Context, context.CancelFunc)
	WithTimeoutCause  func(context.Context, time.Duration, error) (context.Context, context.CancelFunc)
}

var stdImpl = impl{"context", context.WithDeadline, context.WithTimeout, context.WithDeadlineCause, context.WithTimeoutCause}

func wheelImpl(s *shardwheel.Scheduler) impl {
	return impl{"shardwheel", s.WithDeadline, s.WithTimeout, s.WithDeadlineCause, s.WithTimeoutCause}
}

// impls returns both implementations, the wheel's on a 1ms-tick scheduler
// stopped at the end of the test.
func impls(t *testing.T) []impl {
	return []impl{stdImpl, wheelImpl(newScheduler(t, shardwheel.WithTick(time.Millisecond)))}
}

const (
	shortDuration    = time.Millisecond
	veryLongDuration = 1000 * time.Hour
)

// otherContext is a Context that is not one of package context's own, as in
// x_test.go.
type otherContext struct{ context.Context }

// waitDone waits for c to be done, failing the test after waitFor.
func waitDone(t *testing.T, c context.Context, name string) {
	t.Helper()
	select {
	case <-c.Done():
	case <-time.After(waitFor):
		t.Fatalf("%s: not done after %v", name, waitFor)
	}
}

func testDeadline(t *testing.T, c context.Context, name string) {
	t.Helper()
	waitDone(t, c, name)
	assert.Equal(t, context.DeadlineExceeded, c.Err(), name)
}

func TestContextDeadline(t *testing.T) {
	for _, m := range impls(t) {
		t.Run(m.name, func(t *testing.T) {
			c, _ := m.WithDeadline(context.Background(), time.Now().Add(shortDuration))
			assert.True(t, strings.HasPrefix(fmt.Sprint(c), "context.Background.WithDeadline("), fmt.Sprint(c))
			testDeadline(t, c, "WithDeadline")

			c, _ = m.WithDeadline(context.Background(), time.Now().Add(shortDuration))
			testDeadline(t, otherContext{c}, "WithDeadline+otherContext")

			c, _ = m.WithDeadline(context.Background(), time.Now().Add(shortDuration))
			c, _ = m.WithDeadline(otherContext{c}, time.Now().Add(veryLongDuration))
			testDeadline(t, c, "WithDeadline+otherContext+WithDeadline")

			c, _ = m.WithDeadline(context.Background(), time.Now().Add(-shortDuration))
			testDeadline(t, c, "WithDeadline+inthepast")

			c, _ = m.WithDeadline(context.Background(), time.Now())
			testDeadline(t, c, "WithDeadline+now")
		})
	}
}

func TestContextTimeout(t *testing.T) {
	for _, m := range impls(t) {
		t.Run(m.name, func(t *testing.T) {
			c, _ := m.WithTimeout(context.Background(), shortDuration)
			assert.True(t, strings.HasPrefix(fmt.Sprint(c), "context.Background.WithDeadline("), fmt.Sprint(c))
			testDeadline(t, c, "WithTimeout")

			c, _ = m.WithTimeout(context.Background(), shortDuration)
			testDeadline(t, otherContext{c}, "WithTimeout+otherContext")

			c, _ = m.WithTimeout(context.Background(), shortDuration)
			c, _ = m.WithTimeout(otherContext{c}, veryLongDuration)
			testDeadline(t, c, "WithTimeout+otherContext+WithTimeout")

			c, _ = m.WithTimeout(context.Background(), 0)
			testDeadline(t, c, "WithTimeout(0)")
			c, _ = m.WithTimeout(context.Background(), -time.Hour)
			testDeadline(t, c, "WithTimeout(-1h)")
		})
	}
}

// TestContextCanceledTimeout: the CancelFunc ends the context before it
// returns, under a parent that is not one of package context's.
func TestContextCanceledTimeout(t *testing.T) {
	for _, m := range impls(t) {
		t.Run(m.name, func(t *testing.T) {
			c, _ := m.WithTimeout(context.Background(), time.Second)
			c, cancel := m.WithTimeout(otherContext{c}, veryLongDuration)
			cancel()
			select {
			case <-c.Done():
			default:
				t.Fatal("Done is not closed after cancel returned")
			}
			assert.Equal(t, context.Canceled, c.Err())
		})
	}
}

type ctxKey int

func TestContextValuesAndDeadline(t *testing.T) {
	for _, m := range impls(t) {
		t.Run(m.name, func(t *testing.T) {
			parent := context.WithValue(context.Background(), ctxKey(1), "one")
			d := time.Now().Add(time.Hour)
			c, cancel := m.WithDeadline(parent, d)
			defer cancel()
			assert.Equal(t, "one", c.Value(ctxKey(1)))
			assert.Nil(t, c.Value(ctxKey(2)))
			got, ok := c.Deadline()
			assert.True(t, ok)
			assert.True(t, got.Equal(d), "Deadline() = %v, want %v", got, d)
			assert.Nil(t, c.Err())

			// A later deadline than the parent's: the parent's counts,
			// and the child is WithCancel of it.
			early := time.Now().Add(time.Minute)
			p, pcancel := context.WithDeadline(parent, early)
			defer pcancel()
			c2, cancel2 := m.WithDeadline(p, d)
			got, _ = c2.Deadline()
			assert.True(t, got.Equal(early), "Deadline() = %v, want the parent's %v", got, early)
			cancel2()
			assert.Equal(t, context.Canceled, c2.Err())
			assert.Nil(t, p.Err())
		})
	}
}

func TestContextCause(t *testing.T) {
	var (
		forever       = 1e6 * time.Second
		parentCause   = errors.New("parentCause")
		tooSlow       = errors.New("tooSlow")
		finishedEarly = errors.New("finishedEarly")
	)
	for _, m := range impls(t) {
		for _, tc := range []struct {
			name       string
			ctx        func() context.Context
			err, cause error
		}{
			{"WithTimeout", func() context.Context {
				ctx, cancel := m.WithTimeout(context.Background(), 0)
				cancel()
				return ctx
			}, context.DeadlineExceeded, context.DeadlineExceeded},
			{"WithTimeout canceled", func() context.Context {
				ctx, cancel := m.WithTimeout(context.Background(), forever)
				cancel()
				return ctx
			}, context.Canceled, context.Canceled},
			{"WithTimeoutCause", func() context.Context {
				ctx, cancel := m.WithTimeoutCause(context.Background(), 0, tooSlow)
				cancel()
				return ctx
			}, context.DeadlineExceeded, tooSlow},
			{"WithTimeoutCause expires", func() context.Context {
				ctx, _ := m.WithTimeoutCause(context.Background(), shortDuration, tooSlow)
				<-ctx.Done()
				return ctx
			}, context.DeadlineExceeded, tooSlow},
			{"WithTimeoutCause canceled", func() context.Context {
				ctx, cancel := m.WithTimeoutCause(context.Background(), forever, tooSlow)
				cancel()
				return ctx
			}, context.Canceled, context.Canceled},
			{"WithTimeoutCause stacked", func() context.Context {
				ctx, cancel := context.WithCancelCause(context.Background())
				ctx, _ = m.WithTimeoutCause(ctx, 0, tooSlow)
				cancel(finishedEarly)
				return ctx
			}, context.DeadlineExceeded, tooSlow},
			{"WithTimeoutCause stacked, expired before the parent's cancel", func() context.Context {
				ctx, cancel := context.WithCancelCause(context.Background())
				ctx, _ = m.WithTimeoutCause(ctx, shortDuration, tooSlow)
				<-ctx.Done()
				cancel(finishedEarly)
				return ctx
			}, context.DeadlineExceeded, tooSlow},
			{"WithTimeoutCause stacked canceled", func() context.Context {
				ctx, cancel := context.WithCancelCause(context.Background())
				ctx, _ = m.WithTimeoutCause(ctx, forever, tooSlow)
				cancel(finishedEarly)
				return ctx
			}, context.Canceled, finishedEarly},
			{"canceled, then the parent with a cause", func() context.Context {
				ctx, cancelParent := context.WithCancelCause(context.Background())
				ctx, cancel := m.WithTimeout(ctx, forever)
				cancel()
				cancelParent(parentCause)
				return ctx
			}, context.Canceled, context.Canceled},
			{"parent with a cause, then canceled", func() context.Context {
				ctx, cancelParent := context.WithCancelCause(context.Background())
				ctx, cancel := m.WithTimeout(ctx, forever)
				cancelParent(parentCause)
				cancel()
				return ctx
			}, context.Canceled, parentCause},
			{"parent already canceled with a cause", func() context.Context {
				ctx, cancelParent := context.WithCancelCause(context.Background())
				cancelParent(parentCause)
				ctx, _ = m.WithTimeout(ctx, forever)
				return ctx
			}, context.Canceled, parentCause},
			{"parent's deadline passed first", func() context.Context {
				ctx, cancelParent := context.WithTimeoutCause(context.Background(), 0, parentCause)
				defer cancelParent()
				ctx, _ = m.WithTimeoutCause(ctx, forever, tooSlow)
				return ctx
			}, context.DeadlineExceeded, parentCause},
			{"WithCancelCause child of ours", func() context.Context {
				ctx, cancel := m.WithTimeout(context.Background(), forever)
				ctx, cancelChild := context.WithCancelCause(ctx)
				cancel()
				cancelChild(finishedEarly)
				return ctx
			}, context.Canceled, context.Canceled},
			{"WithCancelCause child of ours, child first", func() context.Context {
				ctx, cancel := m.WithTimeout(context.Background(), forever)
				defer cancel()
				ctx, cancelChild := context.WithCancelCause(ctx)
				cancelChild(finishedEarly)
				return ctx
			}, context.Canceled, finishedEarly},
			{"WithoutCancel timeout", func() context.Context {
				ctx, cancel := m.WithTimeoutCause(context.Background(), 0, tooSlow)
				ctx = context.WithoutCancel(ctx)
				cancel()
				return ctx
			}, nil, nil},
			{"ours under ours, outer deadline", func() context.Context {
				ctx, _ := m.WithTimeoutCause(context.Background(), shortDuration, parentCause)
				ctx, _ = m.WithTimeoutCause(ctx, shortDuration+time.Hour, tooSlow)
				<-ctx.Done()
				return ctx
			}, context.DeadlineExceeded, parentCause},
		} {
			t.Run(m.name+"/"+tc.name, func(t *testing.T) {
				ctx := tc.ctx()
				if tc.err != nil {
					waitDone(t, ctx, tc.name) // a parent's cancel may reach us on another goroutine
				}
				assert.Equal(t, tc.err, ctx.Err())
				assert.Equal(t, tc.cause, context.Cause(ctx))
			})
		}
	}
}

// TestContextCauseRace polls Cause while the deadline passes: the cause is
// never seen before it is set, nor another one.
func TestContextCauseRace(t *testing.T) {
	cause := errors.New("TestContextCauseRace")
	for _, m := range impls(t) {
		t.Run(m.name, func(t *testing.T) {
			ctx, cancel := m.WithTimeoutCause(context.Background(), shortDuration, cause)
			defer cancel()
			require.Eventually(t, func() bool {
				err := context.Cause(ctx)
				if err != nil {
					assert.Equal(t, cause, err)
					assert.Equal(t, context.DeadlineExceeded, ctx.Err())
				}
				return err != nil
			}, waitFor, time.Microsecond)
		})
	}
}

// TestContextErrDoneRace: once Err is non-nil, Done is closed (Go issue
// 75533).
func TestContextErrDoneRace(t *testing.T) {
	for _, m := range impls(t) {
		t.Run(m.name, func(t *testing.T) {
			for range 100 {
				ctx, cancel := m.WithTimeout(context.Background(), veryLongDuration)
				donec := ctx.Done()
				go cancel()
				require.Eventually(t, func() bool { return ctx.Err() != nil }, waitFor, time.Microsecond)
				select {
				case <-donec:
				default:
					t.Fatal("ctx.Err is non-nil, but ctx.Done is not closed")
				}
			}
		})
	}
}

// TestContextSimultaneousCancels builds a tree of contexts, alternating
// package context's and ours, cancels them all concurrently in random
// order, and waits for every one.
func TestContextSimultaneousCancels(t *testing.T) {
	s := newScheduler(t)
	root, cancel := s.WithTimeout(context.Background(), veryLongDuration)
	m := map[context.Context]context.CancelFunc{root: cancel}
	q := []context.Context{root}
	for len(q) != 0 && len(m) < 200 {
		parent := q[0]
		q = q[1:]
		for i := range 4 {
			var ctx context.Context
			var cancel context.CancelFunc
			if (i+len(m))%2 == 0 {
				ctx, cancel = context.WithCancel(parent)
			} else {
				ctx, cancel = s.WithTimeout(parent, veryLongDuration)
			}
			m[ctx] = cancel
			q = append(q, ctx)
		}
	}
	var wg sync.WaitGroup
	for _, cancel := range m {
		wg.Go(cancel)
	}
	for ctx := range m {
		waitDone(t, ctx, "tree")
		assert.Equal(t, context.Canceled, ctx.Err())
	}
	within(t, "cancel funcs", wg.Wait)
	assert.Zero(t, s.Pending())
}

// TestContextLayers mirrors x_test.go's testLayers: a random stack of
// values, WithCancel and our contexts, cancelled at a random layer or left
// to time out; values survive and the bottom is done.
func TestContextLayers(t *testing.T) {
	s := newScheduler(t, shardwheel.WithTick(time.Millisecond))
	for _, timeout := range []bool{false, true} {
		for seed := range uint64(20) {
			r := rand.New(rand.NewPCG(seed, 0))
			type value int
			var vals []*value
			var cancels []context.CancelFunc
			timers := 0
			ctx := context.Background()
			for i := 0; i < 30 || timers == 0 || len(cancels) == 0 || len(vals) == 0; i++ {
				switch r.IntN(4) {
				case 0:
					v := new(value)
					ctx = context.WithValue(ctx, v, v)
					vals = append(vals, v)
				case 1:
					var cancel context.CancelFunc
					ctx, cancel = context.WithCancel(ctx)
					cancels = append(cancels, cancel)
				default:
					d := veryLongDuration
					if timeout {
						d = shortDuration
					}
					var cancel context.CancelFunc
					ctx, cancel = s.WithTimeout(ctx, d)
					cancels = append(cancels, cancel)
					timers++
				}
			}
			check := func(when string) {
				for _, v := range vals {
					assert.Same(t, v, ctx.Value(v), "seed %d %s", seed, when)
				}
			}
			check("before")
			if timeout {
				waitDone(t, ctx, "layers")
			} else {
				assert.Nil(t, ctx.Err(), "seed %d: done before any cancel", seed)
				cancels[r.IntN(len(cancels))]()
				waitDone(t, ctx, "layers")
			}
			check("after")
			for _, c := range cancels {
				c()
			}
		}
	}
	require.Eventually(t, func() bool { return s.Pending() == 0 }, waitFor, pollEvery)
}

// TestContextAfterFunc mirrors x_test.go's AfterFunc tests on our context:
// context.AfterFunc attaches through our AfterFunc method.
func TestContextAfterFunc(t *testing.T) {
	s := newScheduler(t, shardwheel.WithTick(time.Millisecond))
	t.Run("called after cancel", func(t *testing.T) {
		ctx, cancel := s.WithTimeout(context.Background(), veryLongDuration)
		donec := make(chan struct{})
		stop := context.AfterFunc(ctx, func() { close(donec) })
		select {
		case <-donec:
			t.Fatal("called before the context is done")
		default:
		}
		cancel()
		waitClosed(t, donec)
		assert.False(t, stop())
	})
	t.Run("called after timeout", func(t *testing.T) {
		ctx, cancel := s.WithTimeout(context.Background(), shortDuration)
		defer cancel()
		donec := make(chan struct{})
		context.AfterFunc(ctx, func() { close(donec) })
		waitClosed(t, donec)
	})
	t.Run("called immediately", func(t *testing.T) {
		ctx, cancel := s.WithTimeout(context.Background(), veryLongDuration)
		cancel()
		donec := make(chan struct{})
		context.AfterFunc(ctx, func() { close(donec) })
		waitClosed(t, donec)
	})
	t.Run("not called after stop", func(t *testing.T) {
		ctx, cancel := s.WithTimeout(context.Background(), veryLongDuration)
		var called atomic.Bool
		stop := context.AfterFunc(ctx, func() { called.Store(true) })
		require.True(t, stop())
		cancel()
		assert.False(t, stop())
		// The method itself: a stopped registration is never called.
		m := ctx.(interface{ AfterFunc(func()) func() bool })
		assert.False(t, m.AfterFunc(func() {})(), "already done: nothing to stop")
		assert.False(t, called.Load())
	})
	t.Run("called asynchronously", func(t *testing.T) {
		ctx, cancel := s.WithTimeout(context.Background(), veryLongDuration)
		donec := make(chan struct{})
		stop := context.AfterFunc(ctx, func() { donec <- struct{}{} })
		defer stop()
		cancel() // must not wait for f
		select {
		case <-donec:
		case <-time.After(waitFor):
			t.Fatal("not called after cancel")
		}
	})
}

func waitClosed(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitFor):
		t.Fatalf("not closed after %v", waitFor)
	}
}

// TestContextStartsNoGoroutine: a context, its parent registration, and
// children of package context attached to it (WithCancel, AfterFunc) start
// no goroutine while they live, and leave nothing behind when cancelled.
func TestContextStartsNoGoroutine(t *testing.T) {
	s := newScheduler(t)
	parent, cancelParent := context.WithCancel(context.Background())
	defer cancelParent()
	const n = 100
	existing := goleak.IgnoreCurrent()
	before := runtime.NumGoroutine()
	var cancels []context.CancelFunc
	for range n {
		ctx, cancel := s.WithTimeout(parent, veryLongDuration)
		child, cancelChild := context.WithCancel(ctx)
		stop := context.AfterFunc(ctx, func() {})
		_, cancelGrandchild := s.WithTimeout(child, time.Hour) // earlier than ctx's: a wheel timer
		cancels = append(cancels, cancel, cancelChild, func() { stop() }, cancelGrandchild)
	}
	assert.LessOrEqual(t, runtime.NumGoroutine(), before+2, "goroutines per context")
	assert.Equal(t, 2*n, s.Pending())
	for _, c := range cancels {
		c()
	}
	assert.Zero(t, s.Pending(), "the CancelFunc frees the wheel timer at once")
	// Cancelling starts context.AfterFunc's goroutines (the test's f, and
	// the grandchildren's registrations with WithCancel children): all end.
	goleak.VerifyNone(t, existing)
}

// TestContextCancelFreesTimerAtOnce: Pending drops when the CancelFunc
// returns, and calling it again, from many goroutines, changes nothing.
func TestContextCancelFreesTimerAtOnce(t *testing.T) {
	s := newScheduler(t)
	ctx, cancel := s.WithTimeout(context.Background(), time.Hour)
	require.Equal(t, 1, s.Pending())
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			cancel()
			assert.Equal(t, context.Canceled, ctx.Err())
		})
	}
	wg.Wait()
	assert.Zero(t, s.Pending())
	assert.Equal(t, context.Canceled, context.Cause(ctx))
}

// TestContextParentCancelFreesTimer: a parent's cancel ends the context and
// frees its wheel timer, without the CancelFunc.
func TestContextParentCancelFreesTimer(t *testing.T) {
	s := newScheduler(t)
	parent, cancelParent := context.WithCancel(context.Background())
	ctx, cancel := s.WithTimeout(parent, time.Hour)
	defer cancel()
	require.Equal(t, 1, s.Pending())
	cancelParent()
	assert.Equal(t, context.Canceled, ctx.Err(), "a parent's cancel shows at once")
	waitDone(t, ctx, "child")
	require.Eventually(t, func() bool { return s.Pending() == 0 }, waitFor, pollEvery)
}

// TestContextNeverEarlyExactlyOnce runs many contexts from many goroutines,
// each cancelled at a random moment or left to expire, under cancellable
// parents that are themselves cancelled at random: every context ends once,
// with an error that fits what happened, never before its deadline when it
// expired; and the wheel holds nothing afterwards.
func TestContextNeverEarlyExactlyOnce(t *testing.T) {
	s := newScheduler(t, shardwheel.WithTick(time.Millisecond), shardwheel.WithShards(3))
	workers, per := 8, 400
	if raceEnabled {
		per = 150
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for range per {
				parent, cancelParent := context.WithCancel(context.Background())
				timeout := time.Duration(r.IntN(5000)) * time.Microsecond
				start := time.Now()
				ctx, cancel := s.WithTimeout(parent, timeout)
				var racers sync.WaitGroup
				switch r.IntN(4) {
				case 0: // expire
				case 1:
					racers.Go(cancel)
				case 2:
					racers.Go(cancelParent)
				case 3:
					racers.Go(cancel)
					racers.Go(cancelParent)
				}
				<-ctx.Done()
				doneAt := time.Now()
				racers.Wait()
				switch err := ctx.Err(); err {
				case context.DeadlineExceeded:
					assert.GreaterOrEqual(t, doneAt.Sub(start), timeout, "expired early")
				case context.Canceled:
				default:
					t.Errorf("Err() = %v", err)
				}
				first := ctx.Err()
				cancel()
				cancelParent()
				assert.Equal(t, first, ctx.Err(), "Err changed after the context was done")
			}
		})
	}
	wg.Wait()
	require.Eventually(t, func() bool { return s.Pending() == 0 }, waitFor, pollEvery)
	assert.Empty(t, s.Stop())
}

// TestContextSurvivesStop: a context made before Stop still expires at its
// deadline, Stop does not return its timer, and its CancelFunc still
// cancels it before then.
func TestContextSurvivesStop(t *testing.T) {
	s := newScheduler(t, shardwheel.WithTick(time.Millisecond), shardwheel.WithShards(2))
	const timeout = 50 * time.Millisecond
	start := time.Now()
	expiring, cancelExpiring := s.WithTimeoutCause(context.Background(), timeout, errTooSlow)
	defer cancelExpiring()
	cancelled, cancel := s.WithTimeout(context.Background(), time.Hour)
	kept, err := s.AfterFunc(time.Hour, noop, shardwheel.ByKey(1))
	require.NoError(t, err)

	got := s.Stop()
	assert.Equal(t, []shardwheel.Timer{kept}, got, "Stop returns the user's timer only")
	if expiring.Err() != nil { // Stop took longer than the timeout
		assert.GreaterOrEqual(t, time.Since(start), timeout, "expired early")
	}
	cancel()
	assert.Equal(t, context.Canceled, cancelled.Err())

	waitDone(t, expiring, "expiring")
	assert.GreaterOrEqual(t, time.Since(start), timeout, "expired early")
	assert.Equal(t, context.DeadlineExceeded, expiring.Err())
	assert.Equal(t, errTooSlow, context.Cause(expiring))
}

var errTooSlow = errors.New("too slow")

// TestCancelFuncAsTaskSurvivesStop: a timer a user scheduled with a
// context's CancelFunc as its task is handed over too, and runs at its own
// deadline: the context is cancelled then, not at its own deadline.
func TestCancelFuncAsTaskSurvivesStop(t *testing.T) {
	s := newScheduler(t, shardwheel.WithTick(time.Millisecond))
	ctx, cancel := s.WithTimeout(context.Background(), time.Hour)
	start := time.Now()
	_, err := s.AfterFunc(30*time.Millisecond, cancel)
	require.NoError(t, err)
	assert.Empty(t, s.Stop())
	if ctx.Err() != nil { // Stop took longer than the timer's delay
		assert.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond, "cancelled early")
	}
	waitDone(t, ctx, "ctx")
	assert.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond)
	assert.Equal(t, context.Canceled, ctx.Err())
}

// TestContextFallsBack: where the wheel cannot hold the deadline (after
// Stop, at the pending limit, beyond MaxDelay) the context still has it.
func TestContextFallsBack(t *testing.T) {
	t.Run("after Stop", func(t *testing.T) {
		s := newScheduler(t, shardwheel.WithTick(time.Millisecond))
		s.Stop()
		ctx, cancel := s.WithTimeoutCause(context.Background(), shortDuration, errTooSlow)
		defer cancel()
		testDeadline(t, ctx, "after Stop")
		assert.Equal(t, errTooSlow, context.Cause(ctx))
	})
	t.Run("at the pending limit", func(t *testing.T) {
		s := newScheduler(t, shardwheel.WithTick(time.Millisecond), shardwheel.WithMaxPending(1))
		_, err := s.AfterFunc(time.Hour, noop)
		require.NoError(t, err)
		ctx, cancel := s.WithTimeout(context.Background(), 5*time.Millisecond)
		defer cancel()
		assert.Equal(t, 1, s.Pending())
		testDeadline(t, ctx, "at the limit")
	})
	t.Run("beyond MaxDelay", func(t *testing.T) {
		s := newScheduler(t, shardwheel.WithTick(time.Millisecond))
		d := time.Now().Add(s.MaxDelay() + time.Hour)
		ctx, cancel := s.WithDeadline(context.Background(), d)
		defer cancel()
		got, _ := ctx.Deadline()
		assert.True(t, got.Equal(d))
		assert.Zero(t, s.Pending(), "not in the wheel, which would clamp it")
		assert.Nil(t, ctx.Err())
		cancel()
		assert.Equal(t, context.Canceled, ctx.Err())
	})
}

// TestContextAllocations: under context.Background a context and its
// cancel cost two allocations, the context and its one closure.
func TestContextAllocations(t *testing.T) {
	s := newScheduler(t)
	allocs := testing.AllocsPerRun(1000, func() {
		_, cancel := s.WithTimeout(context.Background(), time.Hour)
		cancel()
	})
	assert.LessOrEqual(t, allocs, 2.0)
	// 112 bytes is a size class of Go's allocator: with the 16-byte
	// closure a context costs 128 bytes. A field more would make it 144.
	assert.LessOrEqual(t, shardwheel.TimerCtxSize, uintptr(112))
}

// afterFuncer is the method context.AfterFunc looks for.
type afterFuncer interface{ AfterFunc(func()) func() bool }

// TestContextRacingStop creates, cancels and lets expire contexts from
// several goroutines while Stop runs: every context ends exactly once
// (its AfterFunc registrations run once), expired ones never before their
// deadline, whether the wheel, Stop's hand-over or the context package's
// fallback held the deadline.
func TestContextRacingStop(t *testing.T) {
	s := newScheduler(t, shardwheel.WithTick(time.Millisecond), shardwheel.WithShards(2))
	workers, per := 6, 300
	if raceEnabled {
		per = 100
	}
	var created atomic.Int64
	type record struct {
		ctx    context.Context
		start  time.Time
		dur    time.Duration
		cancel context.CancelFunc
		calls  atomic.Int32
	}
	records := make([][]*record, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 2))
			for i := range per {
				rec := &record{start: time.Now(), dur: time.Duration(r.IntN(3000)) * time.Microsecond}
				ctx, cancel := s.WithTimeout(context.Background(), rec.dur)
				rec.ctx = ctx
				if m, ok := ctx.(afterFuncer); ok {
					m.AfterFunc(func() { rec.calls.Add(1) })
				} else {
					rec.calls.Store(1) // the context package's fallback: nothing of ours to count
				}
				records[w] = append(records[w], rec)
				created.Add(1)
				if i%3 == 0 {
					cancel()
				} else {
					rec.cancel = cancel // called once it is done: these expire
				}
			}
		})
	}
	require.Eventually(t, func() bool { return created.Load() > int64(workers*per/3) }, waitFor, pollEvery)
	s.Stop()
	wg.Wait()
	for _, rs := range records {
		for _, rec := range rs {
			waitDone(t, rec.ctx, "ctx")
			switch err := rec.ctx.Err(); err {
			case context.DeadlineExceeded:
				d, _ := rec.ctx.Deadline()
				assert.False(t, time.Now().Before(d), "done before its deadline")
				assert.GreaterOrEqual(t, time.Since(rec.start), rec.dur)
			case context.Canceled:
				assert.Nil(t, rec.cancel, "cancelled but never cancelled")
			default:
				t.Fatalf("Err() = %v", err)
			}
			if rec.cancel != nil {
				rec.cancel()
			}
		}
	}
	require.Eventually(t, func() bool {
		for _, rs := range records {
			for _, rec := range rs {
				if rec.calls.Load() != 1 {
					return false
				}
			}
		}
		return true
	}, waitFor, pollEvery, "each context ends exactly once")
	assert.Zero(t, s.Pending())
}

// TestContextDeadlineValueErrCauseAndCancel: Deadline, values, Err and
// Cause; the CancelFunc ends the context and frees its timer before it
// returns, and is idempotent; the Cause variant expires with its cause,
// never early; a parent's earlier deadline wins; a parent cancelled with a
// cause passes on its error and cause.
func TestContextDeadlineValueErrCauseAndCancel(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(2))
	parent := context.WithValue(context.Background(), ctxKey(1), "v")
	d := time.Now().Add(time.Hour)
	ctx, cancel := s.WithDeadline(parent, d)
	got, ok := ctx.Deadline()
	require.True(t, ok)
	assert.True(t, got.Equal(d))
	assert.Equal(t, "v", ctx.Value(ctxKey(1)))
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

// TestContextWithAPastDeadlineIsDoneAtOnce: a deadline in the past, the
// zero time or a timeout <= 0 gives a context that is already done, with
// the cause passed in, and holds no timer.
func TestContextWithAPastDeadlineIsDoneAtOnce(t *testing.T) {
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

// TestContextFallbacksKeepDeadlineAndCause: where the wheel cannot hold a
// deadline (after Stop, at the WithMaxPending limit, beyond MaxDelay) the
// context still expires at it, never early, with its cause; one made before
// Stop outlives it and is not among the timers Stop returns.
func TestContextFallbacksKeepDeadlineAndCause(t *testing.T) {
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
		_, err := s.AfterFunc(time.Hour, noop, shardwheel.ByKey(1))
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
