package shard

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newGroup starts n shards on the real clock that route keys to shard
// key % n, as package shardwheel's Scheduler does with its hash.
func newGroup(t testing.TB, n int, mutate ...func(*Config)) (*Group, []*Shard) {
	t.Helper()
	clock, epoch, skew := NewClock()
	g := &Group{Shards: make([]*Shard, n), Route: func(key uint64) int { return int(key % uint64(n)) }, Origin: clock.Now()}
	for i := range n {
		cfg := Config{
			Tick: testTick, WheelSize: 64, FirstBlock: 64, TransferCap: 1 << 20,
			Clock: clock, Epoch: epoch, Skew: skew,
			Lanes: runtime.GOMAXPROCS(0), ID: i, Shards: n, Home: i,
			Group: g, OnPanic: func(v any) { t.Errorf("task panicked: %v", v) },
		}
		for _, m := range mutate {
			m(&cfg)
		}
		sh, err := New(cfg)
		require.NoError(t, err)
		g.Shards[i] = sh
	}
	for _, sh := range g.Shards {
		sh.Start()
	}
	t.Cleanup(func() {
		for _, sh := range g.Shards {
			sh.Close()
		}
		for _, sh := range g.Shards {
			<-sh.Exited()
		}
	})
	return g, g.Shards
}

// routedTimer is one routed timer's fate in a stress run.
type routedTimer struct {
	sh        *Shard
	ref       Ref
	key       uint64
	due       atomic.Int64 // clock reading before which it must not run
	ran       atomic.Int32
	cancelled atomic.Int32
	early     atomic.Int64
	elsewhere atomic.Bool // ran on another goroutine than its key's shard's
}

// Routed timers scheduled, reset and cancelled from many goroutines on
// every shard end exactly once, never early, and run on the goroutine of
// the shard their key routes to, whichever shard filed them: short ones
// cross at once, long ones when a cascade brings them near.
func TestRoutedTimersCrossExactlyOnce(t *testing.T) {
	forEachProcs(t, func(t *testing.T, procs int) {
		_, shards := newGroup(t, 3)
		clock := shards[0].clock
		workers, ops := 2*procs, 3000
		if raceEnabled || testing.Short() {
			ops = 800
		}
		var mu sync.Mutex
		var all []*routedTimer
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(w), 7))
				var mine []*routedTimer
				for range ops {
					switch op := r.IntN(10); {
					case op < 5 || len(mine) == 0:
						rt := &routedTimer{key: r.Uint64N(50)}
						delay := time.Duration(r.IntN(30_000)) * time.Microsecond
						if r.IntN(8) == 0 {
							delay = 80*time.Millisecond + time.Duration(r.IntN(40_000))*time.Microsecond // filed beyond level 0
						}
						now := clock.Now()
						rt.due.Store(int64(now + delay))
						home := shards[CurrentP()%len(shards)]
						k := shards[rt.key%uint64(len(shards))]
						task := func() {
							if late := int64(clock.Now()) - rt.due.Load(); late < 0 {
								rt.early.Store(-late)
							}
							if !k.IsShardGoroutine(GoroutineID()) {
								rt.elsewhere.Store(true)
							}
							rt.ran.Add(1)
						}
						ref, rej := home.Schedule(&Request{Key: rt.key, Now: now, Delay: delay, Task: Task{Func: task}, Routed: true})
						require.Equal(t, Accepted, rej)
						rt.sh, rt.ref = home, ref
						mine = append(mine, rt)
					case op < 8:
						rt := mine[r.IntN(len(mine))]
						if rt.sh.Cancel(rt.ref) {
							rt.cancelled.Add(1)
						}
					default:
						rt := mine[r.IntN(len(mine))]
						delay := time.Duration(r.IntN(30_000)) * time.Microsecond
						now := clock.Now()
						prev := rt.due.Load()
						rt.due.Store(min(prev, int64(now+delay)))
						if rt.sh.Reset(rt.ref, rt.key, delay) {
							rt.due.Store(int64(now + delay))
						}
					}
				}
				mu.Lock()
				all = append(all, mine...)
				mu.Unlock()
			})
		}
		wg.Wait()
		live := func() int64 {
			var n int64
			for _, sh := range shards {
				n += sh.Live()
			}
			return n
		}
		require.Eventually(t, func() bool { return live() == 0 }, 10*time.Second, time.Millisecond, "timers left: %d", live())
		// Fired timers count as not live once their runs are handed to
		// their runner: wait for those runs.
		require.Eventually(t, func() bool {
			return !slices.ContainsFunc(all, func(rt *routedTimer) bool { return rt.ran.Load()+rt.cancelled.Load() == 0 })
		}, 10*time.Second, time.Millisecond, "fired timers' tasks run")
		crossed := uint64(0)
		for _, sh := range shards {
			crossed += sh.statsNow().Crossed
		}
		assert.Positive(t, crossed, "no timer crossed")
		for i, rt := range all {
			require.EqualValues(t, 1, rt.ran.Load()+rt.cancelled.Load(), "timer %d: ran %d, cancelled %d", i, rt.ran.Load(), rt.cancelled.Load())
			require.Zero(t, rt.early.Load(), "timer %d ran early", i)
			require.False(t, rt.elsewhere.Load(), "timer %d ran off its key's shard", i)
			require.False(t, rt.sh.Pending(rt.ref))
		}
		for _, sh := range shards {
			st := sh.statsNow()
			assert.Equal(t, st.Scheduled, st.Fired+st.Cancelled, "shard %d adds up", sh.id)
		}
	})
}

