package shard

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Tests of the paths a timer takes outside its P's own wheel: the queue,
// the sweep, take-back, and Stop in the middle of them.

// TestSweepFreesHeldNodesAndStaleHandlesStayInert: cancelled timers held in
// the wheel are freed by the sweep once the wheel has grown past its
// threshold; their nodes go to new timers, and the old handles stay inert
// while the new timers are untouched.
func TestSweepFreesHeldNodesAndStaleHandlesStayInert(t *testing.T) {
	h := newHarness(t)
	sweepFrom(h.sh, 16)
	var held []Ref
	for i := range 40 {
		r := h.schedule(i, time.Hour)
		if i%2 == 0 {
			held = append(held, r)
		}
	}
	for _, r := range held {
		require.True(t, h.sh.Cancel(r)) // none is the last filed: all held
	}
	st := h.sh.statsNow()
	require.Equal(t, 20, st.HeldCancelled)
	require.Zero(t, st.Swept)
	// Filing pays the sweep: a step visits more nodes than the arena has.
	var later []Ref
	for i := 40; i < 40+sweepStep/sweepPerFiled+64; i++ {
		later = append(later, h.schedule(i, time.Hour))
	}
	st = h.sh.statsNow()
	assert.Zero(t, st.HeldCancelled, "the sweep freed every held node")
	// All but those at the head of the slot the goroutine would wake for
	// next, which its plan frees (pruneAhead).
	assert.GreaterOrEqual(t, st.Swept, uint64(18))
	assert.NotZero(t, st.Sweeps)
	freed := map[uint32]bool{}
	for _, r := range held {
		freed[r.idx] = true
	}
	var reused []Ref
	for _, r := range later {
		if freed[r.idx] {
			reused = append(reused, r)
		}
	}
	require.NotEmpty(t, reused, "swept nodes are handed out again")
	for _, r := range reused {
		for _, old := range held {
			if old.idx != r.idx {
				continue
			}
			assert.False(t, h.sh.Pending(old), "stale handle of node %d", old.idx)
			assert.False(t, h.sh.Cancel(old))
			assert.False(t, h.sh.Reset(old, 0, time.Second))
		}
		assert.True(t, h.sh.Pending(r), "the new timer on node %d is untouched", r.idx)
	}
}

// TestQueuedTimerResetAndCancelled: a timer waiting in the queue (its wheel
// held) may be reset, later or earlier, and runs at its last deadline once
// taken in; one cancelled there never runs and is freed when taken in.
func TestQueuedTimerResetAndCancelled(t *testing.T) {
	for _, c := range []struct {
		name         string
		first, reset time.Duration
	}{
		{"later", 5 * testTick, 20 * testTick},
		{"earlier", 600 * testTick, 3 * testTick},
		{"to now", 600 * testTick, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			unhold := holdWheel(t, h.sh)
			r, rej := sched(h.sh, 1, c.first, func() { h.fired[1] = h.clock.Now() })
			require.Equal(t, Accepted, rej)
			cancelled, rej := sched(h.sh, 2, c.first, func() { t.Error("cancelled timer ran") })
			require.Equal(t, Accepted, rej)
			h.clock.Advance(2 * testTick)
			resetAt := h.clock.Now()
			require.True(t, h.sh.Reset(r, 0, c.reset))
			require.True(t, h.sh.Cancel(cancelled))
			assert.Equal(t, 2, h.sh.statsNow().Queued)
			unhold()
			h.step(c.first + c.reset + 2*testTick)
			require.Contains(t, h.fired, 1)
			assert.GreaterOrEqual(t, h.fired[1], resetAt+c.reset, "never before its last deadline")
			assert.LessOrEqual(t, h.fired[1], resetAt+c.reset+2*testTick)
			st := h.sh.statsNow()
			assert.Zero(t, st.Queued)
			assert.Zero(t, st.HeldCancelled, "the cancelled one was freed when taken in")
			assert.Zero(t, h.pending())
		})
	}
}

