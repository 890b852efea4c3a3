package metrics

import (
	"iter"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel/internal/hist"
	"github.com/shardwheel/shardwheel/stats"
)

// bucketsOf yields a snapshot's non-empty buckets as Histogram.Buckets
// does, which cannot be called on a Histogram made outside the root
// package.
func bucketsOf(s *hist.Snapshot) iter.Seq[stats.Bucket] {
	return func(yield func(stats.Bucket) bool) {
		for i := range hist.NumBuckets {
			low, high, n := s.Bucket(i)
			if n > 0 && !yield(stats.Bucket{Low: time.Duration(low), High: time.Duration(high), Count: n}) {
				return
			}
		}
	}
}

// nativeUpper is the upper bound of exponential bucket i, in seconds, as
// a consumer of the histogram computes it.
func nativeUpper(i int32) float64 { return math.Exp2(float64(i) / (1 << NativeScale)) }

// TestNativeIndexOfEveryBucket checks nativeIndex on the High bound of
// every bucket a Histogram has: the bound lies in (upper(i-1), upper(i)].
func TestNativeIndexOfEveryBucket(t *testing.T) {
	var s hist.Snapshot
	for i := 1; i < hist.NumBuckets; i++ {
		_, high, _ := s.Bucket(i)
		v := time.Duration(high).Seconds()
		idx := nativeIndex(time.Duration(high))
		require.Less(t, nativeUpper(idx-1), v, "bucket %d: High %dns", i, high)
		require.LessOrEqual(t, v, nativeUpper(idx), "bucket %d: High %dns", i, high)
	}
}

// samples records n random durations, log-uniform from 0 to about 20
// minutes (past the last tracked bucket) plus a few zeros, and returns
// them sorted with the histogram's snapshot.
func samples(n int) ([]time.Duration, hist.Snapshot) {
	r := rand.New(rand.NewPCG(1, 2))
	var h hist.Histogram
	ds := make([]time.Duration, n)
	for i := range ds {
		if i%50 != 0 {
			ds[i] = time.Duration(math.Exp2(r.Float64() * 40.2))
		}
		h.Record(int64(ds[i]))
	}
	slices.Sort(ds)
	return ds, h.Snapshot()
}

// atMost counts the sorted durations at or below seconds.
func atMost(ds []time.Duration, seconds float64) uint64 {
	n, _ := slices.BinarySearchFunc(ds, seconds, func(d time.Duration, s float64) int {
		if d.Seconds() <= s {
			return -1
		}
		return 1
	})
	return uint64(n)
}

// TestClassicErrsUpwardWithinABucket checks the documented bound on a
// classic count: every duration up to b/(1+1/32), none above b.
func TestClassicErrsUpwardWithinABucket(t *testing.T) {
	ds, s := samples(20000)
	var bounds []float64
	for b := 1e-9; b < 3000; b *= 1.7 {
		bounds = append(bounds, b)
	}
	counts := Classic(bucketsOf(&s), bounds)
	require.Len(t, counts, len(bounds))
	lastTracked := time.Duration(hist.MaxTrackable).Seconds()
	for j, b := range bounds {
		if b >= lastTracked {
			// Past 18m19s only the clamped last bucket is left, which
			// counts at 18m19s whatever its durations were.
			assert.Equal(t, s.Count(), counts[j], "bound %g: the clamped durations count at 18m19s", b)
			continue
		}
		assert.GreaterOrEqual(t, counts[j], atMost(ds, b/(1+1.0/32)), "bound %g", b)
		assert.LessOrEqual(t, counts[j], atMost(ds, b), "bound %g", b)
		if j > 0 {
			assert.GreaterOrEqual(t, counts[j], counts[j-1], "cumulative")
		}
	}
}

// TestClassicStraddlingBucket shows the rule on one bucket that straddles
// a bound: it counts at the next bound.
func TestClassicStraddlingBucket(t *testing.T) {
	straddling := stats.Bucket{Low: 2496, High: 2559, Count: 3} // a real bucket of [2048, 4096)
	below := stats.Bucket{Low: 2432, High: 2495, Count: 2}
	bounds := []float64{2.5e-6, 5e-6}
	assert.Equal(t, []uint64{2, 5}, Classic(slices.Values([]stats.Bucket{below, straddling}), bounds))
	// A bucket whose High is exactly a bound counts at it.
	exact := stats.Bucket{Low: 2500, High: 2500, Count: 1}
	assert.Equal(t, []uint64{1, 1}, Classic(slices.Values([]stats.Bucket{exact}), bounds))
	// Above every bound: only the implicit +Inf holds it.
	above := stats.Bucket{Low: 6000, High: 6100, Count: 4}
	assert.Equal(t, []uint64{0, 0}, Classic(slices.Values([]stats.Bucket{above}), bounds))
	assert.Empty(t, Classic(slices.Values([]stats.Bucket{above}), nil))
}

// TestNativeErrsUpwardWithinABucket checks the same bound on the
// cumulative counts of the exponential buckets, and that they add up.
func TestNativeErrsUpwardWithinABucket(t *testing.T) {
	ds, s := samples(20000)
	zero, buckets := Native(bucketsOf(&s))
	assert.Equal(t, atMost(ds, 0), zero, "zeros go to the zero bucket")
	require.NotEmpty(t, buckets)
	lastTracked := time.Duration(hist.MaxTrackable).Seconds()
	cum := zero
	for k, b := range buckets {
		if k > 0 {
			require.Greater(t, b.Index, buckets[k-1].Index, "increasing, merged")
		}
		require.NotZero(t, b.Count)
		cum += b.Count
		u := nativeUpper(b.Index)
		if u >= lastTracked {
			continue // the clamped last bucket, as in the classic test
		}
		assert.GreaterOrEqual(t, cum, atMost(ds, u/(1+1.0/32)), "bucket %d", b.Index)
		assert.LessOrEqual(t, cum, atMost(ds, u), "bucket %d", b.Index)
	}
	assert.Equal(t, s.Count(), cum, "counts add up to Count")
	assert.Equal(t, uint64(len(ds)), cum)
}

// TestNativeEmpty: an empty histogram has no buckets and no zeros.
func TestNativeEmpty(t *testing.T) {
	var s hist.Snapshot
	zero, buckets := Native(bucketsOf(&s))
	assert.Zero(t, zero)
	assert.Empty(t, buckets)
}
