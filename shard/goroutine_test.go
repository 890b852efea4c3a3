package shard

import (
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests run the real shard goroutine on a manual clock. They wait for
// the shard goroutine with require.Eventually, but every assertion is about an
// outcome, never about how long something took.

func startShard(t *testing.T) (*Shard, *ManualClock) {
	t.Helper()
	clock := &ManualClock{}
	sh, err := New(Config{
		Tick: testTick, WheelSize: 64, FirstBlock: 64, TransferCap: 1000,
		Clock: clock, Tokens: 1 << 30, Limited: true, Lanes: 2,
		OnPanic: func(v any) { t.Errorf("panic: %v", v) },
	})
	require.NoError(t, err)
	sh.Start()
	t.Cleanup(func() { sh.Close(); <-sh.Exited() })
	return sh, clock
}

const waitFor, pollEvery = 5 * time.Second, 100 * time.Microsecond

func TestIdleShardGoroutineParksAndScheduleWakesIt(t *testing.T) {
	sh, clock := startShard(t)
	require.Eventually(t, func() bool { return sh.sleepUntil.Load() == math.MaxUint64 }, waitFor, pollEvery,
		"an idle shard parks untimed instead of ticking")

	var ranAt atomic.Int64
	start := clock.Now()
	_, rej := sched(sh, 1, 5*testTick, func() { ranAt.Store(int64(clock.Now())) })
	require.Equal(t, Accepted, rej)
	// The shard goroutine must wake (it was parked with no timer at all), take the
	// timer, and sleep until its tick; the test then moves time along.
	require.Eventually(t, func() bool {
		if ranAt.Load() != 0 {
			return true
		}
		clock.Advance(testTick / 4)
		return false
	}, waitFor, pollEvery)
	assert.GreaterOrEqual(t, time.Duration(ranAt.Load()), start+5*testTick, "never early")
}

func TestFarTimerLetsTheShardGoroutinePark(t *testing.T) {
	sh, _ := startShard(t)
	_, rej := sched(sh, 1, time.Hour, func() {})
	require.Equal(t, Accepted, rej)
	// With only a timer an hour away, the shard goroutine parks until it (or a
	// cascade) is due rather than waking every tick.
	require.Eventually(t, func() bool {
		next := sh.sleepUntil.Load()
		return next != math.MaxUint64 && next > sh.floorTick(sh.clock.Now())+1 && sh.heldTokens() == 1<<30-1
	}, waitFor, pollEvery)
}

// TestBurstGrowsStorageAndLosesNothing schedules far more timers than the
// first block of node storage holds: the arena grows, the queues never fill.
func TestBurstGrowsStorageAndLosesNothing(t *testing.T) {
	sh, clock := startShard(t) // a first block of 64 nodes
	var ran atomic.Int64
	const n = 5000
	for i := range n {
		_, rej := sched(sh, uint64(i), testTick, func() { ran.Add(1) })
		require.Equal(t, Accepted, rej)
	}
	require.Eventually(t, func() bool {
		clock.Advance(testTick)
		return ran.Load() == n
	}, waitFor, pollEvery)
}

func TestStopFromTaskDoesNotWaitForItself(t *testing.T) {
	sh, clock := startShard(t)
	done := make(chan []Ref, 1)
	_, rej := sched(sh, 1, testTick, func() {
		assert.True(t, sh.IsShardGoroutine(GoroutineID()))
		sh.Close()
		var refs []Ref
		sh.Drain(func(r Ref, _ uint64, _ time.Duration, _ Task) bool { refs = append(refs, r); return true })
		done <- refs
	})
	require.Equal(t, Accepted, rej)
	other, rej := sched(sh, 2, time.Hour, func() {})
	require.Equal(t, Accepted, rej)
	require.False(t, sh.IsShardGoroutine(GoroutineID()))
	require.Eventually(t, func() bool { clock.Advance(testTick); return len(done) == 1 }, waitFor, pollEvery)
	assert.Equal(t, []Ref{other}, <-done)
	<-sh.Exited() // the shard goroutine exits once the task returns
}

// TestConcurrentProducersOnSmallWheels runs the real shard goroutine on the real
// clock with small wheels (many levels, so many cascades) while producers
// schedule, reset and cancel concurrently: every accepted timer ends exactly
// once, and none runs before its latest deadline.
func TestConcurrentProducersOnSmallWheels(t *testing.T) {
	perProducer := 3000
	if testing.Short() || raceEnabled {
		perProducer = 1000
	}
	for _, size := range []int{4, 8, 64} {
		clock, _, _ := NewClock()
		var early, twice atomic.Int64
		sh, err := New(Config{
			Tick: time.Millisecond, WheelSize: size, FirstBlock: 64, TransferCap: 1 << 20,
			Clock: clock, Tokens: 1 << 30, Limited: true, Lanes: 4,
			OnPanic: func(v any) { t.Errorf("panic: %v", v) },
		})
		require.NoError(t, err)
		sh.Start()
		type timer struct {
			mu      sync.Mutex
			ref     Ref
			due     time.Duration
			ran     bool
			stopped bool
		}
		const producers = 4
		all := make([][]*timer, producers)
		var wg sync.WaitGroup
		for p := range producers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(p), uint64(size)))
				var mine []*timer
				for range perProducer {
					x := &timer{}
					delay := time.Duration(r.IntN(300)) * time.Millisecond / 4
					x.mu.Lock()
					x.due = clock.Now() + delay
					ref, rej := sched(sh, 0, delay, func() {
						x.mu.Lock()
						defer x.mu.Unlock()
						if x.ran || x.stopped {
							twice.Add(1)
						}
						x.ran = true
						if clock.Now() < x.due {
							early.Add(1)
						}
					})
					x.ref = ref
					x.mu.Unlock()
					if rej != Accepted {
						t.Errorf("rejected: %v", rej)
						return
					}
					mine = append(mine, x)
					for range r.IntN(3) {
						o := mine[r.IntN(len(mine))]
						o.mu.Lock()
						if r.IntN(3) == 0 {
							if sh.Cancel(o.ref) {
								if o.ran || o.stopped {
									twice.Add(1)
								}
								o.stopped = true
							}
						} else {
							d := time.Duration(r.IntN(300)) * time.Millisecond / 4
							now := clock.Now()
							if sh.Reset(o.ref, 0, d) {
								o.due = now + d
							}
						}
						o.mu.Unlock()
					}
					if r.IntN(50) == 0 {
						time.Sleep(time.Duration(r.IntN(3000)) * time.Microsecond)
					}
				}
				all[p] = mine
			}()
		}
		wg.Wait()
		require.Eventually(t, func() bool { return sh.heldTokens() == 1<<30 }, 20*time.Second, time.Millisecond,
			"every timer ends")
		sh.Close()
		<-sh.Exited()
		for _, mine := range all {
			for _, x := range mine {
				x.mu.Lock()
				require.True(t, x.ran != x.stopped, "ended exactly once")
				require.False(t, sh.Pending(x.ref))
				x.mu.Unlock()
			}
		}
		require.Zero(t, early.Load(), "size %d: ran early", size)
		require.Zero(t, twice.Load(), "size %d: ended twice", size)
	}
}

