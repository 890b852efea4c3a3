package ring_test

import (
	"fmt"
	"sync"

	"github.com/shardwheel/shardwheel/ring"
)

func Example() {
	r, err := ring.New(5) // rounded up to 8
	if err != nil {
		panic(err)
	}
	fmt.Println("cap:", r.Cap())

	// Producers may push from any goroutine.
	var wg sync.WaitGroup
	for p := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 3 {
				if !r.Push(uint64(10*p + i)) {
					panic("ring full") // 6 values fit in 8 slots
				}
			}
		}()
	}
	wg.Wait()

	// One consumer pops. Each producer's values come out in its order.
	fmt.Println("published:", r.Published(100))
	var sum uint64
	for {
		v, ok := r.TryPop()
		if !ok {
			break
		}
		sum += v
	}
	fmt.Println("sum:", sum, "len:", r.Len())

	// A full ring refuses pushes instead of blocking.
	for r.Push(1) {
	}
	fmt.Println("full at:", r.Len())
	// Output:
	// cap: 8
	// published: 6
	// sum: 36 len: 0
	// full at: 8
}
