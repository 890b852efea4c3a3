package shardwheel_test

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
)

// A proxy fails timed-out requests by id with one shared Handler instead of
// a closure per request: a timer then costs its node alone.
func ExampleHandler() {
	s, err := shardwheel.New()
	if err != nil {
		panic(err)
	}
	defer s.Stop()

	failed := make(chan uint64, 1)
	fail, err := s.NewHandler(func(requestID uint64) { failed <- requestID })
	if err != nil {
		panic(err)
	}

	answered, _ := fail.AfterFunc(1, 30*time.Second, shardwheel.ByKey(1))
	if _, err := fail.AfterFunc(2, time.Millisecond, shardwheel.ByKey(2)); err != nil {
		panic(err) // ErrStopped or ErrTooManyPending: shed the request
	}
	// Request 1's response arrives in time; request 2's never does.
	fmt.Println("request 1 answered in time:", answered.Cancel())
	fmt.Println("request", <-failed, "timed out")
	// Output:
	// request 1 answered in time: true
	// request 2 timed out
}

// TestHandlerTimersRunWithTheirKey: every timer of a Handler calls its
// function once with its own key, never early, at every shard, and timers of
// two Handlers and closures mix on the same keys.
func TestHandlerTimersRunWithTheirKey(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(3))
	const n = 300
	var mu sync.Mutex
	ran := map[string]int{}
	record := func(kind string) func(uint64) {
		return func(key uint64) {
			mu.Lock()
			defer mu.Unlock()
			ran[fmt.Sprint(kind, key)]++
		}
	}
	a, err := s.NewHandler(record("a"))
	require.NoError(t, err)
	b, err := s.NewHandler(record("b"))
	require.NoError(t, err)
	start := time.Now()
	early := atomic.Int64{}
	for key := range uint64(n) {
		_, err := a.AfterFunc(key, 5*time.Millisecond, shardwheel.ByKey(key))
		require.NoError(t, err)
		_, err = b.AfterFunc(key, 2*time.Millisecond, shardwheel.ByKey(key))
		require.NoError(t, err)
		_, err = s.AfterFunc(3*time.Millisecond, func() {
			if time.Since(start) < 3*time.Millisecond {
				early.Add(1)
			}
			record("c")(key)
		}, shardwheel.ByKey(key))
		require.NoError(t, err)
	}
	waitTasksReturned(t, s)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, ran, 3*n)
	for k, c := range ran {
		assert.Equal(t, 1, c, "timer %s ran %d times", k, c)
	}
	assert.Zero(t, early.Load())
}

// TestHandlerTimersAreTimersLikeAnyOther: Cancel, Reset, Pending,
// Deadline, the keyed calls and Stop treat Handler timers as they treat
// closure timers.
func TestHandlerTimersAreTimersLikeAnyOther(t *testing.T) {
	s, err := shardwheel.New()
	require.NoError(t, err)
	keys := make(chan uint64, 16)
	h, err := s.NewHandler(func(k uint64) { keys <- k })
	require.NoError(t, err)

	// Cancel.
	c, err := h.AfterFunc(1, time.Hour, shardwheel.ByKey(1))
	require.NoError(t, err)
	assert.True(t, c.Pending())
	assert.False(t, c.Deadline().IsZero())
	assert.True(t, c.Cancel())
	assert.False(t, c.Cancel(), "true at most once")
	assert.False(t, c.Pending())

	// Reset to a short delay: it runs with its key.
	r, err := h.AfterFunc(2, time.Hour, shardwheel.ByKey(2))
	require.NoError(t, err)
	assert.True(t, r.Reset(time.Millisecond))
	select {
	case k := <-keys:
		assert.Equal(t, uint64(2), k)
	case <-time.After(waitFor):
		t.Fatal("reset handler timer never ran")
	}
	require.Eventually(t, func() bool { return !r.Pending() }, waitFor, pollEvery)
	assert.False(t, r.Reset(time.Millisecond), "stale handle")

	// Stop returns pending Handler timers; Task calls the handler with
	// the key, once per call, and never revives the timer.
	p, err := h.AfterFunc(4, time.Hour, shardwheel.ByKey(4))
	require.NoError(t, err)
	k5, err := h.AfterFunc(5, time.Hour)
	require.NoError(t, err)
	left := s.Stop()
	require.Len(t, left, 2)
	got := map[uint64]bool{}
	for _, tm := range left {
		task := tm.Task()
		require.NotNil(t, task)
		task()
		got[<-keys] = true
	}
	assert.Equal(t, map[uint64]bool{4: true, 5: true}, got)
	assert.False(t, p.Pending())
	assert.False(t, k5.Pending())
	_, err = h.AfterFunc(6, time.Hour, shardwheel.ByKey(6))
	assert.ErrorIs(t, err, shardwheel.ErrStopped)
}

