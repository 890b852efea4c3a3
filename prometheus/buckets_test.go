package shardwheelprom_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardwheel/shardwheel"
	"github.com/shardwheel/shardwheel/internal/metrics"
	shardwheelprom "github.com/shardwheel/shardwheel/prometheus"
	"github.com/shardwheel/shardwheel/stats"
)

// TestTickBuckets checks the layout TickBuckets documents, at the ticks
// a Scheduler is usually given: increasing, DecadeBuckets' bounds away
// from the tick, a bound every eighth of a tick from half a tick to two,
// 2.5, 3 and 4 ticks, and one tick plus 1ms.
func TestTickBuckets(t *testing.T) {
	for _, tick := range []time.Duration{time.Millisecond, 2 * time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond, time.Second} {
		b := shardwheelprom.TickBuckets(tick)
		require.True(t, slices.IsSorted(b), "%v", tick)
		require.Equal(t, len(b), len(slices.Compact(slices.Clone(b))), "%v: no bound twice", tick)
		has := func(d time.Duration) bool { return slices.Contains(b, d.Seconds()) }
		for k := time.Duration(4); k <= 16; k++ {
			assert.True(t, has(tick*k/8), "%v: %d/8 tick", tick, k)
		}
		for _, d := range []time.Duration{tick * 5 / 2, 3 * tick, 4 * tick, tick + time.Millisecond} {
			assert.True(t, has(d), "%v: %v", tick, d)
		}
		for _, d := range shardwheelprom.DecadeBuckets {
			if d < tick.Seconds()/2 || d > 4*tick.Seconds() {
				assert.Contains(t, b, d, "%v", tick)
			}
		}
		fine := []float64{(tick * 5 / 2).Seconds(), (3 * tick).Seconds(), (4 * tick).Seconds(), (tick + time.Millisecond).Seconds()}
		for k := time.Duration(4); k <= 16; k++ {
			fine = append(fine, (tick * k / 8).Seconds())
		}
		for _, v := range b {
			if v > tick.Seconds()/2 && v < 4*tick.Seconds() {
				assert.Contains(t, fine, v, "%v: only the fine bounds near the tick", tick)
			}
		}
	}
	assert.Len(t, shardwheelprom.TickBuckets(time.Millisecond), 35, "the package comment's count")
}

// promQuantile is Prometheus's histogram_quantile over classic cumulative
// counts at bounds (the +Inf bucket being total): linear interpolation
// within the bucket that holds the rank, from 0 for the first.
func promQuantile(q float64, bounds []float64, cum []uint64, total uint64) float64 {
	rank := q * float64(total)
	for i, c := range cum {
		if float64(c) >= rank {
			lo, below := 0.0, uint64(0)
			if i > 0 {
				lo, below = bounds[i-1], cum[i-1]
			}
			return lo + (bounds[i]-lo)*(rank-float64(below))/float64(c-below)
		}
	}
	return bounds[len(bounds)-1]
}

// TestTickBucketsQuantileError checks the error the package comment
// states for histogram_quantile on the classic form, on lateness-shaped
// samples at a 1ms tick: with TickBuckets, a quantile between one tick
// and two is within an eighth of a tick of the exact one, plus the
// 3.125% a duration may count above its value; with DecadeBuckets the
// same samples read far higher.
func TestTickBucketsQuantileError(t *testing.T) {
	const tick = time.Millisecond
	r := rand.New(rand.NewPCG(3, 4))
	worstTick, worstDecade := 0.0, 0.0
	for range 20 {
		// Lateness: spread over a tick, Go's timer slack of up to 1ms on
		// top, and a thin tail.
		n := 20000
		ds := make([]time.Duration, n)
		spread := time.Duration(r.Int64N(int64(tick))) + tick/2
		for i := range ds {
			ds[i] = time.Duration(r.Int64N(int64(spread)))
			if i%100 == 0 {
				ds[i] += time.Duration(r.Int64N(int64(tick)))
			}
		}
		slices.Sort(ds)
		var buckets []stats.Bucket
		for _, d := range ds {
			buckets = append(buckets, stats.Bucket{Low: d, High: d, Count: 1})
		}
		for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
			exact := ds[int(math.Ceil(q*float64(n)))-1].Seconds()
			if exact < tick.Seconds() || exact > 2*tick.Seconds() {
				continue
			}
			for _, layout := range []struct {
				bounds []float64
				worst  *float64
			}{{shardwheelprom.TickBuckets(tick), &worstTick}, {shardwheelprom.DecadeBuckets, &worstDecade}} {
				got := promQuantile(q, layout.bounds, metrics.Classic(slices.Values(buckets), layout.bounds), uint64(n))
				*layout.worst = max(*layout.worst, math.Abs(got-exact)/exact)
			}
		}
	}
	assert.Positive(t, worstTick, "some quantile fell between one tick and two")
	assert.LessOrEqual(t, worstTick, 0.125, "TickBuckets: within an eighth of a tick")
	assert.Greater(t, worstDecade, 0.2, "DecadeBuckets are coarse there")
}

