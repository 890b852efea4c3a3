package shardwheelsdk_test

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/shardwheel/shardwheel"
	"github.com/shardwheel/shardwheel/internal/metrics"
	shardwheelotel "github.com/shardwheel/shardwheel/otel"
	shardwheelsdk "github.com/shardwheel/shardwheel/otel/sdk"
	"github.com/shardwheel/shardwheel/stats"
)

// The Producer is what sdkmetric.WithProducer takes.
var _ sdkmetric.Producer = (*shardwheelsdk.Producer)(nil)

// busy returns a stopped two-shard Scheduler that ran 200 tasks, with
// every distribution populated.
func busy(t *testing.T) *shardwheel.Scheduler {
	t.Helper()
	s, err := shardwheel.New(shardwheel.WithShards(2), shardwheel.WithTick(time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { s.Stop() })
	for k := range uint64(200) {
		_, err := s.AfterFunc(time.Duration(k%7)*time.Millisecond, func() {}, shardwheel.ByKey(k))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return s.Stats().Total.Fired == 200 }, 10*time.Second, time.Millisecond)
	return s
}

// readerOf returns a ManualReader with the Producer, registered with a
// MeterProvider as readers must be.
func readerOf(t *testing.T, p *shardwheelsdk.Producer) *sdkmetric.ManualReader {
	reader := sdkmetric.NewManualReader(sdkmetric.WithProducer(p))
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	return reader
}

// collect returns the metrics of one collection of reader, by scope name
// and metric name.
func collect(t *testing.T, reader sdkmetric.Reader) map[string]map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	out := map[string]map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		out[sm.Scope.Name] = map[string]metricdata.Metrics{}
		for _, m := range sm.Metrics {
			out[sm.Scope.Name][m.Name] = m
		}
	}
	return out
}

// TestProducerHistograms checks each distribution's data points against
// Stats: count, sum, extremes, and buckets, decoded and compared with an
// independent placement of each of our buckets by its upper bound.
func TestProducerHistograms(t *testing.T) {
	s := busy(t)
	before := time.Now()
	p := shardwheelsdk.NewProducer(s)
	s.Stop()
	st := s.Stats()
	got := collect(t, readerOf(t, p))[shardwheelsdk.ScopeName]
	histograms := 0
	for _, m := range metrics.Shard {
		if m.Hist == nil {
			continue
		}
		histograms++
		gm, ok := got[m.OTel]
		require.True(t, ok, m.OTel)
		assert.Equal(t, "s", gm.Unit)
		assert.Equal(t, m.Help, gm.Description)
		data, ok := gm.Data.(metricdata.ExponentialHistogram[float64])
		require.True(t, ok, "%s is %T", m.OTel, gm.Data)
		assert.Equal(t, metricdata.CumulativeTemporality, data.Temporality)
		require.Len(t, data.DataPoints, 2)
		for i, dp := range data.DataPoints {
			h := m.Hist(st.Shards[i])
			assert.Equal(t, attribute.NewSet(attribute.Int("shard", i)), dp.Attributes)
			assert.False(t, dp.StartTime.Before(before), "start time is NewProducer's")
			assert.False(t, dp.Time.Before(dp.StartTime))
			assert.Equal(t, h.Count(), dp.Count, m.OTel)
			assert.Equal(t, h.Sum().Seconds(), dp.Sum, m.OTel)
			assert.EqualValues(t, 5, dp.Scale)
			assert.Zero(t, dp.ZeroThreshold)
			assert.Empty(t, dp.NegativeBucket.Counts)
			if h.Count() > 0 {
				lo, ok := dp.Min.Value()
				require.True(t, ok)
				assert.Equal(t, h.Min().Seconds(), lo)
				hi, ok := dp.Max.Value()
				require.True(t, ok)
				assert.Equal(t, h.Max().Seconds(), hi)
			}
			// OpenTelemetry's bucket j holds (2^(j/32), 2^((j+1)/32)].
			gotBuckets := map[int]uint64{}
			for k, n := range dp.PositiveBucket.Counts {
				if n > 0 {
					gotBuckets[int(dp.PositiveBucket.Offset)+k] = n
				}
			}
			want := map[int]uint64{}
			var zeros uint64
			for b := range h.Buckets() {
				if b.High == 0 {
					zeros += b.Count
					continue
				}
				v := float64(b.High) / 1e9
				j := int(math.Floor(math.Log2(v)*32)) - 1
				for math.Exp2(float64(j+1)/32) < v {
					j++
				}
				want[j] += b.Count
			}
			assert.Equal(t, want, gotBuckets, m.OTel)
			assert.Equal(t, zeros, dp.ZeroCount)
			total := dp.ZeroCount
			for _, n := range dp.PositiveBucket.Counts {
				total += n
			}
			assert.Equal(t, dp.Count, total, "%s: buckets add up to Count", m.OTel)
			if m.Field == "Lateness" {
				assert.NotZero(t, dp.Count, "tasks ran on shard %d", i)
			}
		}
	}
	assert.Len(t, got, histograms, "only the distributions")
}

