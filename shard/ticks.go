package shard

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// Clock arithmetic. Any goroutine may call these: they read only immutable
// fields.

// Ref identifies one timer: the shard whose arena holds its node (its
// Config.ID), the node, and the node's generation in the timer's life,
// which never repeats (64 bits), so a Ref never names a later timer that
// reuses the node. The zero Ref never names a timer (index 0 is reserved,
// generation 0 never handed out). Refs are comparable.
type Ref struct {
	gen   uint64
	idx   uint32
	shard uint32
}

// ref returns the Ref of the life of generation gen on node idx.
func (sh *Shard) ref(idx uint32, gen uint64) Ref {
	return Ref{gen: gen, idx: idx, shard: uint32(sh.id)}
}

// IsZero reports whether r is the zero Ref.
func (r Ref) IsZero() bool { return r.gen == 0 }

// Shard returns the number (Config.ID) of the shard whose node r names.
func (r Ref) Shard() int { return int(r.shard) }

// AtomicRef holds a Ref that one goroutine stores while others load it.
// The zero value holds the zero Ref.
type AtomicRef struct {
	gen   atomic.Uint64
	where atomic.Uint64 // shard<<32 | idx
}

// Store stores r. Where it lives goes first: a Load that sees the
// generation sees the rest with it (Go's atomics are sequentially
// consistent).
func (a *AtomicRef) Store(r Ref) {
	a.where.Store(uint64(r.shard)<<32 | uint64(r.idx))
	a.gen.Store(r.gen)
}

// Load returns the Ref stored last, or the zero Ref.
func (a *AtomicRef) Load() Ref {
	gen := a.gen.Load()
	w := a.where.Load()
	return Ref{gen: gen, idx: uint32(w), shard: uint32(w >> 32)}
}

// AddDuration returns a+b, saturated at the bounds of time.Duration
// instead of wrapping round, as time.Time.Sub saturates: a sum of a clock
// reading and a user's delay must never turn "far ahead" into "long ago".
func AddDuration(a, b time.Duration) time.Duration {
	sum := a + b
	switch {
	case b > 0 && sum < a:
		return math.MaxInt64
	case b < 0 && sum > a:
		return math.MinInt64
	}
	return sum
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
