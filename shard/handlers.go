package shard

import (
	"sync"
	"sync/atomic"
)

// maxHandlers is the most handlers one table holds: a timer names its
// handler by a 16-bit number, 0 meaning "a closure".
const maxHandlers = 1<<16 - 1

// handlerChunk is how many handlers one chunk of a table holds.
const handlerChunk = 256

// Handlers is a table of functions that timers name by number instead of
// each holding a closure (see pool.Slot.SetTask), so that a timer costs its
// node alone and the garbage collector has nothing of it to mark. Handlers
// are added once and never removed; one table serves every shard of a
// scheduler. The zero value is an empty table.
//
// Ownership and ordering: Add runs under mu and writes each entry once,
// before it returns the entry's number; a timer carrying that number is
// published to the shard goroutine afterwards (the producer's state store,
// then its hold's release or its queue push), so that goroutine's read of
// the entry in Func is ordered after the write. Chunks never move: growing
// copies only the slice of chunk pointers, which Func loads atomically.
type Handlers struct {
	mu     sync.Mutex
	n      int                                           // entries used, under mu; number 0 is never handed out
	chunks atomic.Pointer[[]*[handlerChunk]func(uint64)] // copy-on-write under mu
}

// Add registers fn and returns its number (1..maxHandlers), or false when
// the table is full.
func (t *Handlers) Add(fn func(uint64)) (uint16, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.n + 1
	if h > maxHandlers {
		return 0, false
	}
	var chunks []*[handlerChunk]func(uint64)
	if p := t.chunks.Load(); p != nil {
		chunks = *p
	}
	if h/handlerChunk == len(chunks) {
		grown := append(chunks[:len(chunks):len(chunks)], new([handlerChunk]func(uint64)))
		t.chunks.Store(&grown)
		chunks = grown
	}
	chunks[h/handlerChunk][h%handlerChunk] = fn
	t.n = h
	return uint16(h), true
}

// Func returns handler h's function. h must be a number Add returned, to
// a caller ordered after that Add (see Handlers).
func (t *Handlers) Func(h uint16) func(uint64) {
	return (*t.chunks.Load())[h/handlerChunk][h%handlerChunk]
}
