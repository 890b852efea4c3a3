package shard

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHandlersAddConcurrently: concurrent Adds hand out distinct numbers
// 1..n, each naming its own function, readable while the table grows past
// several chunks; the table refuses more than maxHandlers.
func TestHandlersAddConcurrently(t *testing.T) {
	var tab Handlers
	const goroutines, perG = 8, 200 // 1600 handlers: several chunks
	got := make([][]uint16, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perG {
				want := uint64(g*perG + i)
				h, ok := tab.Add(func(k uint64) {
					if k != want {
						t.Errorf("handler %d called for %d", want, k)
					}
				})
				if !ok {
					t.Error("table full too early")
					return
				}
				tab.Func(h)(want) // readable at once, while others grow the table
				got[g] = append(got[g], h)
			}
		}()
	}
	wg.Wait()
	seen := map[uint16]bool{}
	for g := range got {
		for _, h := range got[g] {
			require.False(t, seen[h], "number %d handed out twice", h)
			seen[h] = true
		}
	}
	assert.Len(t, seen, goroutines*perG)
	assert.False(t, seen[0], "0 means a closure and is never handed out")
	assert.True(t, seen[goroutines*perG], "numbers are dense from 1")

	for range maxHandlers - goroutines*perG {
		_, ok := tab.Add(func(uint64) {})
		require.True(t, ok)
	}
	_, ok := tab.Add(func(uint64) {})
	assert.False(t, ok, "the table holds maxHandlers")
}
