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

// TestIndexTakeBackSharedLanes: Index.AfterFunc, Index.Cancel
// (CancelUnindexed: taken back when still on top), cancels through the
// handle (indexed: left to the shard, which unindexes), Index.Reset and
// replacing AfterFuncs, on a small key space, from up to 8 Ps, more
// than the scheduler has lanes (GOMAXPROCS raised after New). At quiescence Stats add
// up (Scheduled = Fired + Cancelled + Stopped + Pending), the handler ran
// once per fired timer with a key of its own, each key has at most one
// pending timer, the index holds exactly the pending ones (no entry leaked
// by a take-back, none lost), and after Stop every returned timer's Task
// calls the handler with that timer's key.
func TestIndexTakeBackSharedLanes(t *testing.T) {
	forEachProcs(t, func(t *testing.T, procs int) {
		prev := runtime.GOMAXPROCS(1) // New sizes the lanes from GOMAXPROCS
		defer runtime.GOMAXPROCS(prev)
		s, err := shardwheel.New(shardwheel.WithShards(2), shardwheel.WithStats(true))
		require.NoError(t, err)
		ix := shardwheel.NewIndex[uint64](s)
		runtime.GOMAXPROCS(procs) // more Ps than lanes from here on

		const keys = 64
		var fired atomic.Int64
		var mode atomic.Int32 // 0 running, 1 calling Task() after Stop
		var taskCalls [keys]atomic.Int32
		handle := func(k uint64) {
			if k >= keys {
				t.Errorf("handler called with key %d", k)
				return
			}
			if mode.Load() == 1 {
				taskCalls[k].Add(1)
				return
			}
			fired.Add(1)
		}

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
					d := time.Duration(1+i%4)*time.Millisecond + time.Duration(i%2)*time.Hour
					tm, err := ix.AfterFunc(key, d, func() { handle(key) }, shardwheel.ByKey(key))
					if err != nil {
						t.Errorf("Index.AfterFunc: %v", err)
						return
					}
					switch i % 4 {
					case 0:
						ix.Cancel(key) // at once: take-back of an indexed timer
					case 1:
						tm.Cancel() // through the handle: its entry stays for the shard
					case 2:
						ix.Reset(key, time.Millisecond)
					}
				}
			}()
		}
		wg.Wait()
		require.Eventually(t, func() bool {
			st := s.Stats()
			live := 0
			for k := range uint64(keys) {
				if tm, ok := ix.Lookup(k); ok {
					if time.Until(tm.Deadline()) < 30*time.Minute {
						return false // due soon: it would run between Pending and Stop
					}
					live++
				}
			}
			return st.Total.Scheduled == st.Total.Fired+st.Total.Cancelled+uint64(st.Pending) &&
				st.Pending == live && indexLen(ix) == live &&
				st.Total.Queued == 0 && int64(st.Total.Fired) == fired.Load()
		}, 20*time.Second, time.Millisecond, "quiescence: the short timers have run, Stats add up and the index holds exactly the pending timers")
		st := s.Stats()
		assert.NotZero(t, st.Total.TakenBack, "Index.Cancel right after Index.AfterFunc takes timers back")
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
		assert.Zero(t, indexLen(ix))
	})
}
