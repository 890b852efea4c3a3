package shardwheel_test

import (
	"fmt"
	"math"
	"math/rand/v2"
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

// TestScheduleGoesToShardOf: Schedule files a timer on the shard ShardOf
// names, as each shard's Scheduled count shows; equal keys share a shard,
// and AfterFunc's timer sits on the shard of the key it reports.
func TestScheduleGoesToShardOf(t *testing.T) {
	s := newScheduler(t, shardwheel.WithShards(5))
	scheduled := func() []uint64 {
		st := s.Stats()
		out := make([]uint64, len(st.Shards))
		for i, sh := range st.Shards {
			out[i] = sh.Scheduled
		}
		return out
	}
	// expectOn checks that exactly n timers were added to shard i.
	expectOn := func(before []uint64, i int, n uint64, what string) {
		t.Helper()
		after := scheduled()
		for j := range after {
			want := before[j]
			if j == i {
				want += n
			}
			require.Equal(t, want, after[j], "%s: shard %d (ShardOf says %d)", what, j, i)
		}
	}
	for k := range uint64(50) {
		before := scheduled()
		for range 2 {
			_, err := s.Schedule(k, time.Hour, noop)
			require.NoError(t, err)
		}
		expectOn(before, s.ShardOf(k), 2, fmt.Sprintf("two timers with key %d", k))
	}
	// AfterFunc files on the shard of the caller's P: with one P, P 0's.
	withGOMAXPROCS(1, func() {
		for range 20 {
			before := scheduled()
			tm, err := s.AfterFunc(time.Hour, noop)
			require.NoError(t, err)
			assert.Zero(t, tm.Key(), "AfterFunc's timers have key 0")
			expectOn(before, 0, 1, "AfterFunc on P 0")
		}
	})
}
