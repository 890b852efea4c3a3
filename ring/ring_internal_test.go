package ring

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"

	"github.com/shardwheel/shardwheel/internal/pad"
)

// TestQueueLayout checks the false-sharing padding: the producers' head has
// a cache line of its own, the consumer's backlog another, and the struct
// fills whole lines so that neighbouring allocations share neither.
func TestQueueLayout(t *testing.T) {
	const line = pad.CacheLineSize
	var q Queue
	size := unsafe.Sizeof(q)
	assert.Zero(t, size%line, "sizeof(Queue) = %d, not a multiple of %d", size, line)
	assert.Equal(t, 2*uintptr(line), size, "two lines: producers', consumer's")
	head, first, last := unsafe.Offsetof(q.in), unsafe.Offsetof(q.first), unsafe.Offsetof(q.last)
	assert.Zero(t, head/line, "head opens the producers' line")
	assert.Equal(t, uintptr(1), first/line, "first is on the consumer's line")
	assert.Equal(t, uintptr(1), (last+unsafe.Sizeof(q.last)-1)/line, "last is on the consumer's line")
	assert.Equal(t, uintptr(64), uintptr(pad.CacheLineSize))
}

// TestStackLayout: a Stack's head fills a cache line of its own.
func TestStackLayout(t *testing.T) {
	assert.Equal(t, uintptr(pad.CacheLineSize), unsafe.Sizeof(Stack{}))
}
