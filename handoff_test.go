package shardwheel_test

import (
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
)

// Tests of the producer→shard hand-off: Schedule never waits for a shard,
// from any goroutine or task, and nothing is lost.

// hangLimit bounds a scenario that would deadlock with a blocking
// hand-off: past it the test reports the hang, with the goroutines' stacks,
// instead of hanging CI.
const hangLimit = 60 * time.Second

// within runs f and fails the test if it has not returned within hangLimit.
// On a hang it does not wait for f (nor Stop the scheduler, which would
// hang too): the test binary reports and moves on.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(hangLimit):
		buf := make([]byte, 1<<20)
		t.Fatalf("%s hung for %v; goroutines:\n%s", what, hangLimit, buf[:runtime.Stack(buf, true)])
	}
}

// keysFor returns n keys that route to shard i of s.
func keysFor(s *shardwheel.Scheduler, i, n int) []uint64 {
	keys := make([]uint64, 0, n)
	for k := uint64(0); len(keys) < n; k++ {
		if s.ShardOf(k) == i {
			keys = append(keys, k)
		}
	}
	return keys
}

// newUnstopped returns a scheduler that the test must Stop itself: a test
// that detects a hang must not have a cleanup that hangs on it.
func newUnstopped(t *testing.T, opts ...shardwheel.Option) *shardwheel.Scheduler {
	t.Helper()
	s, err := shardwheel.New(opts...)
	require.NoError(t, err)
	return s
}

// TestShardsFloodingEachOtherFromTasks is the cross-shard deadlock of a
// bounded hand-off: tasks on each shard schedule many timers into the next
// shard (two shards, then a cycle of three) while that shard is itself busy
// in such a task. Every timer must fire.
func TestShardsFloodingEachOtherFromTasks(t *testing.T) {
	for _, shards := range []int{2, 3} {
		t.Run(map[int]string{2: "pair", 3: "cycle of three"}[shards], func(t *testing.T) {
			s := newUnstopped(t, shardwheel.WithShards(shards))
			perTask := 70000
			if testing.Short() {
				perTask = 10000
			}
			targets := make([][]uint64, shards)
			for i := range targets {
				targets[i] = keysFor(s, (i+1)%shards, perTask)
			}
			var fired, errs atomic.Int64
			var started sync.WaitGroup
			started.Add(shards)
			for i := range shards {
				_, err := s.Schedule(keysFor(s, i, 1)[0], 0, func() {
					// Wait until every shard is inside its task, so
					// that no shard drains while the others flood it.
					started.Done()
					started.Wait()
					for _, k := range targets[i] {
						if _, err := s.Schedule(k, 0, func() { fired.Add(1) }); err != nil {
							errs.Add(1)
						}
					}
				})
				require.NoError(t, err)
			}
			want := int64(shards * perTask)
			within(t, "flooding tasks", func() {
				for fired.Load() < want && errs.Load() == 0 {
					time.Sleep(pollEvery)
				}
			})
			require.Zero(t, errs.Load())
			assert.Equal(t, want, fired.Load())
			assert.Empty(t, s.Stop())
		})
	}
}

// TestBlockingExecutorDoesNotWedgeTheShard runs tasks on an ordinary
// bounded pool (a channel of 8, two workers) whose tasks schedule follow-up
// timers into the same shard: the shard blocks on submit while the pool
// schedules, and neither may wait for the other.
func TestBlockingExecutorDoesNotWedgeTheShard(t *testing.T) {
	work := make(chan func(), 8)
	var workers sync.WaitGroup
	for range 2 {
		workers.Go(func() {
			for f := range work {
				f()
			}
		})
	}
	s := newUnstopped(t, shardwheel.WithShards(1), shardwheel.WithTick(time.Millisecond),
		shardwheel.WithExecutor(func(task func()) { work <- task }))
	const roots, followUps = 30, 9 // 300 timers in all
	var fired atomic.Int64
	for i := range roots {
		_, err := s.Schedule(uint64(i), 0, func() {
			fired.Add(1)
			for j := range followUps {
				if _, err := s.Schedule(uint64(j), time.Millisecond, func() { fired.Add(1) }); err != nil {
					t.Error(err)
				}
			}
		})
		require.NoError(t, err)
	}
	within(t, "blocking executor", func() {
		for fired.Load() < roots*(1+followUps) {
			time.Sleep(pollEvery)
		}
	})
	assert.EqualValues(t, roots*(1+followUps), fired.Load())
	assert.Empty(t, s.Stop())
	close(work)
	workers.Wait()
}

