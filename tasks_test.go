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

func TestPanickingTasksAreCountedAndHandled(t *testing.T) {
	var handled atomic.Int64
	s := newScheduler(t, shardwheel.WithShards(2), shardwheel.WithTick(time.Millisecond),
		shardwheel.WithPanicHandler(func(v any) {
			assert.Equal(t, "task failed", v)
			handled.Add(1)
		}))
	var ran atomic.Int64
	for i := range uint64(200) {
		task := func() { ran.Add(1) }
		if i%2 == 0 {
			task = func() { panic("task failed") }
		}
		_, err := s.Schedule(i, time.Millisecond, task)
		require.NoError(t, err)
	}
	// Counters are published at the end of a pass, after the handler ran:
	// wait for them too, then check that nothing was counted twice.
	require.Eventually(t, func() bool {
		st := s.Stats().Total
		return ran.Load() >= 100 && handled.Load() >= 100 && st.Fired >= 200 && st.Panics >= 100
	}, waitFor, pollEvery)
	assert.Empty(t, s.Stop())
	st := s.Stats()
	assert.EqualValues(t, 100, ran.Load())
	assert.EqualValues(t, 100, handled.Load())
	assert.Equal(t, uint64(100), st.Total.Panics)
	assert.Equal(t, uint64(200), st.Total.Fired)
	assert.Zero(t, s.Pending())
}

func TestExecutorRunsTasks(t *testing.T) {
	var submitted atomic.Int64
	s := newScheduler(t, shardwheel.WithTick(time.Millisecond), shardwheel.WithExecutor(func(task func()) {
		submitted.Add(1)
		go task()
	}))
	ran := make(chan struct{})
	_, err := s.Schedule(1, time.Millisecond, func() { close(ran) })
	require.NoError(t, err)
	select {
	case <-ran:
	case <-time.After(waitFor):
		t.Fatal("task never ran")
	}
	assert.EqualValues(t, 1, submitted.Load())
}

// TestBlockingTaskDelaysButNeverReorders blocks a shard for many ticks: the
// timers that came due meanwhile all run afterwards, none lost, in deadline
// order, and the shard's tick lag shows the stall.
func TestBlockingTaskDelaysButNeverReorders(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(1), shardwheel.WithTick(time.Millisecond))
	const block = 50 * time.Millisecond
	var mu sync.Mutex
	var order []int
	release := blockShard(t, s)
	for i := 1; i <= 40; i++ {
		_, err := s.Schedule(uint64(i), time.Duration(2+i)*time.Millisecond, func() {
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
		})
		require.NoError(t, err)
	}
	time.Sleep(block) // the shard stays blocked past every deadline, and longer
	release()
	// Not Pending() == 0: a timer stops counting as pending when its task
	// starts, before the task has appended.
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order) >= 40
	}, waitFor, pollEvery)
	assert.Empty(t, s.Stop())
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, order, 40)
	for i := 1; i < len(order); i++ {
		assert.Less(t, order[i-1], order[i], "timers ran out of deadline order: %v", order)
	}
	st := s.Stats()
	assert.GreaterOrEqual(t, time.Duration(st.Total.TickLag.Max()), block/2, "the stall shows as tick lag")
	assert.GreaterOrEqual(t, time.Duration(st.Total.Lateness.Max()), block/2, "and as lateness")
}
