package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// uniform draws a duration uniformly from [lo, hi].
func uniform(r *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(r.Float64()*float64(hi-lo))
}

// residual draws the time a timer with a delay uniform on [lo, hi] still
// has to run, seen at a random moment of a long-running stream: the
// equilibrium residual life of renewal theory, with density
// P(delay > r) / E[delay]. Prefilling with it makes timers expire at the
// steady rate from the first second; prefilling with fresh delays would
// expire none for lo and then too many.
func residual(r *rand.Rand, lo, hi time.Duration) time.Duration {
	a, b := float64(lo), float64(hi)
	// Below lo the density is flat and holds a share lo/E[delay] of the
	// mass; above it, it falls linearly to 0 at hi (inverse CDF below).
	if r.Float64()*(a+b) < 2*a {
		return time.Duration(r.Float64() * a)
	}
	return time.Duration(b - (b-a)*math.Sqrt(r.Float64()))
}

// medianRange returns the median of v, which it sorts, and its smallest and
// largest values. v must not be empty.
func medianRange(v []float64) (med, lo, hi float64) {
	slices.Sort(v)
	med = v[len(v)/2]
	if len(v)%2 == 0 {
		med = (v[len(v)/2-1] + med) / 2
	}
	return med, v[0], v[len(v)-1]
}
