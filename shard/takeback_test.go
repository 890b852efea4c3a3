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
	st := h.sh.statsNow()
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
	assert.Equal(t, uint64(1), h.sh.statsNow().TakenBack)
	assert.Equal(t, 1, h.sh.statsNow().HeldCancelled)

	indexed, rej := schedIndexed(h.sh, 5, time.Hour, func() {})
	require.Equal(t, Accepted, rej)
	require.True(t, h.sh.Cancel(indexed), "indexed, entry kept: the shard must unindex it")
	assert.Equal(t, uint64(1), h.sh.statsNow().TakenBack, "an indexed timer goes through the attention stack")
	h.pass()
	assert.Equal(t, []uint64{5}, unindexed, "freed, and its index told, at the next pass")

	unhold := holdWheel(t, h.sh)
	queued := sched(6)
	require.True(t, h.sh.Cancel(queued), "cancelled in the queue")
	unhold()
	st = h.sh.statsNow()
	assert.Equal(t, uint64(1), st.TakenBack)
	assert.Equal(t, 1, st.Queued)
	h.pass()
	st = h.sh.statsNow()
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
// holds of the wheel, many times; others cancel later or let timers run.
// Every timer ends exactly once, none runs after its cancel won, Stats add
// up, and the arena does not grow with the number of timers.
func TestCancelRacingTheShardGoroutine(t *testing.T) {
	rounds := 20000
	if testing.Short() || raceEnabled {
		rounds = 4000
	}
	forEachProcs(t, func(t *testing.T, procs int) {
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
			return sh.heldTokens() == 1<<40
		}, 10*time.Second, time.Millisecond, "every timer must end")
		assertNodesReused(t, sh, rounds)
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
		st := sh.statsNow()
		assert.Equal(t, st.Scheduled, st.Fired+st.Cancelled, "Stats add up")
		assert.LessOrEqual(t, st.TakenBack, st.Cancelled)
		if procs == 1 {
			// With one P every Cancel runs on the shard's home lane.
			assert.NotZero(t, st.TakenBack, "immediate cancels take their timers back")
		}
		t.Logf("scheduled %d, cancelled %d, taken back %d, arena %d nodes", st.Scheduled, st.Cancelled, st.TakenBack, sh.arena.HighWater())
	})
}

// assertNodesReused checks, once every timer of sh has ended, that a
// second batch of n timers takes freed nodes: the arena holds no more than
// the timers once in flight, whatever share of them a busy host let the
// shard free during the load (under -race on a busy host it may free none
// before the producers are done). It waits until the batch is freed.
func assertNodesReused(t *testing.T, sh *Shard, n int) {
	t.Helper()
	hw := sh.arena.HighWater()
	for i := range n {
		r, rej := sched(sh, uint64(i), time.Hour, func() {})
		require.Equal(t, Accepted, rej)
		require.True(t, sh.Cancel(r))
	}
	assert.Equal(t, hw, sh.arena.HighWater(), "a second batch of %d timers took new nodes", n)
	require.Eventually(t, func() bool { return sh.statsNow().Resident == 0 }, 10*time.Second, time.Millisecond)
}

// outcome records how each timer of a stress test ended.
type outcome struct {
	ran       atomic.Int32
	cancelled atomic.Int32
	claimed   atomic.Int32
	rejected  atomic.Bool
}

