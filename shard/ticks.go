package shard

import (
	"math/bits"
	"time"
)

// Clock arithmetic. Any goroutine may call these: they read only immutable
// fields.

// Ref identifies one timer: node index in the high half, generation in the
// low half. The zero Ref never names a timer (index 0 is reserved).
type Ref uint64

func makeRef(idx, gen uint32) Ref     { return Ref(uint64(idx)<<32 | uint64(gen)) }
func (r Ref) split() (uint32, uint32) { return uint32(r >> 32), uint32(r) }

func (sh *Shard) clampDelay(d time.Duration) time.Duration {
	return min(max(d, 0), sh.maxDelay)
}

// divider divides by a constant with a multiplication: a 64-bit division
// costs 35-90 cycles on the CPUs we measure on, and Schedule does two (its
// deadline and the tick it checks the worker against).
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
