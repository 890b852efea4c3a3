package shard

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A spike's blocks are given back while other spikes grow the arena again,
// from the shard's own P (holders, whose free nodes run out: they raise the
// limit block by block and make released blocks again) and from other Ps
// (producers that push on the queue and grow the arena themselves): no
// node is ever handed out twice, so every timer is cancelled exactly once.
func TestGiveBackRacesGrowth(t *testing.T) {
	_, shards := newGroup(t, 2)
	sh := shards[0]
	rounds := 8
	if testing.Short() || raceEnabled {
		rounds = 4
	}
	for round := range rounds {
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				n := 15_000 + 5_000*w
				refs := make([]Ref, 0, n)
				for i := range n {
					r, rej := sched(sh, uint64(i), time.Hour, func() { t.Error("a spike's timer ran") })
					if !assert.Equal(t, Accepted, rej) {
						return
					}
					refs = append(refs, r)
				}
				for i, r := range refs {
					if !assert.True(t, sh.Cancel(r), "round %d: timer %d of worker %d could not be cancelled", round, i, w) {
						return
					}
				}
			})
		}
		wg.Wait()
		require.Zero(t, sh.Live(), "round %d", round)
		// Two reviews, a second of ticks apart, lower the limit: the
		// first sees the spike, the second the surplus it left.
		time.Sleep(2500 * time.Millisecond)
	}
	st := sh.Stats()
	t.Logf("blocks released %d, remade %d", st.BlocksReleased, st.BlocksRemade)
}

// growthRaceRounds is how many times TestRaiseLimitRacesAGrowingBlock
// races the two: each round grows the arena by a big block.
var growthRaceRounds = 200

// The holder raising its limit into the block a producer's Grow is making
// (its index counted in HighWater, the block not made yet) must not make
// that block itself, every node parked, or the producer's fresh index, and
// the block's next ones, would be handed out twice: once by Grow, once
// from the holder's free list. Each round lowers the limit to the arena's
// top and races raiseLimit against a Grow from another goroutine; the
// stress tag widens the race (a point sits between Grow's two halves).
func TestRaiseLimitRacesAGrowingBlock(t *testing.T) {
	h := newHarness(t)
	sh := h.sh
	block := uint32(1) << sh.arena.BigBits()
	for sh.arena.HighWater() < block { // past the small blocks
		_, _, ok := sh.arena.Get(0)
		require.True(t, ok)
	}
	for round := range growthRaceRounds {
		top := sh.arena.HighWater()
		for top%block != 0 { // to the next block boundary
			_, _, ok := sh.arena.Get(0)
			require.True(t, ok)
			top = sh.arena.HighWater()
		}
		unhold := holdWheel(t, sh)
		sh.h.limit = top // the holder has shed everything above
		grown := make(chan uint32)
		go func() {
			idx, ok := sh.arena.Grow() // the first index of a new block
			assert.True(t, ok)
			grown <- idx
		}()
		sh.raiseLimit()
		idx := <-grown
		for f := sh.h.free; f != 0; f = sh.arena.Node(f).Next {
			require.NotEqual(t, idx, f, "round %d: index %d was handed out by Grow and listed free", round, idx)
		}
		// What the holder listed is free: park it all again, as the
		// round's Grow left the rest of the block to later Gets.
		sh.h.free, sh.h.nfree, sh.h.limit = 0, 0, noLimit
		unhold()
	}
}
