package shardwheel_test

// Tests of the documentation promises of Handler timers, take-back
// on Cancel, Stats.TakenBack, node byte counts), written against README.md
// and the doc comments rather than the code.

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
)

// blockShard runs a task on s's only shard that blocks until the returned
// release is called, and waits until it runs: from then on the shard takes
// nothing off its queues, so it "has not seen" any timer scheduled after.
func blockShard(t *testing.T, s *shardwheel.Scheduler) (release func()) {
	t.Helper()
	started, unblock := make(chan struct{}), make(chan struct{})
	_, err := s.Schedule(0, 0, func() { close(started); <-unblock })
	require.NoError(t, err)
	select {
	case <-started:
	case <-time.After(waitFor):
		t.Fatal("blocking task never ran")
	}
	var once sync.Once
	release = func() { once.Do(func() { close(unblock) }) }
	t.Cleanup(release)
	return release
}

// withGOMAXPROCS runs f at GOMAXPROCS n.
func withGOMAXPROCS(n int, f func()) {
	prev := runtime.GOMAXPROCS(n)
	defer runtime.GOMAXPROCS(prev)
	f()
}

// README Handlers row: "same deadlines, errors, routing and guarantees":
// a Handler timer on key k goes to shard ShardOf(k), plain and keyed.
func TestDocHandlerRoutesLikeSchedule(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(4))
	h, err := s.NewHandler(func(uint64) {})
	require.NoError(t, err)
	want := make([]uint64, 4)
	for key := range uint64(200) {
		_, err := h.Schedule(key, time.Hour)
		require.NoError(t, err)
		_, err = h.ScheduleKey(key+1000, time.Hour)
		require.NoError(t, err)
		want[s.ShardOf(key)]++
		want[s.ShardOf(key+1000)]++
	}
	st := s.Stats()
	for i := range want {
		assert.Equal(t, want[i], st.Shards[i].Scheduled, "shard %d", i)
	}
	assert.Equal(t, 400, s.Pending())
}

// Timeout.Task: "For every other timer (pending, ended in any other way)
// ... it returns nil", Handler timers included; only Stop's give a task.
func TestDocHandlerTaskIsNilUnlessStopReturnedIt(t *testing.T) {
	s, err := shardwheel.New(shardwheel.WithShards(1))
	require.NoError(t, err)
	ran := make(chan uint64, 4)
	h, err := s.NewHandler(func(k uint64) { ran <- k })
	require.NoError(t, err)

	pending, err := h.Schedule(1, time.Hour)
	require.NoError(t, err)
	assert.Nil(t, pending.Task(), "pending")
	cancelled, err := h.Schedule(2, time.Hour)
	require.NoError(t, err)
	require.True(t, cancelled.Cancel())
	assert.Nil(t, cancelled.Task(), "cancelled")
	fired, err := h.Schedule(3, 0)
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

// Handler.ScheduleKey: "replacing the key's pending indexed timer whatever
// its task": a closure ScheduleKey replaces a Handler's indexed timer and
// the reverse; the replaced one never runs and counts as cancelled.
func TestDocScheduleKeyReplacesWhateverTheTask(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(1))
	var handlerRan, closureRan atomic.Int32
	h, err := s.NewHandler(func(uint64) { handlerRan.Add(1) })
	require.NoError(t, err)

	old, err := h.ScheduleKey(7, 20*time.Millisecond)
	require.NoError(t, err)
	nw, err := s.ScheduleKey(7, 20*time.Millisecond, func() { closureRan.Add(1) })
	require.NoError(t, err)
	assert.False(t, old.Pending(), "replaced Handler timer")
	got, ok := s.Lookup(7)
	require.True(t, ok)
	assert.Equal(t, nw, got)

	old2, err := s.ScheduleKey(8, 20*time.Millisecond, func() { closureRan.Add(1) })
	require.NoError(t, err)
	_, err = h.ScheduleKey(8, 20*time.Millisecond)
	require.NoError(t, err)
	assert.False(t, old2.Pending(), "replaced closure timer")

	require.Eventually(t, func() bool { return s.Pending() == 0 }, waitFor, pollEvery)
	assert.Equal(t, int32(1), closureRan.Load(), "only the closure timer on key 7 runs")
	assert.Equal(t, int32(1), handlerRan.Load(), "only the Handler timer on key 8 runs")
	st := s.Stats().Total
	assert.Equal(t, uint64(2), st.Cancelled)
	assert.Equal(t, uint64(2), st.Fired)
}

// Handler.ScheduleKey: "It allocates the index entry (16 bytes), as
// ScheduleKey does": one allocation per call in steady state.
func TestDocHandlerScheduleKeyAllocatesOnlyTheEntry(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(1))
	h, err := s.NewHandler(func(uint64) {})
	require.NoError(t, err)
	for key := range uint64(4096) { // warm the arena and the index
		_, err := h.ScheduleKey(key%64, time.Hour)
		require.NoError(t, err)
	}
	key := uint64(0)
	allocs := testing.AllocsPerRun(2000, func() {
		key++
		if _, err := h.ScheduleKey(key%64, time.Hour); err != nil {
			t.Fatal(err)
		}
	})
	assert.Equal(t, 1.0, allocs)
}

