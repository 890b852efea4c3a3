package shardwheel_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
)

// TestKeyedHandlerTakeBackSharedLanes: Handler.ScheduleKey,
// CancelKey (CancelUnindexed: taken back when still on top), cancels
// through the handle (indexed: left to the shard, which unindexes), ResetKey
// and replacing ScheduleKeys, on a small key space, from up to 8 Ps, more
// than the scheduler has lanes (GOMAXPROCS raised after New). At quiescence Stats add
// up (Scheduled = Fired + Cancelled + Stopped + Pending), the handler ran
// once per fired timer with a key of its own, each key has at most one
// pending timer, the index holds exactly the pending ones (no entry leaked
// by a take-back, none lost), and after Stop every returned timer's Task
// calls the handler with that timer's key.
func TestKeyedHandlerTakeBackSharedLanes(t *testing.T) {
	forEachProcs(t, func(t *testing.T, procs int) {
		prev := runtime.GOMAXPROCS(1) // New sizes the lanes from GOMAXPROCS
		defer runtime.GOMAXPROCS(prev)
		s, err := shardwheel.New(shardwheel.WithShards(2), shardwheel.WithStats(true))
		require.NoError(t, err)
		runtime.GOMAXPROCS(procs) // more Ps than lanes from here on

		const keys = 64
		var fired atomic.Int64
		var mode atomic.Int32 // 0 running, 1 calling Task() after Stop
		var taskCalls [keys]atomic.Int32
		h, err := s.NewHandler(func(k uint64) {
			if k >= keys {
				t.Errorf("handler called with key %d", k)
				return
			}
			if mode.Load() == 1 {
				taskCalls[k].Add(1)
				return
			}
			fired.Add(1)
		})
		require.NoError(t, err)

		rounds := 4000
		if testing.Short() {
			rounds = 1000
		}
		var wg sync.WaitGroup
		for g := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range rounds {
					key := uint64((g*rounds + i*7) % keys)
					tm, err := h.ScheduleKey(key, time.Duration(1+i%4)*time.Millisecond+time.Duration(i%2)*time.Hour)
					if err != nil {
						t.Errorf("ScheduleKey: %v", err)
						return
					}
					switch i % 4 {
					case 0:
						s.CancelKey(key) // at once: take-back of an indexed timer
					case 1:
						tm.Cancel() // through the handle: its entry stays for the shard
					case 2:
						s.ResetKey(key, time.Millisecond)
					}
				}
			}()
		}
		wg.Wait()
		require.Eventually(t, func() bool {
			st := s.Stats()
			live := 0
			for k := range uint64(keys) {
				if tm, ok := s.Lookup(k); ok {
					if time.Until(tm.Deadline()) < 30*time.Minute {
						return false // due soon: it would run between Pending and Stop
					}
					live++
				}
			}
			return st.Total.Scheduled == st.Total.Fired+st.Total.Cancelled+uint64(st.Pending) &&
				st.Pending == live && shardwheel.IndexLen(s) == live &&
				st.Total.Queued == 0 && int64(st.Total.Fired) == fired.Load()
		}, 20*time.Second, time.Millisecond, "quiescence: the short timers have run, Stats add up and the index holds exactly the pending timers")
		st := s.Stats()
		assert.NotZero(t, st.Total.TakenBack, "CancelKey right after ScheduleKey takes timers back")
		assert.Equal(t, uint64(6*rounds), st.Total.Scheduled)

		pending := s.Pending()
		left := s.Stop()
		require.Len(t, left, pending)
		mode.Store(1)
		for _, tm := range left {
			task := tm.Task()
			require.NotNil(t, task)
			before := taskCalls[tm.Key()].Load()
			task()
			assert.Equal(t, before+1, taskCalls[tm.Key()].Load(), "Task calls the handler with its timer's key %d", tm.Key())
		}
		st = s.Stats()
		assert.Equal(t, st.Total.Scheduled, st.Total.Fired+st.Total.Cancelled+st.Total.Stopped, "after Stop")
		assert.Zero(t, shardwheel.IndexLen(s))
	})
}

// TestScheduleKeyReplacesWhateverTheTask: a closure ScheduleKey replaces
// a Handler's indexed timer and the reverse; the replaced one never runs
// and counts as cancelled.
func TestScheduleKeyReplacesWhateverTheTask(t *testing.T) {
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

	waitTasksReturned(t, s)
	assert.Equal(t, int32(1), closureRan.Load(), "only the closure timer on key 7 runs")
	assert.Equal(t, int32(1), handlerRan.Load(), "only the Handler timer on key 8 runs")
	st := s.Stats().Total
	assert.Equal(t, uint64(2), st.Cancelled)
	assert.Equal(t, uint64(2), st.Fired)
}

// TestHandlerScheduleKeyAllocatesOnlyTheEntry: Handler.ScheduleKey
// allocates one thing per call in steady state, the index entry (its 24
// bytes are BenchmarkKeyedScheduleCancel's B/op: a byte count read here
// would count what tests running beside it allocate).
func TestHandlerScheduleKeyAllocatesOnlyTheEntry(t *testing.T) {
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