// manualGroup is n shards of one Group on a manual clock, without their
// goroutines: the test makes each pass, as harness does for one shard.
type manualGroup struct {
	t      testing.TB
	clock  *ManualClock
	shards []*Shard
}

func newManualGroup(t testing.TB, n int, mutate func(i int, c *Config)) *manualGroup {
	t.Helper()
	m := &manualGroup{t: t, clock: &ManualClock{}}
	m.clock.Advance(time.Hour)
	g := &Group{Shards: make([]*Shard, n), Route: func(key uint64) int { return int(key % uint64(n)) }, Origin: m.clock.Now()}
	for i := range n {
		cfg := Config{
			Tick: testTick, WheelSize: 512, FirstBlock: 64, TransferCap: 1 << 20,
			Clock: m.clock, Lanes: 2, ID: i, Shards: n, Home: i, Group: g,
			OnPanic: func(v any) { t.Errorf("task panicked: %v", v) },
		}
		if mutate != nil {
			mutate(i, &cfg)
		}
		sh, err := New(cfg)
		require.NoError(t, err)
		g.Shards[i] = sh
	}
	m.shards = g.Shards
	for _, sh := range m.shards {
		playShardGoroutine(t, sh)
	}
	return m
}

// pass makes one pass of every shard, checking each wheel's invariants.
func (m *manualGroup) pass() {
	m.t.Helper()
	for _, sh := range m.shards {
		require.True(m.t, sh.holdForPass(), "the wheel is held")
		sh.pass()
		sh.verify()
		sh.release()
		settleRuns(m.t, sh)
	}
}

// step advances the clock by d a tick at a time, with passes after each.
func (m *manualGroup) step(d time.Duration) {
	for ; d > 0; d -= testTick {
		m.clock.Advance(testTick)
		m.pass()
	}
}

// A key's timers run in deadline order on the key's shard even when that
// shard's queue is backlogged (a transfer cap of one timer a tick): timers
// crossing to their key's shard are not new timers waiting for the wheel,
// and no backlog of other keys' new timers holds them back.
func TestKeyOrderHoldsBehindATransferBacklog(t *testing.T) {
	m := newManualGroup(t, 3, func(i int, c *Config) {
		if i == 0 {
			c.TransferCap = 1
		}
	})
	k := m.shards[0]
	var order []string
	routed := func(on *Shard, key uint64, delay time.Duration, name string) {
		_, rej := on.Schedule(&Request{Key: key, Now: m.clock.Now(), Delay: delay, Routed: true,
			Task: Task{Func: func() { order = append(order, name) }}})
		require.Equal(t, Accepted, rej)
	}
	// Key 3's later timer, from shard 2; then a backlog of other keys'
	// new timers on shard 0 itself; then key 3's earlier timer, from
	// shard 1. Both of key 3's cross to shard 0 at their Schedule.
	routed(m.shards[2], 3, 200*time.Millisecond, "late")
	m.pass()
	unhold := holdWheel(t, k) // so that they wait in its queue
	for i := range 300 {
		_, rej := sched(k, uint64(i*3), 400*time.Millisecond, func() {})
		require.Equal(t, Accepted, rej)
	}
	unhold()
	routed(m.shards[1], 3, 100*time.Millisecond, "early")
	m.pass()
	m.step(600 * time.Millisecond)
	require.Equal(t, []string{"early", "late"}, order, "key 3's timers in deadline order")
}
