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
			tm     shardwheel.Timeout
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
					var tm shardwheel.Timeout
					var err error
					if i%2 == 0 {
						tm, err = s.AfterFunc(delay, task)
					} else {
						tm, err = s.Schedule(uint64(p)<<32|uint64(i), delay, task)
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
			var kept []shardwheel.Timeout
			for i := range rounds {
				o := &out[p][i]
				var tm shardwheel.Timeout
				var err error
				if i%2 == 0 {
					tm, err = s.AfterFunc(time.Duration(i%4)*time.Millisecond, func() { o.ran.Add(1) })
				} else {
					tm, err = s.Schedule(uint64(i), time.Duration(i%4)*time.Millisecond, func() { o.ran.Add(1) })
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
