package shardwheel_test

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
	"github.com/shardwheel/shardwheel/pool"
)

// Tests of the wheel per P: timers made on one P and ended from another,
// and the P count changing under them.

// outcome records how one timer ended.
type outcome struct{ ran, cancelled, stopped atomic.Int32 }

func (o *outcome) ends() int32 { return o.ran.Load() + o.cancelled.Load() + o.stopped.Load() }

// TestTimersEndedFromOtherPs: at GOMAXPROCS 1 to 8, with a shard per P,
// goroutines schedule timers without a key and with keys, and hand them to
// other goroutines, which cancel, reset or leave them, while Stop runs at
// the end: every timer ends exactly once, none early, and Stats add up.
func TestTimersEndedFromOtherPs(t *testing.T) {
	rounds := 4000
	if testing.Short() || raceEnabled {
		rounds = 800
	}
	forEachProcs(t, func(t *testing.T, procs int) {
		s := newUnstopped(t, shardwheel.WithShards(procs))
		const producers, takers = 4, 4
		out := make([][]outcome, producers)
		type handed struct {
			tm     shardwheel.Timer
			o      *outcome
			due    *atomic.Int64 // clock reading before which it must not run
			action int
		}
		ch := make(chan handed, 256)
		var early atomic.Int64
		var wg, tw sync.WaitGroup
		for range takers {
			tw.Go(func() {
				for h := range ch {
					switch h.action {
					case 0:
						if h.tm.Cancel() {
							h.o.cancelled.Add(1)
						}
					case 1:
						// The timer may run at its new deadline before
						// Reset returns: lower due first.
						at := shardwheel.ClockReading(s)
						newDue := int64(at + 3*time.Millisecond)
						old := h.due.Load()
						h.due.Store(min(old, newDue))
						if h.tm.Reset(3 * time.Millisecond) {
							h.due.Store(newDue)
						} else {
							h.due.Store(old)
						}
					}
				}
			})
		}
		for p := range producers {
			out[p] = make([]outcome, rounds)
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(p), 7))
				for i := range rounds {
					o := &out[p][i]
					due := new(atomic.Int64)
					delay := time.Duration(rng.IntN(5)) * time.Millisecond
					due.Store(int64(shardwheel.ClockReading(s) + delay))
					task := func() {
						if now := shardwheel.ClockReading(s); int64(now) < due.Load() {
							early.Add(1)
						}
						o.ran.Add(1)
					}
					var tm shardwheel.Timer
					var err error
					if i%2 == 0 {
						tm, err = s.AfterFunc(delay, task)
					} else {
						tm, err = s.AfterFunc(delay, task, shardwheel.ByKey(uint64(p)<<32|uint64(i)))
					}
					if err != nil {
						t.Error(err)
						return
					}
					ch <- handed{tm, o, due, rng.IntN(3)}
					if i%100 == 0 {
						runtime.Gosched()
					}
				}
			})
		}
		wg.Wait()
		close(ch)
		tw.Wait()
		for _, tm := range s.Stop() {
			_ = tm // counted by Stats below: these are the stopped ones
		}
		var ran, cancelled int64
		for p := range out {
			for i := range out[p] {
				o := &out[p][i]
				require.LessOrEqual(t, o.ends(), int32(1), "producer %d timer %d ended twice", p, i)
				ran += int64(o.ran.Load())
				cancelled += int64(o.cancelled.Load())
			}
		}
		st := s.Stats().Total
		assert.Zero(t, early.Load(), "ran early")
		assert.EqualValues(t, producers*rounds, st.Scheduled)
		assert.EqualValues(t, ran, st.Fired)
		assert.EqualValues(t, cancelled, st.Cancelled)
		assert.Equal(t, st.Scheduled, st.Fired+st.Cancelled+st.Stopped, "every timer ended once")
	})
}