// TestHandlerErrors: nil functions, the zero Handler, the pending limit and
// a full table return the exported sentinels and leave no trace.
func TestHandlerErrors(t *testing.T) {
	s := newScheduler(t, shardwheel.WithMaxPending(1))
	_, err := s.NewHandler(nil)
	assert.ErrorIs(t, err, shardwheel.ErrNilTask)

	var zero shardwheel.Handler
	_, err = zero.AfterFunc(1, time.Second, shardwheel.ByKey(1))
	assert.ErrorIs(t, err, shardwheel.ErrNilTask)

	h, err := s.NewHandler(func(uint64) {})
	require.NoError(t, err)
	_, err = h.AfterFunc(1, time.Hour, shardwheel.ByKey(1))
	require.NoError(t, err)
	_, err = h.AfterFunc(2, time.Hour, shardwheel.ByKey(2))
	assert.ErrorIs(t, err, shardwheel.ErrTooManyPending)
	assert.Equal(t, 1, s.Pending())

	// The table holds MaxHandlers; one more is refused, and the ones it
	// holds still work.
	for range shardwheel.MaxHandlers - 1 {
		_, err := s.NewHandler(func(uint64) {})
		require.NoError(t, err)
	}
	_, err = s.NewHandler(func(uint64) {})
	assert.True(t, errors.Is(err, shardwheel.ErrTooManyHandlers), "got %v", err)
	assert.Contains(t, err.Error(), fmt.Sprint(shardwheel.MaxHandlers))
}

// TestHandlerTimersAllocateNothing: scheduling and cancelling through a
// Handler allocates nothing, closure included (a closure timer needs the
// caller's closure; a Handler timer has none).
func TestHandlerTimersAllocateNothing(t *testing.T) {
	s := newScheduler(t)
	h, err := s.NewHandler(func(uint64) {})
	require.NoError(t, err)
	// Warm the arena so that block growth is not counted.
	for key := range uint64(4096) {
		tm, err := h.AfterFunc(key, time.Hour, shardwheel.ByKey(key))
		require.NoError(t, err)
		tm.Cancel()
	}
	key := uint64(0)
	allocs := testing.AllocsPerRun(1000, func() {
		key++
		tm, err := h.AfterFunc(key, time.Hour, shardwheel.ByKey(key))
		if err != nil || !tm.Cancel() {
			t.Fatal("schedule or cancel failed")
		}
	})
	assert.Zero(t, allocs)
}