// TestBurstIntoBlockedShardNeverWaits has 8 goroutines schedule a burst of
// timers into a one-shard scheduler whose goroutine is blocked in a task:
// every Schedule must return without the shard's help, and once the shard
// is released every timer fires, none lost.
func TestBurstIntoBlockedShardNeverWaits(t *testing.T) {
	total := 5_000_000
	if testing.Short() || raceEnabled {
		total = 500_000 // the race detector makes 5M take minutes
	}
	const producers = 8
	s := newUnstopped(t, shardwheel.WithShards(1), shardwheel.WithTick(time.Millisecond))
	release := make(chan struct{})
	blocked := make(chan struct{})
	_, err := s.AfterFunc(0, func() { close(blocked); <-release })
	require.NoError(t, err)
	<-blocked

	var fired atomic.Int64
	task := func() { fired.Add(1) }
	within(t, "a burst into a blocked shard", func() {
		var wg sync.WaitGroup
		for p := range producers {
			wg.Go(func() {
				for i := p; i < total; i += producers {
					if _, err := s.Schedule(uint64(i), 0, task); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	})
	require.Equal(t, total, s.Pending(), "every timer accepted while the shard was blocked")
	close(release)
	within(t, "firing the burst", func() {
		for fired.Load() < int64(total) {
			time.Sleep(pollEvery)
		}
	})
	assert.EqualValues(t, total, fired.Load())
	st := s.Stats().Total
	assert.EqualValues(t, total+1, st.Scheduled)
	assert.Positive(t, st.CapHits, "the transfer cap spread the burst over ticks")
	assert.Empty(t, s.Stop())
}

// TestTaskSchedulingIntoItsOwnShard has a task, running inline on its
// shard, schedule many timers into that same shard, which cannot drain them
// until the task returns.
func TestTaskSchedulingIntoItsOwnShard(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(1), shardwheel.WithRingSize(1), shardwheel.WithTick(time.Millisecond))
	const n = 50000
	var ran atomic.Int64
	_, err := s.AfterFunc(0, func() {
		for range n {
			if _, err := s.AfterFunc(time.Millisecond, func() { ran.Add(1) }); err != nil {
				t.Error(err)
				return
			}
		}
	})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return ran.Load() == n }, waitFor, pollEvery)
	assert.Zero(t, s.Pending())
}

// TestSecondStopWaitsForTheFirst: a task calls Stop and then cleans up; an
// outside Stop must not return before that task and its shard are done.
func TestSecondStopWaitsForTheFirst(t *testing.T) {
	s := newUnstopped(t, shardwheel.WithShards(2))
	var cleanedUp atomic.Bool
	inStop := make(chan struct{})
	_, err := s.AfterFunc(0, func() {
		s.Stop()
		close(inStop)
		// Clean-up work after Stop, long enough that a Stop that does
		// not wait for it would be caught.
		time.Sleep(200 * time.Millisecond)
		cleanedUp.Store(true)
	})
	require.NoError(t, err)
	<-inStop
	within(t, "the second Stop", func() {
		assert.Nil(t, s.Stop())
	})
	assert.True(t, cleanedUp.Load(), "Stop returned while a task that called Stop still ran")
}

// TestStopFromTwoTasksDoesNotDeadlock: tasks on two shards call Stop at the
// same time; each waits for the other shard, so the later one must not
// wait for the first.
func TestStopFromTwoTasksDoesNotDeadlock(t *testing.T) {
	s := newUnstopped(t, shardwheel.WithShards(2))
	var both sync.WaitGroup
	both.Add(2)
	var returned atomic.Int64
	for i := range 2 {
		_, err := s.Schedule(keysFor(s, i, 1)[0], 0, func() {
			both.Done()
			both.Wait()
			s.Stop()
			returned.Add(1)
		})
		require.NoError(t, err)
	}
	within(t, "Stop from two tasks", func() {
		for returned.Load() < 2 {
			time.Sleep(pollEvery)
		}
		s.Stop()
	})
}

// TestStatsAddUp checks Scheduled = Fired + Cancelled + Stopped + pending
// at quiescence and after Stop, with timers filed by tasks, cancels just
// before Stop, and Schedules that lose the race with Stop.
func TestStatsAddUp(t *testing.T) {
	s := newUnstopped(t, shardwheel.WithShards(2), shardwheel.WithTick(time.Millisecond))
	addsUp := func(what string) {
		t.Helper()
		st := s.Stats()
		tot := st.Total
		assert.Equal(t, tot.Scheduled, tot.Fired+tot.Cancelled+tot.Stopped+uint64(st.Pending), "%s: %+v", what, tot)
	}
	var fired atomic.Int64
	for i := range 100 {
		_, err := s.Schedule(uint64(i), 0, func() {
			fired.Add(1)
			_, _ = s.Schedule(uint64(i), time.Millisecond, func() { fired.Add(1) })
		})
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return fired.Load() == 200 }, waitFor, pollEvery)
	require.Eventually(t, func() bool { return s.Stats().Total.Fired == 200 }, waitFor, pollEvery)
	addsUp("quiescent")

	var later []shardwheel.Timeout
	for i := range 50 {
		tm, err := s.Schedule(uint64(i), time.Hour, noop)
		require.NoError(t, err)
		later = append(later, tm)
	}
	for _, tm := range later[:20] {
		require.True(t, tm.Cancel())
	}
	// Producers race Stop; every call they make either succeeds or leaves
	// no trace.
	var wg sync.WaitGroup
	var accepted atomic.Int64
	for p := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				if _, err := s.Schedule(uint64(p)<<32|uint64(i), time.Hour, noop); err != nil {
					assert.ErrorIs(t, err, shardwheel.ErrStopped)
					return
				}
				accepted.Add(1)
			}
		})
	}
	require.Eventually(t, func() bool { return accepted.Load() > 1000 }, waitFor, pollEvery)
	stopped := s.Stop()
	wg.Wait()
	assert.Len(t, stopped, 30+int(accepted.Load()))
	addsUp("after Stop")
	st := s.Stats().Total
	assert.EqualValues(t, 200+50+accepted.Load(), st.Scheduled)
	assert.EqualValues(t, len(stopped), st.Stopped)
}