// TestGOMAXPROCSChangesWhileTimersRun raises and lowers GOMAXPROCS while
// goroutines schedule, cancel and reset timers of both kinds: calls from
// Ps the Scheduler was not made for land on a shard (P ids wrap round),
// and every timer ends exactly once.
func TestGOMAXPROCSChangesWhileTimersRun(t *testing.T) {
	prev := runtime.GOMAXPROCS(2)
	defer runtime.GOMAXPROCS(prev)
	rounds := 5000
	if testing.Short() || raceEnabled {
		rounds = 1000
	}
	s := newScheduler(t) // two shards, for two Ps
	require.Equal(t, 2, s.Shards())
	stop := make(chan struct{})
	var flipper sync.WaitGroup
	flipper.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			runtime.GOMAXPROCS([]int{1, 4, 8, 3, 2}[i%5])
			time.Sleep(200 * time.Microsecond)
		}
	})
	const producers = 6
	out := make([][]outcome, producers)
	var wg sync.WaitGroup
	for p := range producers {
		out[p] = make([]outcome, rounds)
		wg.Go(func() {
			var kept []shardwheel.Timer
			for i := range rounds {
				o := &out[p][i]
				var tm shardwheel.Timer
				var err error
				if i%2 == 0 {
					tm, err = s.AfterFunc(time.Duration(i%4)*time.Millisecond, func() { o.ran.Add(1) })
				} else {
					tm, err = s.AfterFunc(time.Duration(i%4)*time.Millisecond, func() { o.ran.Add(1) }, shardwheel.ByKey(uint64(i)))
				}
				if err != nil {
					t.Error(err)
					return
				}
				switch i % 3 {
				case 0:
					if tm.Cancel() {
						o.cancelled.Add(1)
					}
				case 1:
					kept = append(kept, tm)
				}
				if len(kept) == 16 {
					for _, k := range kept {
						k.Reset(time.Millisecond)
					}
					kept = kept[:0]
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	flipper.Wait()
	runtime.GOMAXPROCS(2)
	waitTasksReturned(t, s)
	for p := range out {
		for i := range out[p] {
			require.Equal(t, int32(1), out[p][i].ends(), "producer %d timer %d", p, i)
		}
	}
	st := s.Stats().Total
	assert.Equal(t, st.Scheduled, st.Fired+st.Cancelled, "Stats add up")
}

// TestGOMAXPROCSDownAndUp: GOMAXPROCS goes from 4 to 1, up to 8 and back
// to 2 under a Scheduler made with a shard per P (as the runtime does from
// cgroup limits since Go 1.25). At each step goroutines schedule timers
// without a key and by key on every shard, some due soon, some an hour
// away, and cancel some: every timer due soon runs once and never early,
// every cancel of a pending timer works, and Pending returns to 0. While
// only one P is left, the shards whose Ps went away still sweep the timers
// filed on them before and run the timers whose keys route to them: many
// rounds of those leave the memory flat.
func TestGOMAXPROCSDownAndUp(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	s := newScheduler(t, shardwheel.WithTick(time.Millisecond))
	require.Equal(t, 4, s.Shards())
	keys := make([][]uint64, s.Shards())
	for i := range keys {
		keys[i] = keysFor(s, i, 64)
	}
	type timer struct {
		at    time.Time
		delay time.Duration
		ran   atomic.Int32
		early atomic.Bool
	}
	var all []*timer
	var allMu sync.Mutex
	step := func(procs int) {
		runtime.GOMAXPROCS(procs)
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				var mine []*timer
				for i := range 400 {
					tr := &timer{at: time.Now(), delay: time.Duration(i%20) * time.Millisecond}
					task := func() {
						if time.Since(tr.at) < tr.delay {
							tr.early.Store(true)
						}
						tr.ran.Add(1)
					}
					var err error
					if i%2 == 0 {
						_, err = s.AfterFunc(tr.delay, task)
					} else {
						_, err = s.AfterFunc(tr.delay, task, shardwheel.ByKey(keys[(g+i)%len(keys)][i%64]))
					}
					if !assert.NoError(t, err) {
						return
					}
					mine = append(mine, tr)
					if i%5 == 0 { // an hour away, then cancelled: on every shard
						far, err := s.AfterFunc(time.Hour, func() { t.Error("a cancelled timer ran") }, shardwheel.ByKey(keys[i%len(keys)][g]))
						if !assert.NoError(t, err) {
							return
						}
						assert.True(t, far.Cancel(), "a pending timer's cancel")
					}
				}
				allMu.Lock()
				all = append(all, mine...)
				allMu.Unlock()
			})
		}
		wg.Wait()
	}
	for _, procs := range []int{4, 1, 8, 2} {
		step(procs)
	}
	require.Eventually(t, func() bool {
		for _, tr := range all {
			if tr.ran.Load() == 0 {
				return false
			}
		}
		return true
	}, waitFor, pollEvery, "every timer due soon ran")
	for i, tr := range all {
		require.EqualValues(t, 1, tr.ran.Load(), "timer %d", i)
		require.False(t, tr.early.Load(), "timer %d ran early", i)
	}
	require.Eventually(t, func() bool { return s.Pending() == 0 }, waitFor, pollEvery)

	// One P left: shards 1 to 3 have lost theirs. Timers filed there
	// while they had it stay theirs: their goroutines sweep them once
	// cancelled, and give the memory back. Timers with keys routed there
	// are filed on shard 0 and cross near their deadline: rounds of them,
	// due soon, leave every shard's memory flat.
	var filed [][]shardwheel.Timer
	var filedMu sync.Mutex
	var wg sync.WaitGroup
	for range 8 { // goroutines on every P: their timers land on every shard
		wg.Go(func() {
			mine := make([]shardwheel.Timer, 0, 20000)
			for range cap(mine) {
				tm, err := s.AfterFunc(time.Hour, noop)
				require.NoError(t, err)
				mine = append(mine, tm)
			}
			filedMu.Lock()
			filed = append(filed, mine)
			filedMu.Unlock()
		})
	}
	wg.Wait()
	before := s.Stats()
	runtime.GOMAXPROCS(1)
	for _, mine := range filed {
		for _, tm := range mine {
			require.True(t, tm.Cancel())
		}
	}
	require.Eventually(t, func() bool {
		st := s.Stats()
		for i, sh := range st.Shards {
			if before.Shards[i].Resident > 10000 && (sh.HeldCancelled > 2000 || sh.Sweeps == before.Shards[i].Sweeps) {
				return false
			}
		}
		return true
	}, 30*time.Second, pollEvery, "every shard that held many timers swept them, its P gone or not")

	// The last rounds grow the heap by less than one block of nodes (the
	// arenas of the shards the timers cross to may make one more small
	// block as their stock settles), and may shrink it: blocks given back.
	// The arenas grow, by whole blocks, to what a round takes at once
	// plus the reserve reserve.go keeps; a host that starves the shard
	// goroutines of CPU makes a round take more at once (the last round's
	// nodes not handed back yet), and the arenas may reach that plateau
	// late: two 16k-node blocks in the last 10 of 24 rounds in one full
	// run beside two CPU hogs, and up to 32k nodes on a shard fed 5k
	// timers a round with the test pinned to a CPU shared with two. So
	// the rounds go on, up to maxRounds, until the last flat of them left
	// the heap flat: a leak, which grows it round after round, never does.
	const n, rounds, maxRounds, flat = 5000, 24, 64, 10
	const block = 1 << 14 * pool.NodeBytes
	var heap []uint64
	grew := func() int64 { return int64(heap[len(heap)-1]) - int64(heap[len(heap)-flat]) }
	for len(heap) < rounds || (grew() >= int64(block) && len(heap) < maxRounds) {
		var done sync.WaitGroup
		for shard := 1; shard < s.Shards(); shard++ {
			for i := range n {
				done.Add(1)
				_, err := s.AfterFunc(time.Duration(i%3)*time.Millisecond, done.Done, shardwheel.ByKey(keys[shard][i%64]))
				require.NoError(t, err)
			}
		}
		done.Wait()
		heap = append(heap, heapInUse())
	}
	t.Logf("heap after each round: %v", heap)
	assert.Less(t, grew(), int64(block), "the last %d rounds grew the heap: %v", flat, heap)
	st := s.Stats()
	assert.Positive(t, st.Total.Crossed, "the timers crossed to their keys' shards")
	var probes sync.WaitGroup
	for shard := 1; shard < s.Shards(); shard++ {
		probes.Add(1)
		_, err := s.AfterFunc(time.Millisecond, probes.Done, shardwheel.ByKey(keys[shard][0]))
		require.NoError(t, err)
	}
	probes.Wait() // each shard still runs its timers
	assert.Zero(t, s.Pending())
}
