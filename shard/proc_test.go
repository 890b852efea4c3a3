package shard

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestLocalShardIsPModuloShards: P p's own shard is p modulo the shards,
// below their number and beyond it, and isLocal agrees with it for every
// shard.
func TestLocalShardIsPModuloShards(t *testing.T) {
	for _, n := range []int{1, 2, 3, 8} {
		for p := range 3 * n {
			assert.Equal(t, p%n, LocalShard(p, n), "P %d of %d shards", p, n)
			for id := range n {
				sh := &Shard{id: id, of: n}
				assert.Equal(t, p%n == id, sh.isLocal(p), "P %d, shard %d of %d", p, id, n)
			}
		}
	}
}