// TestSharedLanesAfterGOMAXPROCSRaise: the shard has fewer lanes than the
// Ps the test runs on (one or two lanes, up to 8 Ps), so that several Ps
// map to one lane, as after a runtime.GOMAXPROCS call raises the count in
// a running program. Producers on those Ps schedule closure and handler
// timers and cancel most at once (taken back from wheels two Ps file on),
// some later, and let the rest run. Every timer ends
// exactly once, Stats add up, and the arena does not grow with the number
// of timers.
func TestSharedLanesAfterGOMAXPROCSRaise(t *testing.T) {
	rounds := 20000
	if testing.Short() || raceEnabled {
		rounds = 3000
	}
	forEachProcs(t, func(t *testing.T, procs int) {
		for _, lanes := range []int{1, 2} {
			if lanes >= procs {
				continue // several Ps to a lane only
			}
			t.Run(fmt.Sprintf("lanes=%d", lanes), func(t *testing.T) {
				var tab Handlers
				const producers = 6
				out := make([][]outcome, producers)
				for p := range out {
					out[p] = make([]outcome, rounds)
				}
				h, ok := tab.Add(func(key uint64) {
					p, i := key>>32, key&(1<<32-1)
					out[p][i].ran.Add(1)
				})
				require.True(t, ok)
				sh, err := New(Config{Tick: time.Millisecond, WheelSize: 64, TransferCap: 1 << 20,
					Tokens: 1 << 40, Limited: true, Lanes: lanes, Handlers: &tab, OnPanic: func(v any) { t.Error(v) }, Stats: true})
				require.NoError(t, err)
				sh.Start()
				var wg sync.WaitGroup
				for p := range producers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						var later []Ref
						var laterIdx []int
						for i := range rounds {
							o := &out[p][i]
							key := uint64(p)<<32 | uint64(i)
							var r Ref
							var rej Reject
							if i%2 == 0 {
								r, rej = schedHandler(sh, key, time.Duration(i%3)*time.Millisecond, h, false)
							} else {
								r, rej = sched(sh, key, time.Duration(i%3)*time.Millisecond, func() { o.ran.Add(1) })
							}
							if rej != Accepted {
								t.Errorf("rejected: %v", rej)
								return
							}
							switch i % 5 {
							case 0, 1, 2: // at once: take-back on a lane other Ps share
								if sh.Cancel(r) {
									o.cancelled.Add(1)
								}
							case 3:
								later, laterIdx = append(later, r), append(laterIdx, i)
							}
							if len(later) == 8 {
								for k, r := range later {
									if sh.Cancel(r) {
										out[p][laterIdx[k]].cancelled.Add(1)
									}
								}
								later, laterIdx = later[:0], laterIdx[:0]
							}
							if i%64 == 0 {
								runtime.Gosched() // migrate between Ps now and then
							}
						}
						for k, r := range later {
							if sh.Cancel(r) {
								out[p][laterIdx[k]].cancelled.Add(1)
							}
						}
					}()
				}
				wg.Wait()
				require.Eventually(t, func() bool { return sh.heldTokens() == 1<<40 }, 20*time.Second, time.Millisecond,
					"every timer must end")
				require.Eventually(t, func() bool {
					st := sh.statsNow()
					return st.Scheduled == st.Fired+st.Cancelled && st.Queued == 0 && st.Resident == 0
				}, 10*time.Second, time.Millisecond, "the shard goroutine publishes every end")
				assertNodesReused(t, sh, rounds)
				sh.Close()
				<-sh.Exited()
				for p := range out {
					for i := range out[p] {
						o := &out[p][i]
						require.Equal(t, int32(1), o.ran.Load()+o.cancelled.Load(),
							"producer %d timer %d: ran %d, cancelled %d", p, i, o.ran.Load(), o.cancelled.Load())
					}
				}
				st := sh.statsNow()
				assert.Equal(t, uint64(producers*rounds+rounds), st.Scheduled)
				assert.Equal(t, st.Scheduled, st.Fired+st.Cancelled, "Stats add up")
				assert.LessOrEqual(t, st.TakenBack, st.Cancelled)
				assert.Zero(t, st.Queued)
				t.Logf("scheduled %d, cancelled %d, taken back %d, arena %d nodes", st.Scheduled, st.Cancelled, st.TakenBack, sh.arena.HighWater())
			})
		}
	})
}

// TestDrainRacesTakeBack: Close and Drain run while producers keep
// scheduling (rejected or undone after Close, unless Drain claims them
// first) and cancelling timers, many of them taken back and their nodes
// reused while Drain scans. Every accepted timer ends
// exactly once (ran, cancelled, or claimed by Drain), Claimed gives back
// the task of exactly the claimed ones (the handler called with its own
// key), none of the others, and Stats add up with Stopped.
func TestDrainRacesTakeBack(t *testing.T) {
	iters := 30
	if testing.Short() || raceEnabled {
		iters = 8
	}
	forEachProcs(t, func(t *testing.T, procs int) {
		for range iters {
			runDrainRace(t, procs)
			if t.Failed() {
				return
			}
		}
	})
}

