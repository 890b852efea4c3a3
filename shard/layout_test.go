package shard

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

// TestPaddedLayout checks the false-sharing padding: each lane fills one
// cache line, and the shard's producer-written attention head, its
// read-mostly parked/closed flags and the worker's fields sit on
// different lines.
func TestPaddedLayout(t *testing.T) {
	assert.Equal(t, uintptr(cacheLineSize), unsafe.Sizeof(lane{}))
	var sh Shard
	line := func(off uintptr) uintptr { return off / cacheLineSize }
	attention := line(unsafe.Offsetof(sh.attention))
	parked := line(unsafe.Offsetof(sh.parked))
	assert.Equal(t, parked, line(unsafe.Offsetof(sh.closed)), "the flags producers read share a line")
	assert.NotEqual(t, attention, parked)
	assert.NotEqual(t, attention, line(unsafe.Offsetof(sh.cfg)+unsafe.Sizeof(sh.cfg)-1), "immutable config")
	assert.Less(t, parked, line(unsafe.Offsetof(sh.stopped)), "worker-side fields start after the flags' line")
}
