package shard

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCancelTakesBackANewTimer: a timer cancelled while it is still the
// node its lane pushed last goes straight back to the lane (its next
// Schedule reuses it, a new generation), the worker never sees it, and
// Stats count it; one below the top, one the worker took, and an indexed
// one whose entry stays are left to the worker, which frees them.
func TestCancelTakesBackANewTimer(t *testing.T) {
	h := newHarness(t)
	h.sh.cfg.Unindex = func(uint64, Ref) {}
	sched := func(key uint64) Ref {
		r, rej := h.sh.Schedule(key, time.Hour, func() { t.Errorf("timer %d ran", key) })
		require.Equal(t, Accepted, rej)
		return r
	}
	withP := func(f func()) { // one P: every call uses the same lane
		prev := runtime.GOMAXPROCS(1)
		defer runtime.GOMAXPROCS(prev)
		f()
	}
	withP(func() {
		r := sched(1)
		require.True(t, h.sh.Cancel(r))
		st := h.sh.Stats()
		assert.Equal(t, uint64(1), st.TakenBack)
		assert.Zero(t, st.Queued, "taken back: not in the queue")
		idx, gen := r.split()
		r2 := sched(2)
		idx2, gen2 := r2.split()
		assert.Equal(t, idx, idx2, "the lane's next Schedule reuses the node")
		assert.Equal(t, gen+1, gen2)
		assert.False(t, h.sh.Cancel(r), "stale handle")
		assert.True(t, h.sh.Pending(r2))

		below := sched(3)
		sched(4)
		require.True(t, h.sh.Cancel(below), "below the top: cancelled, left in the queue")
		indexed, rej := h.sh.ScheduleIndexed(5, time.Hour, func() {})
		require.Equal(t, Accepted, rej)
		require.True(t, h.sh.Cancel(indexed), "indexed, entry kept: the worker must unindex it")
		assert.Equal(t, uint64(1), h.sh.Stats().TakenBack)

		h.pass()
		taken := sched(6)
		h.pass() // the worker takes it
		require.True(t, h.sh.Cancel(taken))
		st = h.sh.Stats()
		assert.Equal(t, uint64(1), st.TakenBack, "filed timers go through the attention stack")
		assert.Equal(t, uint64(4), st.Cancelled)
		h.pass()
		st = h.sh.Stats()
		assert.Equal(t, 2, st.Resident, "timers 2 and 4")
		assert.Zero(t, st.Queued)
		assert.Equal(t, int64(2), h.pending())
	})
}

// TestCancelRacingTheWorkersTake: producers schedule and at once cancel,
// while the worker takes their queues concurrently, so that a cancel's
// take-back races the worker's take of the same node, many times; others
// cancel later or let timers run. Every timer ends exactly once, none runs
// after its cancel won, Stats add up, and the arena does not grow with the
// number of timers.
func TestCancelRacingTheWorkersTake(t *testing.T) {
	rounds := 20000
	if testing.Short() || raceEnabled {
		rounds = 4000
	}
	for _, procs := range []int{1, 2, 4} {
		t.Run(fmt.Sprint("procs=", procs), func(t *testing.T) {
			prev := runtime.GOMAXPROCS(procs)
			defer runtime.GOMAXPROCS(prev)
			sh, err := New(Config{Tick: time.Millisecond, WheelSize: 64, TransferCap: 1 << 20,
				Quota: 1 << 40, Lanes: procs, OnPanic: func(v any) { t.Error(v) }, Stats: true})
			require.NoError(t, err)
			sh.Start()
			const producers = 3
			ran := make([][]atomic.Int32, producers)
			cancelled := make([][]bool, producers)
			var wg sync.WaitGroup
			for p := range producers {
				ran[p] = make([]atomic.Int32, rounds)
				cancelled[p] = make([]bool, rounds)
				wg.Add(1)
				go func() {
					defer wg.Done()
					var later []Ref
					var laterIdx []int
					for i := range rounds {
						r, rej := sh.Schedule(uint64(i), time.Duration(i%3)*time.Millisecond, func() { ran[p][i].Add(1) })
						if rej != Accepted {
							t.Errorf("rejected: %v", rej)
							return
						}
						switch i % 4 {
						case 0, 1: // at once: races the worker's take
							cancelled[p][i] = sh.Cancel(r)
						case 2: // later, from the queue or the wheel
							later, laterIdx = append(later, r), append(laterIdx, i)
						}
						if len(later) == 16 {
							for k, r := range later {
								cancelled[p][laterIdx[k]] = sh.Cancel(r)
							}
							later, laterIdx = later[:0], laterIdx[:0]
						}
					}
					for k, r := range later {
						cancelled[p][laterIdx[k]] = sh.Cancel(r)
					}
				}()
			}
			wg.Wait()
			require.Eventually(t, func() bool {
				return sh.Quota() == 1<<40
			}, 10*time.Second, time.Millisecond, "every timer must end")
			sh.Close()
			<-sh.Exited()
			for p := range producers {
				for i := range rounds {
					ends := int(ran[p][i].Load())
					if cancelled[p][i] {
						ends++
					}
					require.Equal(t, 1, ends, "producer %d timer %d: ran %d, cancelled %v", p, i, ran[p][i].Load(), cancelled[p][i])
				}
			}
			st := sh.Stats()
			assert.Equal(t, st.Scheduled, st.Fired+st.Cancelled, "Stats add up")
			assert.LessOrEqual(t, st.TakenBack, st.Cancelled)
			assert.NotZero(t, st.TakenBack, "immediate cancels take their timers back")
			assert.Less(t, sh.arena.HighWater(), uint32(producers*rounds/2), "nodes are reused")
			t.Logf("scheduled %d, cancelled %d, taken back %d, arena %d nodes", st.Scheduled, st.Cancelled, st.TakenBack, sh.arena.HighWater())
		})
	}
}
