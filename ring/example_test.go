package ring_test

import (
	"fmt"
	"sync"

	"github.com/shardwheel/shardwheel/pool"
	"github.com/shardwheel/shardwheel/ring"
)

func Example() {
	// The queue links pool nodes; it holds no memory of its own.
	arena := pool.New(64, 1)
	var q ring.Queue

	// Producers may push from any goroutine; a push never fails or waits.
	var wg sync.WaitGroup
	for p := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 3 {
				idx, _, ok := arena.Get(p)
				if !ok {
					panic("arena full")
				}
				arena.Node(idx).Key = uint64(10*p + i) // written before Push
				q.Push(idx, arena.Link(idx))
			}
		}()
	}
	wg.Wait()
	fmt.Println("empty:", q.Empty())

	// One consumer pops. Each producer's values come out in its order.
	var sum uint64
	last := map[uint64]uint64{} // producer -> last value seen
	inOrder := true
	for {
		idx, ok := q.TryPop(arena)
		if !ok {
			break
		}
		key := arena.Node(idx).Key
		p := key / 10
		if prev, seen := last[p]; seen && prev > key {
			inOrder = false
		}
		last[p] = key
		sum += key
	}
	fmt.Println("sum:", sum, "in order:", inOrder, "empty:", q.Empty())

	// A popped node may be pushed again.
	idx, _, _ := arena.Get(0)
	for range 3 {
		q.Push(idx, arena.Link(idx))
		got, _ := q.TryPop(arena)
		fmt.Print(got == idx, " ")
	}
	fmt.Println()
	// Output:
	// empty: false
	// sum: 36 in order: true empty: true
	// true true true
}
