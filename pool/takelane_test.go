package pool_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel/pool"
)

// TestTakeLane: TakeLane empties a lane and hands its chain to the caller,
// beside Gets that pop and steal from it at the same time: every node put
// on the lane ends up with exactly one of them.
func TestTakeLane(t *testing.T) {
	const nodes = 1 << 14
	for round := range 20 {
		a := pool.New(64, 2)
		var c pool.Chain
		for range nodes {
			idx, _, ok := a.Get(0)
			require.True(t, ok)
			a.Add(&c, idx)
		}
		a.PutChain(0, &c)

		got := make([][]uint32, 3)
		var wg sync.WaitGroup
		for g := range 2 {
			wg.Go(func() {
				for range nodes / 4 {
					idx, _, ok := a.Get(g) // lane 1 steals from lane 0
					if !assert.True(t, ok) {
						return
					}
					got[g] = append(got[g], idx)
				}
			})
		}
		wg.Go(func() {
			for idx := a.TakeLane(0); idx != 0; idx = a.Link(idx).Load() {
				got[2] = append(got[2], idx)
			}
		})
		wg.Wait()
		assert.Zero(t, a.TakeLane(0), "round %d: the lane is empty once taken", round)

		seen := map[uint32]int{}
		for _, list := range got {
			for _, idx := range list {
				seen[idx]++
			}
		}
		fromLane := 0
		for idx, n := range seen {
			require.Equal(t, 1, n, "round %d: node %d handed out %d times", round, idx, n)
			if idx <= nodes {
				fromLane++
			}
		}
		assert.Equal(t, nodes, fromLane, "round %d: every node of the lane went somewhere", round)
	}
}
