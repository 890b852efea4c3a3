package hist_test

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel/internal/hist"
)

var quantiles = []float64{0.5, 0.9, 0.99, 0.999}

// exactQuantile returns the nearest-rank q-quantile of sorted.
func exactQuantile(sorted []int64, q float64) int64 {
	rank := int(math.Ceil(q * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// assertWithinBound asserts that got is within the documented relative error
// of want, and exactly equal for values below 64.
func assertWithinBound(t *testing.T, want, got int64, msg string, args ...any) {
	t.Helper()
	if want < 64 {
		assert.Equal(t, want, got, append([]any{msg}, args...)...)
		return
	}
	relErr := math.Abs(float64(got)-float64(want)) / float64(want)
	assert.Less(t, relErr, hist.RelativeError, append([]any{msg + " want=%d got=%d"}, append(args, want, got)...)...)
}

func generate(n int, seed uint64, gen func(r *rand.Rand) int64) []int64 {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	vs := make([]int64, n)
	for i := range vs {
		vs[i] = gen(r)
	}
	return vs
}

func TestQuantileAccuracy(t *testing.T) {
	const n = 100_000
	const ms = 1_000_000.0
	cases := []struct {
		name string
		gen  func(r *rand.Rand) int64
	}{
		{"uniform", func(r *rand.Rand) int64 { return r.Int64N(10_000_000) }},
		{"exponential", func(r *rand.Rand) int64 { return int64(r.ExpFloat64() * ms) }},
		{"lognormal", func(r *rand.Rand) int64 { return int64(math.Exp(r.NormFloat64()*1.5 + math.Log(100_000))) }},
		{"constant", func(*rand.Rand) int64 { return 12_345 }},
		{"zero", func(*rand.Rand) int64 { return 0 }},
		{"tiny", func(r *rand.Rand) int64 { return r.Int64N(64) }},
		{"bimodal", func(r *rand.Rand) int64 {
			if r.IntN(10) == 0 {
				return int64(20*ms + r.NormFloat64()*ms)
			}
			return int64(50_000 + r.NormFloat64()*5_000)
		}},
		{"log-uniform", func(r *rand.Rand) int64 { return int64(math.Exp2(r.Float64() * 40)) }},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vs := generate(n, uint64(i+1), tc.gen)
			var h hist.Histogram
			var sum int64
			for _, v := range vs {
				h.Record(v)
				sum += v
			}
			slices.Sort(vs)
			s := h.Snapshot()
			require.Equal(t, uint64(n), s.Count())
			require.Equal(t, sum, s.Sum())
			require.Equal(t, vs[0], s.Min())
			require.Equal(t, vs[n-1], s.Max())
			require.Equal(t, vs[0], s.Quantile(0))
			require.Equal(t, vs[n-1], s.Quantile(1))
			for _, q := range quantiles {
				assertWithinBound(t, exactQuantile(vs, q), s.Quantile(q), "q=%v", q)
			}
			p := s.Percentiles()
			assert.Equal(t, s.Quantile(0.5), int64(p.P50))
			assert.Equal(t, s.Quantile(0.9), int64(p.P90))
			assert.Equal(t, s.Quantile(0.99), int64(p.P99))
			assert.Equal(t, s.Quantile(0.999), int64(p.P999))
			assert.Equal(t, vs[n-1], int64(p.Max))
			assert.Equal(t, uint64(n), p.Count)
		})
	}
}

func TestEmpty(t *testing.T) {
	var h hist.Histogram
	s := h.Snapshot()
	assert.Zero(t, s.Count())
	assert.Zero(t, s.Sum())
	assert.Zero(t, s.Mean())
	assert.Zero(t, s.Min())
	assert.Zero(t, s.Max())
	for _, q := range []float64{0, 0.5, 1} {
		assert.Zero(t, s.Quantile(q))
	}
	assert.Equal(t, hist.Percentiles{}, s.Percentiles())
}

func TestQuantileOutOfRange(t *testing.T) {
	var h hist.Histogram
	for v := int64(100); v <= 1000; v += 100 {
		h.Record(v)
	}
	s := h.Snapshot()
	assert.Equal(t, int64(100), s.Quantile(-1))
	assert.Equal(t, int64(100), s.Quantile(math.NaN()))
	assert.Equal(t, int64(1000), s.Quantile(2))
	assert.Equal(t, int64(550), int64(s.Mean()))
}

func TestClamping(t *testing.T) {
	var h hist.Histogram
	h.Record(-5)
	h.Record(math.MinInt64)
	s := h.Snapshot()
	assert.Equal(t, uint64(2), s.Count())
	assert.Zero(t, s.Sum())
	assert.Zero(t, s.Min())
	assert.Zero(t, s.Max())
	assert.Zero(t, s.Quantile(0.5))

	var big hist.Histogram
	const huge = int64(1) << 50
	big.Record(huge)
	big.Record(hist.MaxTrackable + 1)
	s = big.Snapshot()
	assert.Equal(t, huge, s.Max(), "Max keeps the true value")
	assert.Equal(t, huge, s.Quantile(1))
	assert.Equal(t, huge+hist.MaxTrackable+1, s.Sum())
	// Both are in the last bucket, whose values start at 2^40-2^34.
	lastLow := int64(1)<<40 - int64(1)<<34
	for _, q := range []float64{0.1, 0.5, 0.9} {
		got := s.Quantile(q)
		assert.GreaterOrEqual(t, got, lastLow)
		assert.LessOrEqual(t, got, huge)
	}

	var m hist.Histogram
	m.Record(math.MaxInt64)
	assert.Equal(t, int64(math.MaxInt64), m.Snapshot().Quantile(0.5))
}

func record(h *hist.Histogram, vs []int64) {
	for _, v := range vs {
		h.Record(v)
	}
}

func TestMerge(t *testing.T) {
	a := generate(10_000, 7, func(r *rand.Rand) int64 { return r.Int64N(1_000_000) })
	b := generate(5_000, 8, func(r *rand.Rand) int64 { return 500_000 + r.Int64N(50_000_000) })
	var ha, hb, hall hist.Histogram
	record(&ha, a)
	record(&hb, b)
	record(&hall, a)
	record(&hall, b)

	var total hist.Snapshot // zero value is an empty snapshot
	total.Merge(ha.Snapshot())
	require.Equal(t, ha.Snapshot(), total, "merging into an empty snapshot copies")
	total.Merge(hb.Snapshot())
	require.Equal(t, hall.Snapshot(), total)

	total.Merge(hist.Snapshot{})
	require.Equal(t, hall.Snapshot(), total, "merging an empty snapshot is a no-op")

	all := slices.Concat(a, b)
	slices.Sort(all)
	for _, q := range quantiles {
		assertWithinBound(t, exactQuantile(all, q), total.Quantile(q), "q=%v", q)
	}
}

func TestSub(t *testing.T) {
	first := generate(20_000, 9, func(r *rand.Rand) int64 { return r.Int64N(100_000_000) })
	second := generate(10_000, 10, func(r *rand.Rand) int64 { return r.Int64N(1_000_000) })
	var h, only hist.Histogram
	record(&h, first)
	prev := h.Snapshot()
	record(&h, second)
	cur := h.Snapshot()
	record(&only, second)
	want := only.Snapshot()

	d := cur.Sub(prev)
	assert.Equal(t, want.Count(), d.Count())
	assert.Equal(t, want.Sum(), d.Sum())
	assert.Equal(t, want.Mean(), d.Mean())
	assert.LessOrEqual(t, d.Max(), cur.Max(), "Sub's Max never exceeds the newer Max")
	assert.GreaterOrEqual(t, d.Max(), want.Max(), "Sub's Max bounds the interval's from above")
	// A bucket's bounds lie within twice RelativeError of any value in it.
	assert.Less(t, float64(d.Max()-want.Max()), 2*hist.RelativeError*float64(want.Max()),
		"the interval's Max comes from its highest bucket")
	assert.GreaterOrEqual(t, d.Min(), cur.Min(), "Sub's Min is never below the newer Min")
	assert.LessOrEqual(t, d.Min(), want.Min(), "Sub's Min bounds the interval's from below")
	assert.Less(t, float64(want.Min()-d.Min()), 2*hist.RelativeError*float64(want.Min())+1,
		"the interval's Min comes from its lowest bucket")
	for q := 0.01; q < 1; q += 0.01 {
		assert.Equal(t, want.Quantile(q), d.Quantile(q), "q=%v", q)
	}

	empty := cur.Sub(cur)
	assert.Zero(t, empty.Count())
	assert.Zero(t, empty.Sum())
	assert.Zero(t, empty.Max())
	assert.Zero(t, empty.Quantile(0.5))

	// prev not earlier than s: counts saturate at zero instead of wrapping.
	assert.Zero(t, prev.Sub(cur).Count())
}

func TestConcurrentSnapshots(t *testing.T) {
	const n = 200_000
	const readers = 4
	var h hist.Histogram
	var done atomic.Bool
	var wg, started sync.WaitGroup
	started.Add(readers)
	for range readers {
		wg.Go(func() {
			var last hist.Snapshot
			for snaps := 0; !done.Load() || snaps == 0; snaps++ {
				s := h.Snapshot()
				if snaps == 0 {
					started.Done()
				}
				if s.Count() < last.Count() || s.Sum() < last.Sum() {
					t.Errorf("snapshot went backwards: count %d -> %d, sum %d -> %d",
						last.Count(), s.Count(), last.Sum(), s.Sum())
					return
				}
				if s.Count() > 0 && (s.Quantile(0.99) > s.Max() || s.Quantile(0.5) < s.Min()) {
					t.Errorf("quantile outside [Min, Max]")
					return
				}
				last = s
			}
		})
	}
	started.Wait() // make sure the readers overlap with the writes
	var want int64
	for i := range int64(n) {
		v := (i * 7_919) % 5_000_000
		h.Record(v)
		want += v
	}
	done.Store(true)
	wg.Wait()
	s := h.Snapshot()
	require.Equal(t, uint64(n), s.Count())
	require.Equal(t, want, s.Sum())
	require.Equal(t, int64(4_999_728), s.Max())
}

func TestRecordDoesNotAllocate(t *testing.T) {
	var h hist.Histogram
	v := int64(0)
	allocs := testing.AllocsPerRun(1000, func() {
		h.Record(v)
		v = v*7 + 12_345
	})
	assert.Zero(t, allocs)
}

func FuzzRecordQuantile(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte("latency values of all magnitudes!"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var h hist.Histogram
		var vs []int64
		for len(data) >= 8 {
			// The first byte picks a magnitude so small values are common.
			v := int64(binary.LittleEndian.Uint64(data)) >> (data[0] & 63)
			data = data[8:]
			h.Record(v)
			vs = append(vs, max(v, 0))
		}
		s := h.Snapshot()
		if len(vs) == 0 {
			if s.Count() != 0 || s.Quantile(0.5) != 0 {
				t.Fatalf("empty histogram: count %d, p50 %d", s.Count(), s.Quantile(0.5))
			}
			return
		}
		slices.Sort(vs)
		lo, hi := vs[0], vs[len(vs)-1]
		if s.Count() != uint64(len(vs)) || s.Min() != lo || s.Max() != hi {
			t.Fatalf("count/min/max = %d/%d/%d, want %d/%d/%d", s.Count(), s.Min(), s.Max(), len(vs), lo, hi)
		}
		for _, q := range []float64{0, 0.001, 0.25, 0.5, 0.9, 0.99, 0.999, 1} {
			got := s.Quantile(q)
			if got < lo || got > hi {
				t.Fatalf("q=%v: %d outside [%d, %d]", q, got, lo, hi)
			}
			want := exactQuantile(vs, q)
			if want > hist.MaxTrackable {
				continue // clamped into the last bucket: only [Min, Max] holds
			}
			if want < 64 {
				if got != want {
					t.Fatalf("q=%v: got %d, want exact %d", q, got, want)
				}
				continue
			}
			if relErr := math.Abs(float64(got)-float64(want)) / float64(want); relErr >= hist.RelativeError {
				t.Fatalf("q=%v: got %d, want %d (relative error %v)", q, got, want, relErr)
			}
		}
	})
}

func BenchmarkRecord(b *testing.B) {
	vs := generate(1024, 42, func(r *rand.Rand) int64 { return int64(math.Exp(r.NormFloat64()*2 + math.Log(100_000))) })
	var h hist.Histogram
	i := 0
	for b.Loop() {
		h.Record(vs[i&1023])
		i++
	}
}

func BenchmarkSnapshot(b *testing.B) {
	var h hist.Histogram
	record(&h, generate(100_000, 43, func(r *rand.Rand) int64 { return r.Int64N(1 << 30) }))
	for b.Loop() {
		_ = h.Snapshot()
	}
}

func BenchmarkPercentiles(b *testing.B) {
	var h hist.Histogram
	record(&h, generate(100_000, 44, func(r *rand.Rand) int64 { return r.Int64N(1 << 30) }))
	s := h.Snapshot()
	for b.Loop() {
		_ = s.Percentiles()
	}
}