// README Handlers row: "With WithExecutor the shard makes that closure
// when the timer expires (one allocation)"; without an executor a Handler
// timer's expiry allocates nothing.
func TestDocHandlerExpiryAllocations(t *testing.T) {
	const n = 20000
	perTimer := func(executor bool) float64 {
		opts := []shardwheel.Option{shardwheel.WithShards(1), shardwheel.WithStats(false)}
		if executor {
			opts = append(opts, shardwheel.WithExecutor(func(task func()) { task() }))
		}
		s := newScheduler(t, opts...)
		var ran atomic.Int64
		done := make(chan struct{})
		h, err := s.NewHandler(func(uint64) {
			if ran.Add(1) == n {
				close(done)
			}
		})
		require.NoError(t, err)
		// Warm the arena so that its growth is not counted.
		for key := range uint64(2 * n) {
			tm, err := h.Schedule(key, time.Hour)
			require.NoError(t, err)
			tm.Cancel()
		}
		var before, after runtime.MemStats
		for key := range uint64(n) {
			_, err := h.Schedule(key, time.Second) // none due before the count starts
			require.NoError(t, err)
		}
		runtime.ReadMemStats(&before)
		select {
		case <-done:
		case <-time.After(waitFor):
			t.Fatalf("%d of %d ran", ran.Load(), n)
		}
		runtime.ReadMemStats(&after)
		return float64(after.Mallocs-before.Mallocs) / n
	}
	inline := perTimer(false)
	withExecutor := perTimer(true)
	t.Logf("mallocs per expired Handler timer: inline %.3f, with executor %.3f", inline, withExecutor)
	assert.Less(t, inline, 0.1)
	assert.InDelta(t, 1.0, withExecutor-inline, 0.15)
}

// README Cancel row, Timeout.Cancel's doc and Stats: a Cancel of the timer
// its P's shard filed last, from that P, frees its node at once and counts
// in Stats.TakenBack (a subset of Cancelled); any other cancelled timer
// stays held until its wheel meets it; a timer that found the wheel held
// waits in the queue, and its Cancel leaves it there for the holder to
// free. Call counters (scheduled, cancelled) show at once, without a pass.
func TestDocCancelTakesBackAtOnce(t *testing.T) {
	withGOMAXPROCS(1, func() { // one P: every call is on shard 0's P
		s := newScheduler(t, shardwheel.WithShards(1))
		h, err := s.NewHandler(func(uint64) { t.Error("cancelled Handler timer ran") })
		require.NoError(t, err)
		base := s.Stats().Total

		tm, err := s.AfterFunc(time.Hour, func() { t.Error("cancelled timer ran") })
		require.NoError(t, err)
		st := s.Stats().Total
		assert.Equal(t, base.Scheduled+1, st.Scheduled, "Schedule counted at once")
		assert.Equal(t, base.Queued, st.Queued, "filed at once, not queued")
		require.True(t, tm.Cancel())
		st = s.Stats().Total
		assert.Equal(t, base.Cancelled+1, st.Cancelled, "Cancel counted at once")
		assert.Equal(t, base.TakenBack+1, st.TakenBack, "taken back")
		assert.Equal(t, base.HeldCancelled, st.HeldCancelled, "nothing held")
		assert.False(t, tm.Pending())
		assert.False(t, tm.Cancel(), "true at most once")

		ht, err := h.AfterFunc(2, time.Hour)
		require.NoError(t, err)
		require.True(t, ht.Cancel())
		st = s.Stats().Total
		assert.Equal(t, base.TakenBack+2, st.TakenBack, "Handler timer taken back")
		assert.LessOrEqual(t, st.TakenBack, st.Cancelled)

		// One filed before the last is cancelled but held by the wheel.
		below, err := h.AfterFunc(3, time.Hour)
		require.NoError(t, err)
		top, err := h.AfterFunc(4, time.Hour)
		require.NoError(t, err)
		require.True(t, below.Cancel())
		st = s.Stats().Total
		assert.Equal(t, base.TakenBack+2, st.TakenBack, "not the last filed: not taken back")
		assert.Equal(t, base.HeldCancelled+1, st.HeldCancelled, "held until the wheel meets it")
		require.True(t, top.Cancel())
		assert.Equal(t, base.TakenBack+3, s.Stats().Total.TakenBack, "the last filed is taken back")

		// A blocked shard's wheel is held: timers wait in its queue, and a
		// Cancel cannot take them back.
		release := blockShard(t, s)
		base = s.Stats().Total
		queued, err := s.AfterFunc(time.Hour, func() { t.Error("cancelled queued timer ran") })
		require.NoError(t, err)
		st = s.Stats().Total
		assert.Equal(t, base.Queued+1, st.Queued, "queued while the wheel is held")
		require.True(t, queued.Cancel())
		st = s.Stats().Total
		assert.Equal(t, base.TakenBack, st.TakenBack, "the queued timer is not taken back")
		assert.Equal(t, base.Queued+1, st.Queued, "still in the queue")

		release()
		require.Eventually(t, func() bool {
			st := s.Stats()
			return st.Pending == 0 && st.Total.Queued == 0
		}, waitFor, pollEvery)
		st = s.Stats().Total
		assert.Equal(t, st.Scheduled, st.Fired+st.Cancelled+st.Stopped, "Stats add up")
	})
}

