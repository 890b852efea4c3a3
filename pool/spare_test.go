package pool_test

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel/pool"
)

// TestGetStealsAnotherLanesSpare: a Get whose own lane has nothing steals
// from the other lanes before it grows the arena, their spare slots
// included: a node parked in another lane's spare by Put is taken, and no
// second block is allocated while a free node exists (at Capacity, Get
// would otherwise fail with up to one node per lane free).
func TestGetStealsAnotherLanesSpare(t *testing.T) {
	a := pool.New(64, 2)
	var held []uint32
	for range 63 { // all of block 0 (index 0 is reserved)
		idx, _, _, ok := a.Get(0)
		require.True(t, ok)
		held = append(held, idx)
	}
	require.Equal(t, uint32(64), a.HighWater())
	a.Put(1, held[0]) // into lane 1's spare: lane 1's free list stays empty

	idx, _, _, ok := a.Get(0)
	require.True(t, ok)
	assert.Equal(t, held[0], idx, "Get(0) must take the free node from lane 1 before growing")
	assert.Equal(t, uint32(64), a.HighWater(), "a free node exists: the arena must not grow")
}

// TestConcurrentPutAndGet: Put (spare slot or free list) from many
// goroutines sharing lanes, stealing across lanes, beside an owner that
// returns chains with PutChain. No index is held twice at once, every life
// bumps the generation by exactly one, a node comes back from Put with its
// task and handler cleared, and nodes are reused, not leaked.
func TestConcurrentPutAndGet(t *testing.T) {
	for _, procs := range []int{1, 2, 4} {
		t.Run(fmt.Sprint("procs=", procs), func(t *testing.T) {
			prev := runtime.GOMAXPROCS(procs)
			defer runtime.GOMAXPROCS(prev)
			runPutGet(t)
		})
	}
}

func runPutGet(t *testing.T) {
	const lanes, producers, maxIdx = 2, 6, 1 << 16
	rounds := 20000
	if testing.Short() {
		rounds = 4000
	}
	a := pool.New(64, lanes)
	var holder [maxIdx]atomic.Int32
	var lastGen [maxIdx]atomic.Uint32
	var bad atomic.Int64
	var firstErr atomic.Pointer[string]
	fail := func(format string, args ...any) {
		bad.Add(1)
		s := fmt.Sprintf(format, args...)
		firstErr.CompareAndSwap(nil, &s)
	}
	take := func(p, lane int) (uint32, pool.Slot) {
		idx, gen, s, ok := a.Get(lane)
		if !ok {
			fail("Get failed")
			return 0, s
		}
		if !holder[idx].CompareAndSwap(0, int32(p+1)) {
			fail("index %d handed to %d while %d holds it", idx, p+1, holder[idx].Load())
		}
		if old := lastGen[idx].Swap(gen); old+1 != gen {
			fail("index %d: generation %d after %d", idx, gen, old)
		}
		if task, h := s.Task(); task != nil || h != 0 {
			fail("index %d comes back with a task (%v) or handler %d", idx, task != nil, h)
		}
		return idx, s
	}
	release := func(p int, idx uint32) {
		if !holder[idx].CompareAndSwap(int32(p+1), 0) {
			fail("index %d released by %d but held by %d", idx, p+1, holder[idx].Load())
		}
	}
	toOwner := make(chan uint32, 64)
	var wg, ownerWG sync.WaitGroup
	ownerWG.Add(1)
	go func() { // the shard's worker: frees in chains
		defer ownerWG.Done()
		var c pool.Chain
		n, lane := 0, 0
		for idx := range toOwner {
			if !holder[idx].CompareAndSwap(-1, 0) {
				fail("index %d reached the owner held by %d", idx, holder[idx].Load())
			}
			a.Add(&c, idx)
			if n++; n == 8 {
				a.PutChain(lane, &c)
				n, lane = 0, lane+1
			}
		}
		a.PutChain(lane, &c)
	}()
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f := func() {}
			for i := range rounds {
				lane := (p + i/100) % (lanes + 1) // lanes taken modulo: lane 2 is lane 0
				idx, s := take(p, lane)
				if idx == 0 {
					return
				}
				if i%2 == 0 {
					s.SetTask(f, 0)
				} else {
					s.SetTask(nil, uint16(1+i%100))
				}
				switch i % 3 {
				case 0, 1: // the take-back: Put by the holder, often on another lane
					release(p, idx)
					a.Put(lane+i%2, idx)
				default:
					if !holder[idx].CompareAndSwap(int32(p+1), -1) {
						fail("index %d: lost while held by %d", idx, p+1)
					}
					toOwner <- idx
				}
			}
		}()
	}
	wg.Wait()
	close(toOwner)
	ownerWG.Wait()
	if s := firstErr.Load(); s != nil {
		t.Fatalf("%d errors, first: %s", bad.Load(), *s)
	}
	assert.Less(t, a.HighWater(), uint32(producers*64), "nodes are reused")
}