// TestHandlerWithExecutorAndPanics: with an executor the handler runs there,
// with its key; a panicking handler is recovered and reported, and its
// shard lives on.
func TestHandlerWithExecutorAndPanics(t *testing.T) {
	var executed atomic.Int64
	panics := make(chan any, 1)
	s := newScheduler(t,
		shardwheel.WithShards(1),
		shardwheel.WithExecutor(func(task func()) { executed.Add(1); task() }),
		shardwheel.WithPanicHandler(func(v any) { panics <- v }))
	keys := make(chan uint64, 1)
	bad, err := s.NewHandler(func(k uint64) { panic(fmt.Sprint("boom ", k)) })
	require.NoError(t, err)
	good, err := s.NewHandler(func(k uint64) { keys <- k })
	require.NoError(t, err)

	_, err = bad.AfterFunc(7, 0, shardwheel.ByKey(7))
	require.NoError(t, err)
	select {
	case v := <-panics:
		assert.Equal(t, "boom 7", v)
	case <-time.After(waitFor):
		t.Fatal("panic not reported")
	}
	_, err = good.AfterFunc(8, 0, shardwheel.ByKey(8))
	require.NoError(t, err)
	select {
	case k := <-keys:
		assert.Equal(t, uint64(8), k)
	case <-time.After(waitFor):
		t.Fatal("the shard died with the panicking handler")
	}
	assert.Equal(t, int64(2), executed.Load())
}

// TestHandlerStressExactlyOnce: goroutines schedule Handler and closure
// timers on shared keys, cancel and reset them, and Stop races them; every
// accepted timer ends exactly once (ran, cancelled, or returned by Stop).
func TestHandlerStressExactlyOnce(t *testing.T) {
	s, err := shardwheel.New(shardwheel.WithShards(2))
	require.NoError(t, err)
	const goroutines, perG = 6, 2000
	// ran[g*perG+i] counts the runs of goroutine g's i-th timer; the key
	// carries that number, so the handler knows which timer it runs for.
	ran := make([]atomic.Int32, goroutines*perG)
	h, err := s.NewHandler(func(k uint64) { ran[k].Add(1) })
	require.NoError(t, err)
	type timer struct {
		t         shardwheel.Timer
		cancelled bool
	}
	timers := make([][]timer, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perG {
				id := uint64(g*perG + i)
				d := time.Duration(id%7) * time.Millisecond
				var tm shardwheel.Timer
				var err error
				if id%2 == 0 {
					tm, err = h.AfterFunc(id, d, shardwheel.ByKey(id))
				} else {
					tm, err = s.AfterFunc(d, func() { ran[id].Add(1) }, shardwheel.ByKey(id))
				}
				if err != nil {
					return // Stop won
				}
				tt := timer{t: tm}
				switch id % 3 {
				case 0:
					tt.cancelled = tm.Cancel()
				case 1:
					tm.Reset(time.Millisecond)
				}
				timers[g] = append(timers[g], tt)
			}
		}()
	}
	// Let some timers run (Handler and closure alike) before Stop races
	// the rest.
	require.Eventually(t, func() bool { return ran[0].Load()+ran[1].Load() > 0 }, waitFor, pollEvery)
	left := s.Stop()
	wg.Wait()
	stopped := map[shardwheel.Timer]bool{}
	for _, tm := range left {
		stopped[tm] = true
	}
	for g := range timers {
		for _, tt := range timers[g] {
			id := tt.t.Key()
			ends := int(ran[id].Load())
			if tt.cancelled {
				ends++
			}
			if stopped[tt.t] {
				ends++
			}
			require.Equal(t, 1, ends, "timer %d: ran %d, cancelled %v, stopped %v", id, ran[id].Load(), tt.cancelled, stopped[tt.t])
		}
	}
}

// TestHandlerTimersRouteByKey: a Handler timer on key k goes to
// shard ShardOf(k).
func TestHandlerTimersRouteByKey(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(4))
	ranOn := make(chan [2]uint64, 400)
	h, err := s.NewHandler(func(key uint64) { ranOn <- [2]uint64{key, uint64(shardwheel.RunningShard(s))} })
	require.NoError(t, err)
	for key := range uint64(200) {
		_, err := h.AfterFunc(key, time.Millisecond, shardwheel.ByKey(key))
		require.NoError(t, err)
		_, err = h.AfterFunc(key+1000, 2*time.Millisecond, shardwheel.ByKey(key+1000))
		require.NoError(t, err)
	}
	for range 400 {
		select {
		case r := <-ranOn:
			assert.EqualValues(t, s.ShardOf(r[0]), r[1], "key %d", r[0])
		case <-time.After(waitFor):
			t.Fatal("handler timers did not run")
		}
	}
	assert.EqualValues(t, 400, s.Stats().Total.Scheduled)
}

