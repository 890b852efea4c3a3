package shard

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A goroutine token is never 0, the same through a goroutine's life, and
// different for goroutines alive at the same time: what CancelWait relies
// on to tell a task calling it from anyone else.
func TestGoroutineTokenNamesOneLiveGoroutine(t *testing.T) {
	const n = 32
	mine := goroutineToken()
	require.NotZero(t, mine)
	tokens := make([]uintptr, n)
	var started, release sync.WaitGroup
	started.Add(n)
	release.Add(1)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			tokens[i] = goroutineToken()
			started.Done()
			release.Wait() // all alive at once
			assert.Equal(t, tokens[i], goroutineToken(), "stable")
		})
	}
	started.Wait()
	seen := map[uintptr]bool{mine: true}
	for _, tok := range tokens {
		assert.NotZero(t, tok)
		assert.False(t, seen[tok], "token %#x given twice", tok)
		seen[tok] = true
	}
	release.Done()
	wg.Wait()
	assert.Equal(t, mine, goroutineToken(), "stable")
}