// TestCancelledTimerStillWakesTheGoroutineAndLagIsLateness: a Cancel of the
// timer the goroutine sleeps for leaves its sleep alone (the Cancel does not
// re-plan it); the goroutine wakes at that tick, finds nothing due, frees
// the node and sleeps on to the next live timer. Its tick lag is how late
// it processed each tick it was due to wake for, not how long it slept:
// on a manual clock moved to each tick's start exactly, zero.
func TestCancelledTimerStillWakesTheGoroutineAndLagIsLateness(t *testing.T) {
	clock := &ManualClock{}
	sh, err := New(Config{
		Tick: testTick, WheelSize: 256, FirstBlock: 64, TransferCap: 1000, // both timers in level 0
		Clock: clock, Tokens: 1 << 30, Limited: true, Lanes: 2, Stats: true,
		OnPanic: func(v any) { t.Errorf("panic: %v", v) },
	})
	require.NoError(t, err)
	// Both timers are filed before the goroutine starts, and the clock
	// is a tick on: its first pass plans at tick 1, which plannedAt
	// shows, and no producer can signal it after that.
	clock.Advance(testTick)
	var ranY atomic.Bool
	x, rej := sched(sh, 1, 30*testTick, func() { t.Error("cancelled timer ran") })
	require.Equal(t, Accepted, rej)
	_, rej = sched(sh, 2, 150*testTick, func() { ranY.Store(true) })
	require.Equal(t, Accepted, rej)
	xTick, yTick := sh.ceilTick(31*testTick), sh.ceilTick(151*testTick)
	sh.Start()
	t.Cleanup(func() { sh.Close(); <-sh.Exited() })
	require.Eventually(t, func() bool { return sh.plannedAt.Load() == 1 && sh.sleepUntil.Load() == xTick },
		waitFor, pollEvery, "the goroutine's first pass plans to sleep until the first timer")
	require.True(t, sh.Cancel(x))
	assert.Equal(t, xTick, sh.sleepUntil.Load(), "a Cancel does not re-plan the sleep")

	clock.Advance(sh.tickTime(xTick) - clock.Now())
	require.Eventually(t, func() bool { return sh.sleepUntil.Load() == yTick }, waitFor, pollEvery,
		"woken at the cancelled timer's tick, the goroutine plans for the next live one")
	assert.Zero(t, sh.statsNow().HeldCancelled, "the wake freed the cancelled node")
	clock.Advance(sh.tickTime(yTick) - clock.Now())
	require.Eventually(t, ranY.Load, waitFor, pollEvery)
	lag := sh.statsNow().TickLag
	assert.EqualValues(t, 2, lag.Count(), "a lag for each tick the goroutine slept until: X's and Y's")
	assert.Zero(t, lag.Max(), "each tick processed as the clock reached it: no lag")
}
