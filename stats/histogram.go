package stats

import (
	"encoding/json"
	"iter"
	"time"

	"github.com/shardwheel/shardwheel/internal/hist"
)

// Histogram is a distribution of durations, as a shard records them: a
// fixed-memory log-linear histogram whose buckets are 1/32 of a power of
// two wide (exact below 64ns), so that a quantile is reported within
// 1.6% of the true value for durations up to 18m19s. Longer durations
// count in the last bucket, with their true value in Sum and Max.
//
// A Histogram is a plain value, safe to copy and to read from any
// goroutine. The zero value is empty. It encodes to JSON as its
// percentiles, mean and count, in nanoseconds.
type Histogram struct{ s hist.Snapshot }

// RelativeError is the bound on the relative error of a quantile a
// Histogram reports, for durations up to 2^40-1 ns (about 18m19s).
const RelativeError = hist.RelativeError

// Count returns the number of durations recorded.
func (h Histogram) Count() uint64 { return h.s.Count() }

// Sum returns the sum of the durations recorded.
func (h Histogram) Sum() time.Duration { return time.Duration(h.s.Sum()) }

// Mean returns Sum divided by Count, or 0 for an empty histogram.
func (h Histogram) Mean() time.Duration { return h.s.Mean() }

// Min returns the smallest duration recorded, or 0 for an empty
// histogram. For the result of Sub it is a lower bound.
func (h Histogram) Min() time.Duration { return time.Duration(h.s.Min()) }

// Max returns the largest duration recorded, or 0 for an empty histogram.
// For the result of Sub it is an upper bound.
func (h Histogram) Max() time.Duration { return time.Duration(h.s.Max()) }

// Quantile returns the q-quantile (nearest rank: the ceil(q*Count)-th
// smallest duration) within RelativeError of the exact value. q is
// clamped to [0, 1]; 0 returns Min and 1 returns Max. The result lies in
// [Min, Max]; an empty histogram returns 0.
func (h Histogram) Quantile(q float64) time.Duration { return time.Duration(h.s.Quantile(q)) }

// Sub returns the durations recorded between prev, an earlier snapshot of
// the same histogram, and h: counts and sums subtract (saturating at 0).
// An interval's extremes are not recorded, so its Max is the high bound of
// its highest non-empty bucket (at most h's Max) and its Min the low bound
// of its lowest (at least h's Min): within twice RelativeError of the
// true extremes. It is how a monitoring loop reports the last N seconds.
func (h Histogram) Sub(prev Histogram) Histogram { return Histogram{h.s.Sub(prev.s)} }

// Merge adds the durations of o to h: counts and sums add, and Min and Max
// are the extremes of both. Stats.Total merges the shards' histograms.
func (h *Histogram) Merge(o Histogram) { h.s.Merge(o.s) }

// Bucket is one bucket of a Histogram: Count durations in
// [Low, High].
type Bucket struct {
	Low, High time.Duration
	Count     uint64
}

// Buckets yields the histogram's non-empty buckets in increasing order of
// their bounds, for exporters that need the distribution itself (a
// Prometheus or OpenTelemetry histogram). The counts add up to Count. The
// last bucket, [2^40-2^34 ns, 2^40-1 ns], also counts every longer
// duration.
func (h Histogram) Buckets() iter.Seq[Bucket] {
	return func(yield func(Bucket) bool) {
		for i := range hist.NumBuckets {
			low, high, n := h.s.Bucket(i)
			if n > 0 && !yield(Bucket{time.Duration(low), time.Duration(high), n}) {
				return
			}
		}
	}
}

// MarshalJSON encodes the histogram as its 50th, 90th, 99th and 99.9th
// percentiles, maximum and mean, in nanoseconds, and its count.
func (h Histogram) MarshalJSON() ([]byte, error) {
	return json.Marshal(h.s.Percentiles())
}
