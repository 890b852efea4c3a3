package hist

import (
	"math"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// TestBucketLayout checks every bucket: contiguous, covering exactly
// [0, MaxTrackable], mapped back to itself, and narrow enough for the bound.
func TestBucketLayout(t *testing.T) {
	var next uint64
	for i := range numBuckets {
		low, high := bucketBounds(i)
		require.Equal(t, next, low, "bucket %d not contiguous", i)
		require.LessOrEqual(t, low, high)
		require.Equal(t, i, bucketIndex(low), "low of bucket %d", i)
		require.Equal(t, i, bucketIndex(high), "high of bucket %d", i)
		if i < 2*subBuckets {
			require.Equal(t, low, high, "bucket %d must be exact", i)
		} else {
			require.LessOrEqual(t, float64(high-low+1)/float64(low), 1.0/subBuckets, "bucket %d", i)
		}
		next = high + 1
	}
	require.Equal(t, uint64(MaxTrackable)+1, next, "buckets must end at MaxTrackable")
}

// TestBucketBoundarySweep checks values around each power of two.
func TestBucketBoundarySweep(t *testing.T) {
	for e := range maxBits + 1 {
		p := uint64(1) << e
		for _, v := range []uint64{p - 1, p, p + 1} {
			if v > uint64(MaxTrackable) {
				continue
			}
			i := bucketIndex(v)
			require.Less(t, i, numBuckets)
			low, high := bucketBounds(i)
			require.True(t, low <= v && v <= high, "v=%d not in bucket %d [%d,%d]", v, i, low, high)
			if v < 2*subBuckets {
				require.Equal(t, low, high, "v=%d must be exact", v)
				continue
			}
			require.LessOrEqual(t, float64(high-low+1)/float64(low), 1.0/subBuckets, "v=%d", v)
			mid := low + (high-low)/2
			relErr := math.Abs(float64(mid)-float64(v)) / float64(v)
			require.Less(t, relErr, RelativeError, "v=%d mid=%d", v, mid)
		}
	}
}

func TestClampIntoLastBucket(t *testing.T) {
	var h Histogram
	h.Record(MaxTrackable + 1)
	h.Record(math.MaxInt64)
	h.Record(MaxTrackable)
	s := h.Snapshot()
	require.Equal(t, uint64(3), s.counts[numBuckets-1])
	require.Equal(t, uint64(3), s.Count())
}

func TestDocumentedSizes(t *testing.T) {
	require.Equal(t, 1152, numBuckets)
	require.Equal(t, uintptr(9240), unsafe.Sizeof(Histogram{}))
	require.Equal(t, uintptr(9248), unsafe.Sizeof(Snapshot{}))
	low, _ := bucketBounds(numBuckets - 1)
	require.Equal(t, uint64(1)<<40-uint64(1)<<34, low)
}
