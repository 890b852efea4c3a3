// Package hist provides a fixed-memory, log-linear (HDR-style) histogram of
// non-negative durations in nanoseconds, written by a single goroutine and
// read concurrently by any number of goroutines.
//
// It is meant for the hot path of a timer shard's worker (tick lag, timer
// lateness, task run time): [Histogram.Record] does not allocate, takes no
// locks and does no compare-and-swap loops, while stats readers call
// [Histogram.Snapshot] from any goroutine without ever blocking the writer.
//
// # Bucket layout
//
// With subBits = 5 and sub = 2^subBits = 32, a value v is mapped to
//
//	shift = max(0, bits.Len64(v) - subBits - 1)
//	index = shift*sub + v>>shift
//
// Values 0..63 therefore get one exact bucket each. Above that, every
// power-of-two range [2^e, 2^(e+1)) is split into 32 linear sub-buckets of
// width 2^(e-5). A bucket [low, high] has width w = high-low+1 ≤ low/32, and
// queries report its midpoint low + (w-1)/2 (clamped to the recorded Min and
// Max), so every value in the bucket is reported with a relative error
// strictly below 1/64 = 1.5625% ([RelativeError]); values below 64 are exact.
//
// # Range and memory
//
// Values from 0 to [MaxTrackable] = 2^40-1 ns (about 18m19s) are tracked
// within the error bound, in 36*32 = 1152 buckets. Negative values are
// recorded as 0. Larger values are counted in the last bucket and added to
// Sum and Max with their true value; quantiles that fall into that bucket are
// only known to lie in [2^40-2^34, Max]. A Histogram occupies 9240 bytes
// (1152 counters plus sum, max and min words) and a [Snapshot] 9248 bytes,
// independent of how many values are recorded.
//
// # Concurrency and memory ordering
//
// Every word of a Histogram is a sync/atomic value, so readers never observe
// torn values and the package is clean under the race detector. Because
// there is exactly one writer, an increment is an atomic Load followed by an
// atomic Store rather than an atomic Add: no other goroutine ever stores to
// the word, so the Load always returns the writer's own latest Store and no
// update can be lost between the two; readers only load. (On amd64 Go
// compiles an atomic Store to XCHG, which is as expensive as a locked add,
// so the split only pays off where a store is cheaper than an atomic add,
// such as arm64 (STLR); each Record performs
// two such stores, for the sum and the bucket counter, plus one for min or
// max when they change. The count is not stored separately: it is the sum
// of the bucket counters.)
//
// Record updates min, max and sum before the bucket counter; Snapshot loads
// the bucket counters before min, max and sum. Go's atomics are sequentially
// consistent, so any value whose bucket increment a snapshot observed is
// also reflected in that snapshot's Min, Max and Sum. A snapshot taken while
// the writer is active is otherwise only "consistent enough": Sum may include
// a few values not yet in the buckets, and different buckets are read at
// slightly different instants. The snapshot's Count is the sum of the bucket
// counts it copied, so quantile queries never walk past its data, and
// successive snapshots of one histogram never see Count decrease.
//
// To report a distribution over an interval, readers keep the previous
// snapshot and use [Snapshot.Sub]; there is no Reset. Per-shard snapshots
// are combined with [Snapshot.Merge].
package hist