// TestFootprintBeforeAnyTimer measures the heap a Scheduler holds before it
// has any timer, per shard, at several GOMAXPROCS (which sets the lanes per
// shard). The limit, 128 KiB per shard, is the issue's; the measured
// figures are in BenchmarkNewFootprint.
func TestFootprintBeforeAnyTimer(t *testing.T) {
	for _, procs := range []int{2, 16, 64, 128} {
		perShard := newFootprint(t, procs, 8)
		assert.LessOrEqual(t, perShard, 128<<10, "GOMAXPROCS %d: %d bytes per shard", procs, perShard)
	}
}

// newFootprint returns the heap bytes per shard that New holds with the
// given GOMAXPROCS and shard count.
func newFootprint(tb testing.TB, procs, shards int) int {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
	before := heapInUse()
	s, err := shardwheel.New(shardwheel.WithShards(shards))
	require.NoError(tb, err)
	after := heapInUse()
	runtime.KeepAlive(s)
	s.Stop()
	return int(after-before) / shards
}

// BenchmarkNewFootprint reports the heap New holds per shard before any
// timer, at several GOMAXPROCS.
func BenchmarkNewFootprint(b *testing.B) {
	for _, procs := range []int{2, 16, 64, 128} {
		b.Run("GOMAXPROCS="+strconv.Itoa(procs), func(b *testing.B) {
			var per int
			for range b.N {
				per = newFootprint(b, procs, procs)
			}
			b.ReportMetric(float64(per), "B/shard")
		})
	}
}

// TestOptionsThatCannotFitFailInNew: a combination whose fixed cost
// exceeds the machine fails in New with an error naming the options,
// instead of an out-of-memory crash later.
func TestOptionsThatCannotFitFailInNew(t *testing.T) {
	_, err := shardwheel.New(shardwheel.WithShards(shardwheel.MaxShards), shardwheel.WithRingSize(shardwheel.MaxRingSize))
	require.ErrorIs(t, err, shardwheel.ErrInvalidOption)
	for _, want := range []string{"WithShards(4096)", "WithRingSize(4194304)", "MiB"} {
		assert.Contains(t, err.Error(), want)
	}
	// The largest shard count alone fits: nothing is preallocated.
	s, err := shardwheel.New(shardwheel.WithShards(shardwheel.MaxShards))
	require.NoError(t, err)
	s.Stop()
}

// TestShardCapacityIsExact fills one shard to ShardCapacity: the last timer
// fits and the next is refused with the error that names the capacity. It
// needs about 3 GB and a minute, so CI runs it on its own, without -race.
func TestShardCapacityIsExact(t *testing.T) {
	if os.Getenv("SHARDWHEEL_CAPACITY") == "" {
		t.Skip("set SHARDWHEEL_CAPACITY=1 to fill a shard (3 GB)")
	}
	s := newScheduler(t, shardwheel.WithShards(1), shardwheel.WithRingSize(shardwheel.MaxRingSize))
	for i := range shardwheel.ShardCapacity {
		if _, err := s.Schedule(0, time.Hour, noop); err != nil {
			t.Fatalf("timer %d of %d refused: %v", i+1, shardwheel.ShardCapacity, err)
		}
	}
	_, err := s.Schedule(0, time.Hour, noop)
	require.ErrorIs(t, err, shardwheel.ErrTooManyPending)
	assert.Contains(t, err.Error(), "67108863")
	assert.Equal(t, shardwheel.ShardCapacity, s.Pending())
}