func runDrainRace(t *testing.T, lanes int) {
	const producers, perP = 4, 4000
	var tab Handlers
	out := make([][]outcome, producers)
	refs := make([][]Ref, producers)
	for p := range out {
		out[p] = make([]outcome, perP)
		refs[p] = make([]Ref, perP)
	}
	var claimCalls [producers][perP]atomic.Int32
	inClaim := atomic.Bool{}
	h, ok := tab.Add(func(key uint64) {
		p, i := key>>32, key&(1<<32-1)
		if inClaim.Load() {
			claimCalls[p][i].Add(1)
			return
		}
		out[p][i].ran.Add(1)
	})
	require.True(t, ok)
	sh, err := New(Config{Tick: time.Millisecond, WheelSize: 64, TransferCap: 1 << 20,
		Tokens: 1 << 40, Limited: true, Lanes: lanes, Handlers: &tab, OnPanic: func(v any) { t.Error(v) }, Stats: true})
	require.NoError(t, err)
	sh.Start()
	var started, wg sync.WaitGroup
	started.Add(producers)
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perP {
				if i == perP/8 {
					started.Done()
				}
				o := &out[p][i]
				key := uint64(p)<<32 | uint64(i)
				var r Ref
				var rej Reject
				if i%2 == 0 {
					r, rej = schedHandler(sh, key, time.Hour, h, false)
				} else {
					r, rej = sched(sh, key, time.Hour, func() {
						if inClaim.Load() {
							claimCalls[p][i].Add(1)
							return
						}
						o.ran.Add(1)
					})
				}
				if rej != Accepted {
					assert.Equal(t, Closed, rej)
					o.rejected.Store(true)
					continue
				}
				refs[p][i] = r
				if i%4 != 3 && sh.Cancel(r) { // most at once: taken back
					o.cancelled.Add(1)
				}
				if i >= 2 && i%4 == 1 && !refs[p][i-2].IsZero() && sh.Cancel(refs[p][i-2]) {
					out[p][i-2].cancelled.Add(1)
				}
			}
		}()
	}
	started.Wait()
	sh.Close()
	<-sh.Exited()
	claimed := map[Ref]uint64{}
	sh.Drain(func(r Ref, key uint64, _ time.Duration, _ Task) bool {
		_, dup := claimed[r]
		assert.False(t, dup, "claimed twice")
		claimed[r] = key
		return true
	})
	wg.Wait()
	for r, key := range claimed {
		p, i := key>>32, key&(1<<32-1)
		require.Equal(t, refs[p][i], r, "Drain's key and Ref disagree")
		out[p][i].claimed.Add(1)
	}
	inClaim.Store(true)
	var accepted uint64
	for p := range out {
		for i := range out[p] {
			o := &out[p][i]
			if o.rejected.Load() {
				require.Zero(t, o.ran.Load()+o.cancelled.Load()+o.claimed.Load())
				require.True(t, sh.Claimed(refs[p][i]).IsZero())
				continue
			}
			accepted++
			require.Equal(t, int32(1), o.ran.Load()+o.cancelled.Load()+o.claimed.Load(),
				"producer %d timer %d: ran %d, cancelled %d, claimed %d", p, i, o.ran.Load(), o.cancelled.Load(), o.claimed.Load())
			claimedTask := sh.Claimed(refs[p][i])
			if o.claimed.Load() == 0 {
				require.True(t, claimedTask.IsZero(), "producer %d timer %d: not claimed, yet Claimed gives a task", p, i)
				continue
			}
			require.False(t, claimedTask.IsZero(), "producer %d timer %d: claimed, but no task", p, i)
			sh.Func(claimedTask, uint64(p)<<32|uint64(i))()
			require.Equal(t, int32(1), claimCalls[p][i].Load(), "producer %d timer %d: Claimed's task calls another timer's task", p, i)
		}
	}
	st := sh.statsNow()
	assert.Equal(t, accepted, st.Scheduled)
	assert.Equal(t, st.Scheduled, st.Fired+st.Cancelled+st.Stopped, "Stats add up")
	assert.Equal(t, uint64(len(claimed)), st.Stopped)
	assert.Equal(t, int64(1<<40), sh.heldTokens(), "no timer pending")
}
