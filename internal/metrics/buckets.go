package metrics

import (
	"iter"
	"math"
	"time"

	"github.com/shardwheel/shardwheel/stats"
)

// A Histogram's buckets are linear within each power of two of
// nanoseconds, while exporters want either fixed upper bounds (a classic
// Prometheus histogram) or exponential buckets in seconds (a native
// histogram, an OpenTelemetry exponential histogram): no bound of theirs
// lines up with ours. Both conversions below move each of our buckets
// whole to the place of its High bound, so that they err the same way:
// a duration is never shown below its value, and at most one bucket of
// ours (1/32, 3.125%) above it.

// NativeScale is the resolution of the exponential histograms the
// exporters publish (a Prometheus native histogram's schema, an
// OpenTelemetry exponential histogram's scale): 2^5 = 32 buckets per
// power of two, bounds 2^(1/32) (2.2%) apart, the resolution closest to a
// Histogram's (32 linear sub-buckets per power of two, at most 3.125%
// wide). A finer scale would only spread each of our buckets' count over
// a wider gap of empty buckets, since our buckets cannot be split.
const NativeScale = 5

// NativeBucket is a bucket of an exponential histogram of seconds at
// NativeScale, numbered as Prometheus numbers them: bucket Index holds
// durations in (2^((Index-1)/32), 2^(Index/32)] seconds. OpenTelemetry
// numbers the same bucket Index-1.
type NativeBucket struct {
	Index int32
	Count uint64
}

// Native re-buckets a Histogram's buckets, in increasing order as
// Histogram.Buckets yields them, into an exponential histogram of seconds
// at NativeScale. It returns the number of zero durations, for a zero
// bucket of threshold 0, and the non-empty buckets in increasing Index
// order; their counts and zero add up to the Histogram's Count. Each of
// our buckets lands whole in the exponential bucket that holds its High
// bound, so a duration d up to 2^40-1 ns (18m19s) lands in a bucket whose
// upper bound is at least d and whose lower bound is below d*(1+1/32).
// Longer durations, which a Histogram keeps in its last bucket, land at
// 18m19s.
func Native(buckets iter.Seq[stats.Bucket]) (zero uint64, out []NativeBucket) {
	for b := range buckets {
		if b.High == 0 {
			zero += b.Count
			continue
		}
		// The index grows with High, so equal indices are adjacent.
		i := nativeIndex(b.High)
		if n := len(out); n > 0 && out[n-1].Index == i {
			out[n-1].Count += b.Count
			continue
		}
		out = append(out, NativeBucket{Index: i, Count: b.Count})
	}
	return zero, out
}

// nativeIndex returns the index of the exponential bucket holding d > 0:
// the smallest i with d <= 2^(i/32) seconds. TestNativeIndexOfEveryBucket
// checks it against bounds computed with Exp2 for every High bound a
// Histogram has: no High lies within Log2's rounding error of a bound.
func nativeIndex(d time.Duration) int32 {
	return int32(math.Ceil(math.Log2(d.Seconds()) * (1 << NativeScale)))
}

// Classic returns the cumulative counts of a classic histogram with the
// given upper bounds (seconds, increasing) from a Histogram's buckets, in
// increasing order as Histogram.Buckets yields them: counts[j] is the
// number of durations counted at or below bounds[j], the implicit +Inf
// bucket being the Histogram's Count. Each of our buckets counts at its
// High bound, so a bucket straddling a bound counts above it: counts[j]
// holds every duration up to bounds[j]/(1+1/32) and none above bounds[j],
// and a duration within 3.125% below a bound may show at the next one.
// Durations above 2^40-1 ns (18m19s), which a Histogram keeps in its last
// bucket, count at 18m19s.
func Classic(buckets iter.Seq[stats.Bucket], bounds []float64) []uint64 {
	counts := make([]uint64, len(bounds))
	j := 0
	for b := range buckets {
		high := b.High.Seconds()
		for j < len(bounds) && bounds[j] < high {
			j++
		}
		if j == len(bounds) {
			break // the rest is above every bound: only in +Inf
		}
		counts[j] += b.Count
	}
	for j := 1; j < len(counts); j++ {
		counts[j] += counts[j-1]
	}
	return counts
}
