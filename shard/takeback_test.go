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

// TestCancelTakesBackTheLastFiled: a timer cancelled while it is still
// the node its shard filed last, from that shard's P, goes straight back
// to the holder's free list (the next Schedule reuses it, a new
// generation), and Stats count it; one filed before it stays held in the
// wheel; an indexed one goes through the attention stack, so that the
// shard frees it, and tells its index, at its next pass; and one that
// waited in the queue while the wheel was held is freed when a holder
// takes the queue in.
func TestCancelTakesBackTheLastFiled(t *testing.T) {
	prev := runtime.GOMAXPROCS(1) // P 0: the harness shard's home lane
	defer runtime.GOMAXPROCS(prev)
	h := newHarness(t)
	var unindexed []uint64
	h.sh.cfg.Unindex = func(key uint64, _ Ref) { unindexed = append(unindexed, key) }
	sched := func(key uint64) Ref {
		r, rej := sched(h.sh, key, time.Hour, func() { t.Errorf("timer %d ran", key) })
		require.Equal(t, Accepted, rej)
		return r
	}
	r := sched(1)
	require.True(t, h.sh.Cancel(r))
	st := h.sh.Stats()
	assert.Equal(t, uint64(1), st.TakenBack)
	assert.Zero(t, st.Resident, "taken back: nothing held")
	r2 := sched(2)
	assert.Equal(t, r.idx, r2.idx, "the next Schedule reuses the node")
	assert.Equal(t, r.gen+1, r2.gen)
	assert.False(t, h.sh.Cancel(r), "stale handle")
	assert.True(t, h.sh.Pending(r2))

	below := sched(3)
	sched(4)
	require.True(t, h.sh.Cancel(below), "filed before the last: cancelled, held")
	assert.Equal(t, uint64(1), h.sh.Stats().TakenBack)
	assert.Equal(t, 1, h.sh.Stats().HeldCancelled)

	indexed, rej := schedIndexed(h.sh, 5, time.Hour, func() {})
	require.Equal(t, Accepted, rej)
	require.True(t, h.sh.Cancel(indexed), "indexed, entry kept: the shard must unindex it")
	assert.Equal(t, uint64(1), h.sh.Stats().TakenBack, "an indexed timer goes through the attention stack")
	h.pass()
	assert.Equal(t, []uint64{5}, unindexed, "freed, and its index told, at the next pass")

	unhold := holdWheel(t, h.sh)
	queued := sched(6)
	require.True(t, h.sh.Cancel(queued), "cancelled in the queue")
	unhold()
	st = h.sh.Stats()
	assert.Equal(t, uint64(1), st.TakenBack)
	assert.Equal(t, 1, st.Queued)
	h.pass()
	st = h.sh.Stats()
	assert.Equal(t, uint64(4), st.Cancelled)
	assert.Zero(t, st.Queued)
	// Timer 3, held cancelled, is more than a quarter of this small wheel:
	// the pass swept it.
	assert.Equal(t, 2, st.Resident, "timers 2 and 4")
	assert.Zero(t, st.HeldCancelled)
	assert.EqualValues(t, 1, st.Swept)
	assert.Equal(t, int64(2), h.pending())
}

// TestCancelRacingTheShardGoroutine: producers schedule and at once cancel
// while the shard goroutine runs its passes, so that take-backs race its
// holds of the wheel, many times; others cancel later or let timers run. Every timer ends exactly once, none runs
// after its cancel won, Stats add up, and the arena does not grow with the
// number of timers.
func TestCancelRacingTheShardGoroutine(t *testing.T) {
	rounds := 20000
	if testing.Short() || raceEnabled {
		rounds = 4000
	}
	for _, procs := range []int{1, 2, 4} {
		t.Run(fmt.Sprint("procs=", procs), func(t *testing.T) {
			prev := runtime.GOMAXPROCS(procs)
			defer runtime.GOMAXPROCS(prev)
			sh, err := New(Config{Tick: time.Millisecond, WheelSize: 64, TransferCap: 1 << 20,
				Tokens: 1 << 40, Limited: true, Lanes: procs, OnPanic: func(v any) { t.Error(v) }, Stats: true})
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
						r, rej := sched(sh, uint64(i), time.Duration(i%3)*time.Millisecond, func() { ran[p][i].Add(1) })
						if rej != Accepted {
							t.Errorf("rejected: %v", rej)
							return
						}
						switch i % 4 {
						case 0, 1: // at once: races the shard goroutine
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
				return sh.Tokens() == 1<<40
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
			if procs == 1 {
				// With one P every Cancel runs on the shard's home lane.
				assert.NotZero(t, st.TakenBack, "immediate cancels take their timers back")
			}
			// Nodes are reused: the arena holds the timers in flight (live, and
			// cancelled ones until their slot or the sweep), not every timer.
			assert.Less(t, sh.arena.HighWater(), uint32(st.Scheduled), "nodes are reused")
			t.Logf("scheduled %d, cancelled %d, taken back %d, arena %d nodes", st.Scheduled, st.Cancelled, st.TakenBack, sh.arena.HighWater())
		})
	}
}