// seriesOf counts the series a gathered family holds in the text
// exposition: one per counter or gauge; per histogram one per bound,
// +Inf, _sum and _count.
func seriesOf(mfs []*dto.MetricFamily) (n int) {
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if h := m.GetHistogram(); h != nil {
				n += len(h.GetBucket()) + 3
			} else {
				n++
			}
		}
	}
	return n
}

// TestSeriesCounts checks the package comment's series counts at a 1ms
// tick: per shard with each bucket layout, and with WithTotalOnly.
func TestSeriesCounts(t *testing.T) {
	s := newScenario(t, shardwheel.WithTick(time.Millisecond))
	count := func(opts ...shardwheelprom.Option) int {
		reg := prometheus.NewPedanticRegistry()
		require.NoError(t, reg.Register(shardwheelprom.NewCollector(s, opts...)))
		mfs, err := reg.Gather()
		require.NoError(t, err)
		return seriesOf(mfs)
	}
	scalars := 0
	for _, m := range metrics.Shard {
		if m.Hist == nil {
			scalars++
		}
	}
	assert.Equal(t, 45, scalars)
	assert.Equal(t, 1+2*197, count(), "two shards, the default bounds")
	assert.Equal(t, 1+2*145, count(shardwheelprom.WithBuckets(shardwheelprom.DecadeBuckets...)))
	assert.Equal(t, 1+2*57, count(shardwheelprom.WithBuckets()))
	assert.Equal(t, 198, count(shardwheelprom.WithTotalOnly()))
}

// TestTotalOnly: WithTotalOnly exports each metric once, without the
// shard label, with Stats.Total's value.
func TestTotalOnly(t *testing.T) {
	s := newScenario(t)
	s.Stop()
	st := s.Stats().Total
	mfs := gather(t, s, shardwheelprom.WithTotalOnly())
	assert.Len(t, mfs, len(metrics.Shard)+len(metrics.Scheduler))
	for _, m := range metrics.Shard {
		name := "shardwheel_" + m.Prom
		mf := mfs[name]
		require.NotNil(t, mf, name)
		require.Len(t, mf.GetMetric(), 1, name)
		series := mf.GetMetric()[0]
		assert.Empty(t, series.GetLabel(), name)
		switch {
		case m.Hist != nil:
			assert.Equal(t, m.Hist(st).Count(), series.GetHistogram().GetSampleCount(), name)
			assert.Equal(t, m.Hist(st).Sum().Seconds(), series.GetHistogram().GetSampleSum(), name)
		case m.Seconds != nil:
			assert.Equal(t, m.Seconds(st).Seconds(), series.GetGauge().GetValue(), name)
		case m.Kind == metrics.Counter:
			assert.EqualValues(t, m.Int(st), series.GetCounter().GetValue(), name)
		default:
			assert.EqualValues(t, m.Int(st), series.GetGauge().GetValue(), name)
		}
	}
	assert.EqualValues(t, 3, mfs["shardwheel_timers_fired_total"].GetMetric()[0].GetCounter().GetValue(), "both shards'")
}