// TestOtherPsTimersGoThroughTheQueue: a Schedule from a P whose own shard
// is another one leaves its timer in this shard's queue, never holding
// this wheel; the shard takes it in at its next pass (or its own P at the
// next release) and it runs on time. One cancelled before that never runs.
func TestOtherPsTimersGoThroughTheQueue(t *testing.T) {
	prev := runtime.GOMAXPROCS(1) // P 0, whose own shard is number 0
	defer runtime.GOMAXPROCS(prev)
	h := newHarness(t, func(c *Config) { c.ID, c.Shards = 1, 2 }) // shard 1
	require.False(t, h.sh.isLocal(0))
	r, rej := sched(h.sh, 1, 5*testTick, func() { h.fired[1] = h.clock.Now() })
	require.Equal(t, Accepted, rej)
	cancelled, rej := sched(h.sh, 2, 5*testTick, func() { t.Error("cancelled timer ran") })
	require.Equal(t, Accepted, rej)
	at := h.clock.Now()
	st := h.sh.statsNow()
	assert.Equal(t, 2, st.Queued, "queued, not filed")
	assert.Zero(t, h.sh.h.w.count)
	assert.Less(t, h.sh.sleepUntil.Load(), uint64(1<<62), "the shard goroutine was told to wake")
	assert.True(t, h.sh.Pending(r))
	require.True(t, h.sh.Cancel(cancelled))
	h.step(7 * testTick)
	require.Contains(t, h.fired, 1)
	assert.GreaterOrEqual(t, h.fired[1], at+5*testTick)
	assert.Zero(t, h.sh.statsNow().Queued)
	assert.Zero(t, h.pending())
}

// TestStopClaimsQueuedAndFiledNotHeld: Stop claims the live timers wherever
// they are, in the queue and in the wheel, and not the cancelled ones the
// wheel still holds; Stats add up.
func TestStopClaimsQueuedAndFiledNotHeld(t *testing.T) {
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	h := newHarness(t)
	want := map[Ref]bool{}
	for i := range 10 {
		want[h.schedule(i, time.Hour)] = true
	}
	var held []Ref
	for i := range 10 {
		r := h.schedule(100+i, time.Hour)
		held = append(held, r)
	}
	for _, r := range held[:9] { // all but the last filed: held
		require.True(t, h.sh.Cancel(r))
	}
	unhold := holdWheel(t, h.sh)
	for i := range 5 {
		r, rej := sched(h.sh, uint64(200+i), time.Hour, func() {})
		require.Equal(t, Accepted, rej)
		want[r] = true
	}
	unhold()
	want[held[9]] = true
	st := h.sh.statsNow()
	require.Equal(t, 9, st.HeldCancelled)
	require.Equal(t, 5, st.Queued)
	h.sh.Close()
	got := map[Ref]bool{}
	h.sh.Drain(func(r Ref, _ uint64, _ time.Duration, _ Task) bool { got[r] = true; return true })
	assert.Equal(t, want, got)
	st = h.sh.statsNow()
	assert.EqualValues(t, len(want), st.Stopped)
	assert.Equal(t, st.Scheduled, st.Fired+st.Cancelled+st.Stopped, "Stats add up")
	assert.Zero(t, h.pending())
}

