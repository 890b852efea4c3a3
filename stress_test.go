package shardwheel_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
	"github.com/shardwheel/shardwheel/stats"
)

// fate records how one timer ended. Exactly one of ran, cancelled and
// stopped must be set, once.
type fate struct {
	handle    shardwheel.Timer
	due       atomic.Int64 // earliest allowed run, ns since the test's epoch
	ran       atomic.Int32
	early     atomic.Int64 // how early it ran, if it did
	cancelled atomic.Int32
	stopped   atomic.Int32
}

// TestStressExactlyOnce hammers one scheduler from many goroutines with
// random AfterFunc, Cancel, Reset and stale-handle calls, then stops it
// mid-flight, and checks that every accepted timer ended exactly one way,
// none ran early, and Pending agrees. It runs at several GOMAXPROCS values,
// with fewer and more shards than Ps.
func TestStressExactlyOnce(t *testing.T) {
	ops := 20_000
	if testing.Short() {
		ops = 3_000
	}
	forEachProcs(t, func(t *testing.T, _ int) {
		for _, shards := range []int{1, 3} {
			t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
				stress(t, shards, 8, ops)
			})
		}
	})
}

// counters returns the fields of st that stats.Shard documents as counters,
// which never decrease.
func counters(st stats.Shard) map[string]uint64 {
	return map[string]uint64{
		"Scheduled": st.Scheduled, "Fired": st.Fired, "Cancelled": st.Cancelled,
		"TakenBack": st.TakenBack, "Reset": st.Reset, "Stopped": st.Stopped,
		"CapHits": st.CapHits, "Ticks": st.Ticks, "TicksSkipped": st.TicksSkipped,
		"Refiled": st.Refiled, "Sweeps": st.Sweeps, "Swept": st.Swept,
		"Panics": st.Panics, "PeriodicRuns": st.PeriodicRuns, "PeriodicMissed": st.PeriodicMissed,
	}
}

func stress(t *testing.T, shards, workers, opsPerWorker int) {
	s, err := shardwheel.New(shardwheel.WithShards(shards), shardwheel.WithTick(time.Millisecond),
		shardwheel.WithInitialCapacity(64), shardwheel.WithTransferCap(50))
	require.NoError(t, err)
	epoch := time.Now()
	since := func() int64 { return int64(time.Since(epoch)) }

	var mu sync.Mutex // guards all; the scheduler itself is never called under it
	var all []*fate
	var stopped []shardwheel.Timer
	var done atomic.Int64 // operations so far; Stop comes half way through
	half := int64(workers * opsPerWorker / 2)
	var wg sync.WaitGroup
	readerDone := make(chan struct{})
	go func() { // a monitoring loop reading Stats while the shards work
		defer close(readerDone)
		var last map[string]uint64
		for done.Load() < int64(workers*opsPerWorker) {
			now := counters(s.Stats().Total)
			for name, v := range now {
				if !assert.GreaterOrEqual(t, v, last[name], "%s went backwards", name) {
					return
				}
			}
			last = now
			runtime.Gosched()
		}
	}()
	for w := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 99))
			var mine []*fate
			for range opsPerWorker {
				if done.Add(1) == half {
					stopped = s.Stop() // concurrent with the other workers
				}
				switch op := r.IntN(10); {
				case op < 5 || len(mine) == 0:
					f := &fate{}
					delay := time.Duration(r.IntN(20_000)) * time.Microsecond
					f.due.Store(since() + int64(delay))
					tm, err := s.AfterFunc(delay, func() {
						if late := since() - f.due.Load(); late < 0 {
							f.early.Store(-late)
						}
						f.ran.Add(1)
					}, shardwheel.ByKey(r.Uint64()%1000))
					if err != nil {
						assert.ErrorIs(t, err, shardwheel.ErrStopped)
						continue // rejected: never accepted, nothing to account
					}
					f.handle = tm
					mine = append(mine, f)
				case op < 8:
					f := mine[r.IntN(len(mine))]
					if f.handle.Cancel() {
						f.cancelled.Add(1)
					}
				default:
					f := mine[r.IntN(len(mine))]
					delay := time.Duration(r.IntN(20_000)) * time.Microsecond
					due := since() + int64(delay)
					prev := f.due.Load()
					// Publish the later of the two dues first: whichever
					// deadline the timer keeps, it may not run before
					// the earlier one, and the check stays conservative.
					f.due.Store(min(prev, due))
					if f.handle.Reset(delay) {
						f.due.Store(due)
					}
				}
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	<-readerDone
	byHandle := make(map[shardwheel.Timer]*fate, len(all))
	for _, f := range all {
		byHandle[f.handle] = f
	}
	for _, tm := range stopped {
		f, ok := byHandle[tm]
		require.True(t, ok, "Stop returned a timer nobody scheduled")
		f.stopped.Add(1)
	}
	require.NotEmpty(t, stopped, "Stop should have caught some timers in flight")
	for i, f := range all {
		ends := f.ran.Load() + f.cancelled.Load() + f.stopped.Load()
		require.EqualValues(t, 1, ends, "timer %d: ran %d, cancelled %d, stopped %d",
			i, f.ran.Load(), f.cancelled.Load(), f.stopped.Load())
		require.Zero(t, f.early.Load(), "timer %d ran early", i)
		require.False(t, f.handle.Pending())
	}
	require.Zero(t, s.Pending())
}