// bytesPerSlot returns the heap a one-shard scheduler with first block
// 2^18 gains by filling that block with timers (all but index 0, which is
// reserved), per node of the block.
func bytesPerSlot(t *testing.T, schedule func(s *shardwheel.Scheduler, h shardwheel.Handler, i int)) float64 {
	const block = 1 << 18
	s, err := shardwheel.New(shardwheel.WithShards(1), shardwheel.WithFirstBlock(block))
	require.NoError(t, err)
	defer s.Stop()
	h, err := s.NewHandler(func(uint64) {})
	require.NoError(t, err)
	before := heapInUse()
	for i := range block - 1 {
		schedule(s, h, i)
	}
	require.Eventually(t, func() bool { return s.Stats().Total.Queued == 0 }, waitFor, pollEvery)
	after := heapInUse()
	runtime.KeepAlive(s)
	return float64(int64(after)-int64(before)) / block
}

// README Options (WithRingSize), WithRingSize's doc and How it works:
// Nodes: "36 B each, plus 8 B in a block once a closure timer lands in it
// and 2 B once a Handler timer does"; README quick start and Handler's doc:
// a Handler timer "costs its node alone (38 bytes)".
func TestDocNodeBytes(t *testing.T) {
	handler := bytesPerSlot(t, func(_ *shardwheel.Scheduler, h shardwheel.Handler, i int) {
		_, err := h.Schedule(uint64(i), time.Hour)
		require.NoError(t, err)
	})
	closure := bytesPerSlot(t, func(s *shardwheel.Scheduler, _ shardwheel.Handler, i int) {
		_, err := s.Schedule(uint64(i), time.Hour, noop) // no closure allocated per timer
		require.NoError(t, err)
	})
	mixed := bytesPerSlot(t, func(s *shardwheel.Scheduler, h shardwheel.Handler, i int) {
		var err error
		if i == 0 {
			_, err = s.Schedule(uint64(i), time.Hour, noop)
		} else {
			_, err = h.Schedule(uint64(i), time.Hour)
		}
		require.NoError(t, err)
	})
	t.Logf("bytes per node: Handler %.2f, closure %.2f, both %.2f", handler, closure, mixed)
	ptr := float64(unsafe.Sizeof(func() {})) // 8 on 64-bit platforms
	assert.InDelta(t, 38, handler, 1, "36 + 2")
	assert.InDelta(t, 36+ptr, closure, 1, "36 + a pointer")
	assert.InDelta(t, 36+ptr+2, mixed, 1, "36 + a pointer + 2")
}

// README Handlers row: "same deadlines": a Handler timer runs no earlier
// than the call plus its delay (the guarantee table credits this to
// TestHandlerTimersRunWithTheirKey, which times only its closure timers).
func TestDocHandlerTimersNeverRunEarly(t *testing.T) {
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
			_, err = h.Schedule(k, delay)
		} else {
			_, err = h.ScheduleKey(k, delay)
		}
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return ran.Load() == n }, waitFor, pollEvery)
	assert.Zero(t, early.Load(), "Handler timers ran early")
}

// README Panics row: "a panicking Handler timer is a panicking task,
// reported like any other": recovered on its shard (inline, no executor),
// passed to the panic handler, counted in Stats, and the shard lives on.
func TestDocInlineHandlerPanicIsATaskPanic(t *testing.T) {
	panics := make(chan any, 1)
	s := newScheduler(t, shardwheel.WithShards(1), shardwheel.WithPanicHandler(func(v any) { panics <- v }))
	h, err := s.NewHandler(func(k uint64) {
		if k == 1 {
			panic("handler 1")
		}
	})
	require.NoError(t, err)
	_, err = h.Schedule(1, 0)
	require.NoError(t, err)
	select {
	case v := <-panics:
		assert.Equal(t, "handler 1", v)
	case <-time.After(waitFor):
		t.Fatal("panic not reported")
	}
	after, err := h.Schedule(2, 0)
	require.NoError(t, err)
	// Counters of the shard's work are published once per pass: poll.
	require.Eventually(t, func() bool { return !after.Pending() && s.Stats().Total.Fired == 2 }, waitFor, pollEvery)
	assert.Equal(t, uint64(1), s.Stats().Total.Panics)
}
