package shard

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// TestDividerIsExact checks the multiplicative division against the
// machine's at the edges (multiples of d and one either side, the largest
// values) and at random, for tick-sized and odd divisors.
func TestDividerIsExact(t *testing.T) {
	divisors := []uint64{1, 2, 3, 7, 1000, uint64(time.Millisecond), uint64(time.Millisecond) + 1,
		uint64(10 * time.Millisecond), uint64(time.Hour), math.MaxUint32, 1<<63 + 1, math.MaxUint64}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		divisors = append(divisors, r.Uint64N(uint64(time.Hour))+1)
	}
	for _, d := range divisors {
		v := newDivider(d)
		check := func(x uint64) {
			if got, want := v.div(x), x/d; got != want {
				t.Fatalf("%d / %d = %d, want %d", x, d, got, want)
			}
		}
		for _, x := range []uint64{0, 1, d - 1, d, d + 1, math.MaxUint64, math.MaxUint64 - 1, math.MaxInt64, math.MaxUint64 / d * d} {
			check(x)
		}
		for range 20000 {
			x := r.Uint64()
			check(x)
			q := x / d
			check(q * d) // exact multiples
			if q > 0 {
				check(q*d - 1)
			}
		}
	}
}

// FuzzDivider is TestDividerIsExact on inputs the fuzzer picks.
func FuzzDivider(f *testing.F) {
	f.Add(uint64(12345678901234), uint64(time.Millisecond))
	f.Fuzz(func(t *testing.T, x, d uint64) {
		if d == 0 {
			return
		}
		if got, want := newDivider(d).div(x), x/d; got != want {
			t.Fatalf("%d / %d = %d, want %d", x, d, got, want)
		}
	})
}
