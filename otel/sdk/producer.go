// Package shardwheelsdk exports a shardwheel.Scheduler's latency
// distributions to the OpenTelemetry SDK as exponential histograms, with
// their buckets: what the OpenTelemetry API cannot do, having no
// asynchronous histogram instrument. A Producer hands the SDK's readers
// ready-made data, as the SDK's bridges do.
//
//	s, _ := shardwheel.New()
//	reader := sdkmetric.NewPeriodicReader(exporter,
//		sdkmetric.WithProducer(shardwheelsdk.NewProducer(s)))
//	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
//	reg, err := shardwheelotel.Register(s, provider.Meter(shardwheelotel.ScopeName),
//		shardwheelotel.WithoutSummaries())
//
// The Producer exports only the five distributions; Register exports the
// counters and gauges, and WithoutSummaries drops its summaries of the
// distributions, which the histograms replace.
//
// Each distribution (shardwheel.tick.lag, shardwheel.task.lateness,
// shardwheel.pass.duration, shardwheel.pass.task_duration,
// shardwheel.task.duration; unit s) is one exponential histogram data point
// per shard, with the attribute shard (or, WithTotalOnly, one for the whole
// Scheduler, without it), at scale 5: 32 buckets per power of two, bounds
// 2.2% apart. Each bucket of a stats.Histogram (1/32 of a power of two
// of nanoseconds wide) lands whole in the exponential bucket that holds its
// upper bound, so a duration is never shown below its value and at most
// 3.125% above it; durations over 2^40-1ns (18m19s) land at 18m19s. The zero
// bucket (threshold 0) counts the durations that were exactly 0. Count, Sum,
// Min and Max are the Histogram's own, Min and Max exact.
//
// Data from a Producer does not go through the SDK's aggregation: views
// do not apply to it, and it is cumulative whatever temporality the
// exporter asks for. Its start time is when NewProducer was called: make
// the Producer right after the Scheduler, whose counts start at New.
package shardwheelsdk

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/shardwheel/shardwheel"
	"github.com/shardwheel/shardwheel/internal/metrics"
	"github.com/shardwheel/shardwheel/stats"
)

// ScopeName is the instrumentation scope of the Producer's data.
const ScopeName = "github.com/shardwheel/shardwheel/otel/sdk"

// Producer produces a Scheduler's distributions as exponential
// histograms. It implements go.opentelemetry.io/otel/sdk/metric.Producer
// and is safe for concurrent use.
type Producer struct {
	stats func() stats.Stats // the Scheduler's Stats method
	start time.Time
	total bool            // WithTotalOnly
	attrs []attribute.Set // the shard attribute, by index
}

// Option configures NewProducer.
type Option func(*Producer)

// WithTotalOnly produces one data point per distribution, of Stats.Total
// without the shard attribute, instead of one per shard: to go with
// shardwheelotel.Register's option of the same name.
func WithTotalOnly() Option {
	return func(p *Producer) { p.total = true }
}

// NewProducer returns a Producer of s's distributions, to pass to a
// reader with sdkmetric.WithProducer. It panics if s was not made by
// shardwheel.New.
func NewProducer(s *shardwheel.Scheduler, opts ...Option) *Producer {
	if s == nil || s.Shards() == 0 {
		panic("shardwheelsdk: NewProducer needs a Scheduler made by shardwheel.New")
	}
	p := &Producer{stats: s.Stats, start: time.Now()}
	for _, o := range opts {
		o(p)
	}
	for i := range s.Shards() {
		p.attrs = append(p.attrs, attribute.NewSet(attribute.Int("shard", i)))
	}
	return p
}

// Produce returns the distributions of one Stats snapshot. It never
// fails.
func (p *Producer) Produce(context.Context) ([]metricdata.ScopeMetrics, error) {
	st := p.stats()
	now := time.Now()
	var out []metricdata.Metrics
	for _, m := range metrics.Shard {
		if m.Hist == nil {
			continue
		}
		var points []metricdata.ExponentialHistogramDataPoint[float64]
		if p.total {
			points = append(points, p.point(m.Hist(st.Total), *attribute.EmptySet(), now))
		} else {
			for i, sh := range st.Shards {
				points = append(points, p.point(m.Hist(sh), p.attrs[i], now))
			}
		}
		out = append(out, metricdata.Metrics{
			Name:        m.OTel,
			Description: m.Help,
			Unit:        m.Unit,
			Data:        metricdata.ExponentialHistogram[float64]{DataPoints: points, Temporality: metricdata.CumulativeTemporality},
		})
	}
	return []metricdata.ScopeMetrics{{Scope: instrumentation.Scope{Name: ScopeName}, Metrics: out}}, nil
}

// point returns the histogram h as a data point with the attributes
// attrs.
func (p *Producer) point(h stats.Histogram, attrs attribute.Set, now time.Time) metricdata.ExponentialHistogramDataPoint[float64] {
	dp := metricdata.ExponentialHistogramDataPoint[float64]{
		Attributes: attrs,
		StartTime:  p.start,
		Time:       now,
		Count:      h.Count(),
		Sum:        h.Sum().Seconds(),
		Scale:      metrics.NativeScale,
	}
	if h.Count() > 0 {
		dp.Min = metricdata.NewExtrema(h.Min().Seconds())
		dp.Max = metricdata.NewExtrema(h.Max().Seconds())
	}
	zero, buckets := metrics.Native(h.Buckets())
	dp.ZeroCount = zero
	if len(buckets) > 0 {
		first := buckets[0].Index
		counts := make([]uint64, buckets[len(buckets)-1].Index-first+1)
		for _, b := range buckets {
			counts[b.Index-first] = b.Count
		}
		// OpenTelemetry numbers bucket (base^i, base^(i+1)] i, one less
		// than Prometheus, whose numbering metrics.Native uses.
		dp.PositiveBucket = metricdata.ExponentialBucket{Offset: first - 1, Counts: counts}
	}
	return dp
}
