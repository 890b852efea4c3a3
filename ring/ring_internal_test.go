package ring

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

// TestRingLayout checks the false-sharing padding: the producers' tail and
// the consumer's head must not share a cache line, and the struct must fill
// whole lines so that neighbouring allocations do not share them either.
func TestRingLayout(t *testing.T) {
	var r Ring
	size := unsafe.Sizeof(r)
	assert.Zero(t, size%cacheLineSize, "sizeof(Ring) = %d, not a multiple of %d", size, cacheLineSize)

	tail := unsafe.Offsetof(r.tail)
	head := unsafe.Offsetof(r.head)
	assert.NotEqual(t, tail/cacheLineSize, head/cacheLineSize,
		"tail (offset %d) and head (offset %d) share a cache line", tail, head)
	// tail must not share a line with the fields before it either.
	assert.GreaterOrEqual(t, tail, uintptr(cacheLineSize), "tail shares the first line")
	// The consumer's fields (head, mask, slots) live on one line.
	for name, off := range map[string]uintptr{
		"mask":  unsafe.Offsetof(r.mask),
		"slots": unsafe.Offsetof(r.slots),
	} {
		assert.Equal(t, head/cacheLineSize, off/cacheLineSize, "%s is not on head's line", name)
		assert.NotEqual(t, tail/cacheLineSize, off/cacheLineSize, "%s is on tail's line", name)
	}
	assert.Equal(t, uintptr(64), uintptr(cacheLineSize))
}
