package shardwheel

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/shardwheel/shardwheel/pool"
	"github.com/shardwheel/shardwheel/shard"
)

// TestLimitsMatchTheEngine checks that the limits the API spells out as
// literals are the engine's.
func TestLimitsMatchTheEngine(t *testing.T) {
	assert.Equal(t, pool.Capacity, ShardCapacity)
	assert.Equal(t, shard.MaxHandlers, MaxHandlers)
	assert.Equal(t, pool.MaxFirst, MaxFirstBlock)
}