// TestHandlerTaskIsNilUnlessStopReturnedIt: a Handler timer's Task is nil
// while pending, cancelled or fired; for one Stop returned it calls the
// handler with the timer's key.
func TestHandlerTaskIsNilUnlessStopReturnedIt(t *testing.T) {
	s, err := shardwheel.New(shardwheel.WithShards(1))
	require.NoError(t, err)
	ran := make(chan uint64, 4)
	h, err := s.NewHandler(func(k uint64) { ran <- k })
	require.NoError(t, err)

	pending, err := h.AfterFunc(1, time.Hour, shardwheel.ByKey(1))
	require.NoError(t, err)
	assert.Nil(t, pending.Task(), "pending")
	cancelled, err := h.AfterFunc(2, time.Hour, shardwheel.ByKey(2))
	require.NoError(t, err)
	require.True(t, cancelled.Cancel())
	assert.Nil(t, cancelled.Task(), "cancelled")
	fired, err := h.AfterFunc(3, 0, shardwheel.ByKey(3))
	require.NoError(t, err)
	select {
	case k := <-ran:
		assert.Equal(t, uint64(3), k)
	case <-time.After(waitFor):
		t.Fatal("handler timer never ran")
	}
	require.Eventually(t, func() bool { return !fired.Pending() }, waitFor, pollEvery)
	assert.Nil(t, fired.Task(), "fired")

	left := s.Stop()
	require.Len(t, left, 1)
	assert.Equal(t, uint64(1), left[0].Key())
	require.NotNil(t, pending.Task(), "returned by Stop")
	pending.Task()()
	assert.Equal(t, uint64(1), <-ran)
	assert.Nil(t, cancelled.Task())
	assert.Nil(t, fired.Task())
}

// TestHandlerExpiryAllocatesNothing: a Handler timer's expiry allocates
// nothing in steady state, on the shard's runner or with WithExecutor (the
// executor gets a pooled run record's method value, not a new closure):
// the n timers that expire together need up to n run records, which the
// first bursts made and the later ones reuse.
func TestHandlerExpiryAllocatesNothing(t *testing.T) {
	const n = 20000
	perTimer := func(executor bool) float64 {
		opts := []shardwheel.Option{shardwheel.WithShards(1), shardwheel.WithStats(false)}
		if executor {
			opts = append(opts, shardwheel.WithExecutor(func(task func()) { task() }))
		}
		s := newScheduler(t, opts...)
		var ran atomic.Int64
		done := make(chan struct{}, 1)
		h, err := s.NewHandler(func(uint64) {
			if ran.Add(1)%n == 0 {
				done <- struct{}{}
			}
		})
		require.NoError(t, err)
		// Warm the arena so that its growth is not counted.
		for key := range uint64(2 * n) {
			tm, err := h.AfterFunc(key, time.Hour, shardwheel.ByKey(key))
			require.NoError(t, err)
			tm.Cancel()
		}
		burst := func() (mallocs uint64) {
			var before, after runtime.MemStats
			for key := range uint64(n) {
				_, err := h.AfterFunc(key, 200*time.Millisecond, shardwheel.ByKey(key)) // none due before the count starts
				require.NoError(t, err)
			}
			runtime.ReadMemStats(&before)
			select {
			case <-done:
			case <-time.After(waitFor):
				t.Fatalf("%d of %d ran", ran.Load()%n, n)
			}
			runtime.ReadMemStats(&after)
			return after.Mallocs - before.Mallocs
		}
		// Three bursts make the run records: how many are out at once
		// depends on how far the runner keeps up with the pass, and a
		// later burst may have more in flight than the earlier ones (on
		// a host busy with other tests, CI's race step saw 0.12).
		burst()
		burst()
		burst()
		// The least of three: a slow host may give some records back
		// between two bursts (trimRuns looks once a second), or have
		// more in flight than ever before.
		return float64(min(burst(), burst(), burst())) / n
	}
	inline := perTimer(false)
	withExecutor := perTimer(true)
	t.Logf("mallocs per expired Handler timer: on the runner %.3f, with executor %.3f", inline, withExecutor)
	assert.Less(t, inline, 0.1)
	if cheapGoroutineToken {
		assert.Less(t, withExecutor, 0.1)
	} else {
		assert.Less(t, withExecutor, 1.1, "the run's goroutine token alone")
	}
}

