package shardwheel_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

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
