package shardwheel_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
)

func TestSequentialKeysSpreadEvenly(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(8))
	const n = 800_000
	counts := make([]int, s.Shards())
	for k := range uint64(n) {
		counts[s.ShardOf(k)]++
	}
	for i, c := range counts {
		assert.InEpsilon(t, n/len(counts), c, 0.01, "shard %d has %d of %d keys", i, c, n)
	}
}

// TestShardOfIsAFunctionOfKeyAndShardCount: two schedulers with the same
// shard count route every key alike, and into range.
func TestShardOfIsAFunctionOfKeyAndShardCount(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	keys := []uint64{0, 1, 2, math.MaxUint64, math.MaxUint64 - 1, 1 << 63}
	for range 5_000 {
		keys = append(keys, r.Uint64())
	}
	for _, shards := range []int{1, 2, 3, 7, 64} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
			a := newScheduler(t, shardwheel.WithShards(shards))
			b := newScheduler(t, shardwheel.WithShards(shards))
			used := map[int]bool{}
			for _, k := range keys {
				i := a.ShardOf(k)
				if i < 0 || i >= shards {
					t.Fatalf("ShardOf(%d) = %d, out of [0, %d)", k, i, shards)
				}
				if j := b.ShardOf(k); j != i {
					t.Fatalf("key %d routes to shard %d in one scheduler and %d in another", k, i, j)
				}
				used[i] = true
			}
			assert.Len(t, used, shards, "%d random keys reach every shard", len(keys))
		})
	}
}

// TestKeyedTasksRunOnTheKeysShard: the task of a timer with a key runs
// on the goroutine of the shard ShardOf names, whichever P scheduled it:
// one due soon crosses at once, one due later when the wheel that filed
// it brings it near. Each shard counts the timers it filed (the caller's
// P's); AfterFunc files on the caller's P's shard and runs there.
func TestKeyedTasksRunOnTheKeysShard(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(5))
	const keys = 60
	type run struct {
		key uint64
		on  int
	}
	ran := make(chan run, 4*keys)
	var wg sync.WaitGroup
	for g := range 4 { // goroutines on every P, so timers are filed on several shards
		wg.Go(func() {
			for k := range uint64(keys) {
				delay := time.Millisecond
				if (k+uint64(g))%3 == 0 {
					delay = 700 * time.Millisecond // beyond level 0 of the default wheel
				}
				tm, err := s.AfterFunc(delay, func() { ran <- run{k, shardwheel.RunningShard(s)} }, shardwheel.ByKey(k))
				require.NoError(t, err)
				assert.Equal(t, k, tm.Key())
				runtime.Gosched()
			}
		})
	}
	wg.Wait()
	for range 4 * keys {
		select {
		case r := <-ran:
			assert.Equal(t, s.ShardOf(r.key), r.on, "key %d ran on shard %d", r.key, r.on)
		case <-time.After(waitFor):
			t.Fatal("timers did not run")
		}
	}
	st := s.Stats()
	var crossed uint64
	for _, sh := range st.Shards {
		crossed += sh.Crossed
		assert.Equal(t, sh.Scheduled, sh.Fired, "each shard's own timers all ran")
	}
	assert.Positive(t, crossed, "timers filed on one shard ran on another")
	assert.EqualValues(t, 4*keys, st.Total.Scheduled)

	// AfterFunc files on the shard of the caller's P, and runs there: with
	// one P, P 0's.
	withGOMAXPROCS(1, func() {
		done := make(chan int, 1)
		tm, err := s.AfterFunc(0, func() { done <- shardwheel.RunningShard(s) })
		require.NoError(t, err)
		assert.Zero(t, tm.Key(), "AfterFunc's timers have key 0")
		assert.Equal(t, 0, shardwheel.FiledOn(tm))
		assert.Equal(t, 0, <-done)
	})
}