import (
	"encoding/json"
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

const (
	subBits    = 5
	subBuckets = 1 << subBits
	maxBits    = 40

	// numBuckets is the number of buckets needed for values < 2^maxBits.
	numBuckets = (maxBits - subBits + 1) * subBuckets
)

// MaxTrackable is the largest value, in nanoseconds (2^40-1, about 18m19s),
// recorded within the RelativeError bound. Larger values are clamped into the
// last bucket; their true value still contributes to Sum and Max.
const MaxTrackable int64 = 1<<maxBits - 1

// RelativeError is the bound on the relative error of a value reported by
// Snapshot.Quantile for recorded values in [0, MaxTrackable]: the reported
// value r for an exact quantile x satisfies |r-x| < x*RelativeError.
const RelativeError = 1.0 / (2 * subBuckets)

// Histogram is a log-linear histogram of non-negative nanosecond values.
//
// The zero value is an empty histogram ready to use. A Histogram must not be
// copied after first use. Only one goroutine may call Record at a time (and
// successive writers must be synchronized by a happens-before edge); Snapshot
// may be called concurrently from any number of goroutines and never blocks
// the writer.
type Histogram struct {
	counts [numBuckets]atomic.Uint64
	sum    atomic.Uint64 // wrapping sum of recorded values
	max    atomic.Uint64
	minInv atomic.Uint64 // ^min, so that the zero value means "no minimum"
}

// bucketIndex returns the bucket of u, which must be <= MaxTrackable.
func bucketIndex(u uint64) int {
	shift := max(bits.Len64(u)-subBits-1, 0)
	return shift<<subBits + int(u>>uint(shift))
}

// bucketBounds returns the smallest and largest value mapped to bucket i.
func bucketBounds(i int) (low, high uint64) {
	if i < 2*subBuckets {
		return uint64(i), uint64(i)
	}
	shift := uint(i>>subBits - 1)
	low = uint64(i&(subBuckets-1)+subBuckets) << shift
	return low, low + 1<<shift - 1
}

// Record adds v nanoseconds to the histogram. Negative values are recorded
// as 0; values above MaxTrackable are counted in the last bucket but added
// to Sum and Max with their true value. Record does not allocate. It must
// only be called by one goroutine at a time.
func (h *Histogram) Record(v int64) { h.RecordN(v, 1) }

// RecordN adds n occurrences of v at the cost of one Record: a shard records
// the lateness of all the timers of one tick with one call. n == 0 records
// nothing.
func (h *Histogram) RecordN(v int64, n uint64) {
	if n == 0 {
		return
	}
	u := uint64(max(v, 0))
	// Single writer: Load+Store cannot lose updates (see package comment).
	// min, max and sum are published before the bucket counter.
	if u > h.max.Load() {
		h.max.Store(u)
	}
	if ^u > h.minInv.Load() {
		h.minInv.Store(^u)
	}
	h.sum.Store(h.sum.Load() + u*n)
	c := &h.counts[bucketIndex(min(u, uint64(MaxTrackable)))]
	c.Store(c.Load() + n)
}

// Snapshot returns a copy of the histogram's current state. It may be called
// from any goroutine concurrently with Record and never blocks the writer.
// See the package comment for the consistency guarantees.
func (h *Histogram) Snapshot() Snapshot {
	var s Snapshot
	for i := range h.counts {
		c := h.counts[i].Load()
		s.counts[i] = c
		s.total += c
	}
	// Loaded after the buckets: covers every value counted above.
	s.minInv = h.minInv.Load()
	s.max = h.max.Load()
	s.sum = h.sum.Load()
	return s
}

// Snapshot is a point-in-time copy of a Histogram's counters; it is a plain
// value that may be copied freely. The zero value is an empty snapshot,
// usable as the starting point of Merge.
type Snapshot struct {
	counts [numBuckets]uint64
	total  uint64 // sum of counts
	sum    uint64
	max    uint64
	minInv uint64
}

// Count returns the number of values in the snapshot.
func (s Snapshot) Count() uint64 { return s.total }

// Sum returns the sum of the values in the snapshot, in nanoseconds. It wraps
// around on overflow (after about 292 years of accumulated time).
func (s Snapshot) Sum() int64 { return int64(s.sum) }

// Mean returns Sum divided by Count, or 0 for an empty snapshot.
func (s Snapshot) Mean() time.Duration {
	if s.total == 0 {
		return 0
	}
	return time.Duration(s.sum / s.total)
}

// Max returns the largest recorded value, exact even above MaxTrackable, or 0
// for an empty snapshot. For a result of Sub it is an upper bound.
func (s Snapshot) Max() int64 {
	if s.total == 0 {
		return 0
	}
	return int64(s.max)
}

// Min returns the smallest recorded value, or 0 for an empty snapshot. For a
// result of Sub it is a lower bound.
func (s Snapshot) Min() int64 {
	if s.total == 0 {
		return 0
	}
	return int64(^s.minInv)
}

// Quantile returns the q-quantile of the recorded values using the
// nearest-rank definition (the ceil(q*Count)-th smallest value), within
// RelativeError of the exact value for values up to MaxTrackable. q is
// clamped to [0, 1] (NaN counts as 0); q = 0 returns Min and q = 1 returns
// Max exactly. Results always lie in [Min, Max]. An empty snapshot returns 0.
func (s Snapshot) Quantile(q float64) int64 {
	return s.quantile(q)
}

// quantile implements Quantile without copying the snapshot.
func (s *Snapshot) quantile(q float64) int64 {
	switch {
	case s.total == 0:
		return 0
	case !(q > 0):
		return int64(^s.minInv)
	case q >= 1:
		return int64(s.max)
	}
	rank := uint64(math.Ceil(q * float64(s.total)))
	rank = min(max(rank, 1), s.total)
	var seen uint64
	for i, c := range s.counts {
		seen += c
		if seen >= rank {
			low, high := bucketBounds(i)
			mid := low + (high-low)/2
			return int64(min(max(mid, ^s.minInv), s.max))
		}
	}
	return int64(s.max) // not reached: total is the sum of counts
}

// Merge adds the values of other to s, e.g. to total the snapshots of all
// shards. Counts and sums add; Min and Max are the extremes of both.
func (s *Snapshot) Merge(other Snapshot) {
	for i, c := range other.counts {
		s.counts[i] += c
	}
	s.total += other.total
	s.sum += other.sum
	s.max = max(s.max, other.max)
	s.minInv = max(s.minInv, other.minInv)
}

// Sub returns the distribution of the values recorded between prev and s,
// where prev is an earlier snapshot of the same histogram: bucket counts and
// sums subtract (counts saturate at 0 should prev not be earlier). The
// extremes of an interval are not recorded, so the result's Max is the
// high bound of its highest non-empty bucket (capped at s's Max) and its
// Min the low bound of its lowest (raised to s's Min): bounds of the
// interval's true extremes, within twice RelativeError of them.
func (s Snapshot) Sub(prev Snapshot) Snapshot {
	d := Snapshot{sum: s.sum - prev.sum}
	lowest, highest := -1, -1
	for i, c := range s.counts {
		if p := prev.counts[i]; c > p {
			d.counts[i] = c - p
			d.total += c - p
			if lowest < 0 {
				lowest = i
			}
			highest = i
		}
	}
	if d.total > 0 {
		low, _ := bucketBounds(lowest)
		_, high := bucketBounds(highest)
		if highest == numBuckets-1 {
			high = s.max // the last bucket also holds every larger value
		}
		d.max = min(high, s.max)
		d.minInv = ^max(low, ^s.minInv)
	}
	return d
}

// Percentiles is a JSON-friendly summary of a Snapshot. Durations are
// encoded as integer nanoseconds, hence the _ns suffix of the JSON keys.
type Percentiles struct {
	P50   time.Duration `json:"p50_ns"`
	P90   time.Duration `json:"p90_ns"`
	P99   time.Duration `json:"p99_ns"`
	P999  time.Duration `json:"p999_ns"`
	Max   time.Duration `json:"max_ns"`
	Mean  time.Duration `json:"mean_ns"`
	Count uint64        `json:"count"`
}

// Percentiles returns the 50th, 90th, 99th and 99.9th percentiles, the
// maximum, the mean and the count of s.
func (s Snapshot) Percentiles() Percentiles {
	return Percentiles{
		P50:   time.Duration(s.quantile(0.5)),
		P90:   time.Duration(s.quantile(0.9)),
		P99:   time.Duration(s.quantile(0.99)),
		P999:  time.Duration(s.quantile(0.999)),
		Max:   time.Duration(s.Max()),
		Mean:  s.Mean(),
		Count: s.total,
	}
}

// MarshalJSON encodes the snapshot as its Percentiles, the form a stats
// endpoint serves; the buckets stay in memory for Merge and Sub.
func (s Snapshot) MarshalJSON() ([]byte, error) {
	return json.Marshal(s.Percentiles())
}

// NumBuckets is the number of buckets of a Histogram.
const NumBuckets = numBuckets

// Bucket returns bucket i's bounds (the smallest and largest value it
// holds, in nanoseconds) and how many values s counted in it. The last
// bucket also holds every value above MaxTrackable. i must be in
// [0, NumBuckets).
func (s *Snapshot) Bucket(i int) (low, high int64, count uint64) {
	l, h := bucketBounds(i)
	return int64(l), int64(h), s.counts[i]
}