// TestCancelRacingTheSweepAndExpiry: producers schedule timers due within a
// few ticks and cancel them from other goroutines at random moments, while
// the shard goroutine expires them and sweeps run all the time (a tiny
// threshold): every timer ends exactly once, none runs after its Cancel
// won, and the sweep freed many.
func TestCancelRacingTheSweepAndExpiry(t *testing.T) {
	rounds := 20000
	if testing.Short() || raceEnabled {
		rounds = 3000
	}
	forEachProcs(t, func(t *testing.T, procs int) {
		sh, err := New(Config{Tick: time.Millisecond, WheelSize: 16, TransferCap: 1 << 20,
			Lanes: procs, OnPanic: func(v any) { t.Error(v) }, Stats: true})
		require.NoError(t, err)
		sweepFrom(sh, 8)
		sh.Start()
		const producers = 3
		ran := make([][]atomic.Int32, producers)
		cancelled := make([][]atomic.Int32, producers)
		refs := make(chan [2]int, 1024)
		all := make([][]Ref, producers)
		var mu sync.Mutex
		var wg, cancellers sync.WaitGroup
		for range 2 {
			cancellers.Go(func() {
				for pi := range refs {
					mu.Lock()
					r := all[pi[0]][pi[1]]
					mu.Unlock()
					if sh.Cancel(r) {
						cancelled[pi[0]][pi[1]].Add(1)
					}
				}
			})
		}
		for p := range producers {
			ran[p] = make([]atomic.Int32, rounds)
			cancelled[p] = make([]atomic.Int32, rounds)
			all[p] = make([]Ref, rounds)
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(p), 1))
				for i := range rounds {
					r, rej := sched(sh, uint64(i), time.Duration(rng.IntN(4))*time.Millisecond, func() { ran[p][i].Add(1) })
					if rej != Accepted {
						t.Errorf("rejected: %v", rej)
						return
					}
					mu.Lock()
					all[p][i] = r
					mu.Unlock()
					if rng.IntN(3) > 0 {
						refs <- [2]int{p, i}
					}
				}
			})
		}
		wg.Wait()
		close(refs)
		cancellers.Wait()
		require.Eventually(t, func() bool { return sh.Live() == 0 }, 20*time.Second, time.Millisecond, "every timer ends")
		sh.Close()
		<-sh.Exited()
		for p := range producers {
			for i := range rounds {
				require.Equal(t, int32(1), ran[p][i].Load()+cancelled[p][i].Load(),
					"producer %d timer %d: ran %d, cancelled %d", p, i, ran[p][i].Load(), cancelled[p][i].Load())
			}
		}
		st := sh.statsNow()
		assert.Equal(t, st.Scheduled, st.Fired+st.Cancelled, "Stats add up")
		t.Logf("cancelled %d, swept %d in %d sweeps, taken back %d", st.Cancelled, st.Swept, st.Sweeps, st.TakenBack)
	})
}

// Holders feed a lane as many nodes as its producers took elsewhere: a
// second burst from a producer that does not hold the wheel reuses the
// first burst's nodes instead of growing the arena beside them.
func TestFreedNodesReachProducersWithoutTheWheel(t *testing.T) {
	h := newHarness(t)
	const n = 4 * shareMax
	burst := func() {
		unhold := holdWheel(t, h.sh) // a producer that finds the wheel held
		for i := range n {
			_, rej := sched(h.sh, uint64(i), testTick, func() {})
			require.Equal(t, Accepted, rej)
		}
		unhold()
		for i := 0; h.pending() > 0; i++ { // taken in and fired: the holder frees them all
			require.Less(t, i, 1000, "timers left: %d", h.pending())
			h.step(testTick)
		}
	}
	burst()
	grown := h.sh.arena.HighWater()
	burst()
	assert.LessOrEqual(t, h.sh.arena.HighWater(), grown+shareMin,
		"the second burst found the first one's nodes (arena grew by %d)", h.sh.arena.HighWater()-grown)
}

// A timer still in the queue (its producer found the wheel held) is filed
// only when the shard goroutine takes the queue in: a Reset that moves it
// earlier than the goroutine's plan must wake it, or the timer runs as late
// as that plan.
func TestResetOfAQueuedTimerWakesTheShardGoroutine(t *testing.T) {
	h := newHarness(t)
	h.schedule(1, time.Hour) // filed; the pass plans to sleep until it
	drainWake := func() {
		select {
		case <-h.sh.wake:
		default:
		}
	}
	far := h.sh.floorTick(h.clock.Now()) + 1000
	require.Greater(t, h.sh.sleepUntil.Load(), far)

	unhold := holdWheel(t, h.sh)
	r, rej := sched(h.sh, 2, time.Hour, func() { h.fired[2] = h.clock.Now() })
	require.Equal(t, Accepted, rej)
	unhold()
	drainWake()
	require.Greater(t, h.sh.sleepUntil.Load(), far, "a queued timer an hour away wakes nobody")

	resetAt := h.clock.Now()
	require.True(t, h.sh.Reset(r, 0, 3*testTick))
	due := h.sh.deadlineTick(resetAt, 3*testTick)
	assert.LessOrEqual(t, h.sh.sleepUntil.Load(), due, "the goroutine's plan")
	alarm := h.sh.alarm.(*manualTimer)
	assert.True(t, alarm.armed.Load(), "the goroutine's alarm is armed")
	assert.LessOrEqual(t, time.Duration(alarm.when.Load()), h.sh.tickTime(due), "for the new deadline")

	h.runOut()
	require.Contains(t, h.fired, 2)
	assert.Equal(t, h.sh.tickTime(due), h.fired[2], "at its new deadline's tick")
}
