package shardwheel

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/shardwheel/shardwheel/pool"
	"github.com/shardwheel/shardwheel/shard"
)

// TestLimitsMatchTheEngine checks that the limits the API spells out as
// literals are the engine's. (MaxHandlers is the engine's table's, which
// TestHandlerErrors fills: the engine keeps its limit to itself.)
func TestLimitsMatchTheEngine(t *testing.T) {
	assert.Equal(t, pool.Capacity, ShardCapacity)
	assert.Equal(t, pool.MaxFirst, maxInitialCapacity)
}

// TestMissedMatchesTheEngine checks the join of the API's MissedPolicy policies
// to the engine's: each maps to the engine's constant of the same name,
// and has its value, so that a number read in one layer means the same
// policy in the other; the engine's three are distinct, and no other
// value is a policy.
func TestMissedMatchesTheEngine(t *testing.T) {
	want := map[MissedPolicy]uint8{SkipMissed: shard.SkipMissed, BurstMissed: shard.BurstMissed, DelayMissed: shard.DelayMissed}
	seen := map[uint8]bool{}
	for m, e := range want {
		got, ok := m.engine()
		assert.True(t, ok, "%v is a policy", m)
		assert.Equal(t, e, got, "%v maps to the engine's constant of its name", m)
		assert.Equal(t, e, uint8(m), "%v has the engine's value", m)
		assert.False(t, seen[got], "%v: two policies map to engine value %d", m, got)
		seen[got] = true
	}
	for m := range 256 {
		if _, ok := want[MissedPolicy(m)]; !ok {
			_, ok := MissedPolicy(m).engine()
			assert.False(t, ok, "MissedPolicy(%d) is no policy", m)
		}
	}
}

// TestTraceRegionIsTheEngines: the region type the API names is the one
// the shard goroutines open.
func TestTraceRegionIsTheEngines(t *testing.T) {
	assert.Equal(t, shard.RegionPass, TraceRegionPass)
}