// TestWithRegister is the documented setup: Register without summaries
// and the Producer on one reader export every metric of the tables once.
func TestWithRegister(t *testing.T) {
	s := busy(t)
	reader := sdkmetric.NewManualReader(sdkmetric.WithProducer(shardwheelsdk.NewProducer(s)))
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = provider.Shutdown(context.Background()) }()
	reg, err := shardwheelotel.Register(s, provider.Meter(shardwheelotel.ScopeName), shardwheelotel.WithoutSummaries())
	require.NoError(t, err)
	defer func() { _ = reg.Unregister() }()

	var names []string
	for _, scope := range collect(t, reader) {
		for name := range scope {
			names = append(names, name)
		}
	}
	var want []string
	for _, m := range metrics.Scheduler {
		want = append(want, m.OTel)
	}
	for _, m := range metrics.Shard {
		want = append(want, m.OTel)
	}
	slices.Sort(names)
	slices.Sort(want)
	assert.Equal(t, want, names)
}

// TestProduceTakesOneSnapshot: one Stats call per collection.
func TestProduceTakesOneSnapshot(t *testing.T) {
	s := busy(t)
	calls := 0
	collect(t, readerOf(t, shardwheelsdk.NewProducerForTest(s, func() stats.Stats { calls++; return s.Stats() })))
	assert.Equal(t, 1, calls)
}

// TestEmptyHistograms: a Scheduler without latency stats produces empty
// data points, with no extremes and no buckets.
func TestEmptyHistograms(t *testing.T) {
	s, err := shardwheel.New(shardwheel.WithShards(1), shardwheel.WithStats(false))
	require.NoError(t, err)
	defer s.Stop()
	sm, err := shardwheelsdk.NewProducer(s).Produce(context.Background())
	require.NoError(t, err)
	require.Len(t, sm, 1)
	require.Len(t, sm[0].Metrics, 4)
	for _, m := range sm[0].Metrics {
		dp := m.Data.(metricdata.ExponentialHistogram[float64]).DataPoints[0]
		assert.Zero(t, dp.Count, m.Name)
		_, ok := dp.Max.Value()
		assert.False(t, ok, m.Name)
		assert.Empty(t, dp.PositiveBucket.Counts, m.Name)
	}
}

// TestNewProducerPanicsOnAZeroScheduler: a programming error panics at
// construction, not in a collection.
func TestNewProducerPanicsOnAZeroScheduler(t *testing.T) {
	for _, s := range []*shardwheel.Scheduler{nil, {}} {
		assert.PanicsWithValue(t, "shardwheelsdk: NewProducer needs a Scheduler made by shardwheel.New", func() { shardwheelsdk.NewProducer(s) })
	}
}

// TestProducerTotalOnly: WithTotalOnly produces one point per
// distribution, Stats.Total's, without the shard attribute.
func TestProducerTotalOnly(t *testing.T) {
	s := busy(t)
	p := shardwheelsdk.NewProducer(s, shardwheelsdk.WithTotalOnly())
	s.Stop()
	st := s.Stats().Total
	got := collect(t, readerOf(t, p))[shardwheelsdk.ScopeName]
	for _, m := range metrics.Shard {
		if m.Hist == nil {
			continue
		}
		data := got[m.OTel].Data.(metricdata.ExponentialHistogram[float64])
		require.Len(t, data.DataPoints, 1, m.OTel)
		dp := data.DataPoints[0]
		assert.Zero(t, dp.Attributes.Len(), m.OTel)
		assert.Equal(t, m.Hist(st).Count(), dp.Count, m.OTel)
		assert.Equal(t, m.Hist(st).Sum().Seconds(), dp.Sum, m.OTel)
	}
}
