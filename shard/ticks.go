package shard

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// Clock arithmetic. Any goroutine may call these: they read only immutable
// fields.

// Ref identifies one timer: its node and the node's generation in the
// timer's life, which never repeats (64 bits), so a Ref never names a later
// timer that reuses the node. The zero Ref never names a timer (index 0 is
// reserved, generation 0 never handed out). Refs are comparable.
type Ref struct {
	gen uint64
	idx uint32
}

func makeRef(idx uint32, gen uint64) Ref { return Ref{gen: gen, idx: idx} }

// IsZero reports whether r is the zero Ref.
func (r Ref) IsZero() bool { return r.gen == 0 }

// AtomicRef holds a Ref that one goroutine stores while others load it.
// The zero value holds the zero Ref.
type AtomicRef struct {
	gen atomic.Uint64
	idx atomic.Uint32
}

// Store stores r. The index goes first: a Load that sees the generation
// sees the index with it (Go's atomics are sequentially consistent).
func (a *AtomicRef) Store(r Ref) {
	a.idx.Store(r.idx)
	a.gen.Store(r.gen)
}

// Load returns the Ref stored last, or the zero Ref.
func (a *AtomicRef) Load() Ref {
	gen := a.gen.Load()
	return Ref{gen: gen, idx: a.idx.Load()}
}

func (sh *Shard) clampDelay(d time.Duration) time.Duration {
	return min(max(d, 0), sh.maxDelay)
}

// divider divides by a constant with a multiplication: a 64-bit division
// costs 35-90 cycles on the CPUs we measure on, and Schedule does two (its
// deadline and the tick it checks the shard goroutine against).
type divider struct {
	d, m uint64 // m = floor((2^64-1) / d)
}

func newDivider(d uint64) divider { return divider{d: d, m: ^uint64(0) / d} }

// div returns floor(x / d). d*m > 2^64 - d, so x*m/2^64 lies in
// (x/d - x/2^64, x/d], and x < 2^64: its integer part, the high half of
// x*m, is the quotient or one less, and one correction step makes it exact.
func (v divider) div(x uint64) uint64 {
	q, _ := bits.Mul64(x, v.m)
	if x-q*v.d >= v.d {
		q++
	}
	return q
}

// ceilTick returns the first tick that starts at or after clock reading at.
func (sh *Shard) ceilTick(at time.Duration) uint64 {
	d := int64(at - sh.origin)
	if d <= 0 {
		return 0
	}
	return sh.ticks.div(uint64(d + sh.tick - 1))
}

// floorTick returns the last tick that starts at or before clock reading at.
func (sh *Shard) floorTick(at time.Duration) uint64 {
	d := int64(at - sh.origin)
	if d <= 0 {
		return 0
	}
	return sh.ticks.div(uint64(d))
}

// tickTime returns the clock reading at which tick t starts.
func (sh *Shard) tickTime(t uint64) time.Duration {
	return sh.origin + time.Duration(int64(t)*sh.tick)
}

// deadlineTick returns the tick a timer set delay after clock reading now
// is due at: the first tick that starts at or after the deadline, so never
// early.
func (sh *Shard) deadlineTick(now, delay time.Duration) uint64 {
	return sh.ceilTick(now + sh.clampDelay(delay))
}
