package shardwheel_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
)

// Tests of the producer→shard hand-off: AfterFunc never waits for a shard,
// from any goroutine or task, and nothing is lost.

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
				_, err := s.AfterFunc(0, func() {
					// Wait until every shard is inside its task, so
					// that no shard drains while the others flood it.
					started.Done()
					started.Wait()
					for _, k := range targets[i] {
						if _, err := s.AfterFunc(0, func() { fired.Add(1) }, shardwheel.ByKey(k)); err != nil {
							errs.Add(1)
						}
					}
				}, shardwheel.ByKey(keysFor(s, i, 1)[0]))
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
		_, err := s.AfterFunc(0, func() {
			fired.Add(1)
			for j := range followUps {
				if _, err := s.AfterFunc(time.Millisecond, func() { fired.Add(1) }, shardwheel.ByKey(uint64(j))); err != nil {
					t.Error(err)
				}
			}
		}, shardwheel.ByKey(uint64(i)))
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
// timers, all due at once, into a one-shard scheduler whose runner is
// blocked in a task (WithBlockedAfter(0)): every AfterFunc must return
// without the runner's help, and once the task returns every timer fires,
// none lost.
func TestBurstIntoBlockedShardNeverWaits(t *testing.T) {
	total := 5_000_000
	if testing.Short() || raceEnabled {
		total = 500_000 // the race detector makes 5M take minutes
	}
	const producers = 8
	s := newUnstopped(t, shardwheel.WithShards(1), shardwheel.WithTick(time.Millisecond), stall)
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
					if _, err := s.AfterFunc(0, task, shardwheel.ByKey(uint64(i))); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	})
	close(release)
	within(t, "firing the burst", func() {
		for fired.Load() < int64(total) {
			time.Sleep(pollEvery)
		}
	})
	assert.EqualValues(t, total, fired.Load())
	st := s.Stats().Total
	assert.EqualValues(t, total+1, st.Scheduled)
	assert.LessOrEqual(t, st.TransferPeak, shardwheel.DefaultTransferCap, "the transfer cap spread the burst over ticks")
	assert.Empty(t, s.Stop())
}

// TestTaskSchedulingIntoItsOwnShard has a task, running inline on its
// shard, schedule many timers into that same shard, which cannot drain them
// until the task returns.
func TestTaskSchedulingIntoItsOwnShard(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(1), shardwheel.WithInitialCapacity(1), shardwheel.WithTick(time.Millisecond))
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