// TestHandlerTimersNeverRunEarly: Handler timers, plain and keyed, run no
// earlier than the call plus their delay.
func TestHandlerTimersNeverRunEarly(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(2))
	const n = 200
	var due [n]time.Time
	var early, ran atomic.Int32
	h, err := s.NewHandler(func(k uint64) {
		if time.Now().Before(due[k]) {
			early.Add(1)
		}
		ran.Add(1)
	})
	require.NoError(t, err)
	for k := range uint64(n) {
		delay := time.Duration(k%20) * time.Millisecond
		due[k] = time.Now().Add(delay) // before the call: a lower bound of call+delay
		var err error
		if k%2 == 0 {
			_, err = h.AfterFunc(k, delay, shardwheel.ByKey(k))
		} else {
			_, err = h.AfterFunc(k, delay)
		}
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return ran.Load() == n }, waitFor, pollEvery)
	assert.Zero(t, early.Load(), "Handler timers ran early")
}

// TestInlineHandlerPanicIsReportedAndCounted: a panicking Handler timer
// run inline (no executor) is recovered on its shard, passed to the panic
// handler and counted in Stats, and the shard lives on.
func TestInlineHandlerPanicIsReportedAndCounted(t *testing.T) {
	panics := make(chan any, 1)
	s := newScheduler(t, shardwheel.WithShards(1), shardwheel.WithPanicHandler(func(v any) { panics <- v }))
	h, err := s.NewHandler(func(k uint64) {
		if k == 1 {
			panic("handler 1")
		}
	})
	require.NoError(t, err)
	_, err = h.AfterFunc(1, 0, shardwheel.ByKey(1))
	require.NoError(t, err)
	select {
	case v := <-panics:
		assert.Equal(t, "handler 1", v)
	case <-time.After(waitFor):
		t.Fatal("panic not reported")
	}
	after, err := h.AfterFunc(2, 0, shardwheel.ByKey(2))
	require.NoError(t, err)
	// Counters of the shard's work are published once per pass: poll.
	require.Eventually(t, func() bool { return !after.Pending() && s.Stats().Total.Fired == 2 }, waitFor, pollEvery)
	assert.Equal(t, uint64(1), s.Stats().Total.Panics)
}

// TestNewHandlerAfterStopIsErrStopped: a stopped Scheduler registers no
// handler, whose timers it could not run, and says why.
func TestNewHandlerAfterStopIsErrStopped(t *testing.T) {
	s := newScheduler(t)
	_, err := s.NewHandler(func(uint64) {})
	require.NoError(t, err)
	s.Stop()
	h, err := s.NewHandler(func(uint64) {})
	assert.ErrorIs(t, err, shardwheel.ErrStopped)
	assert.Equal(t, shardwheel.Handler{}, h)
	_, err = s.NewHandler(nil)
	assert.ErrorIs(t, err, shardwheel.ErrNilTask, "a nil function is an error whatever the Scheduler")
}
