package shardwheelotel

import (
	"context"
	"errors"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/shardwheel/shardwheel"
	"github.com/shardwheel/shardwheel/internal/metrics"
	"github.com/shardwheel/shardwheel/stats"
)

// Quantiles are the quantiles of each distribution's summary, those the
// JSON form of a stats.Histogram reports.
var Quantiles = []float64{0.5, 0.9, 0.99, 0.999}

// Option configures Register.
type Option func(*config)

type config struct {
	summaries bool
	total     bool
}

// WithoutSummaries leaves out the distributions' summary instruments
// (name.count, name.sum and name.quantile): for a program that exports
// the distributions as histograms with the shardwheelsdk Producer.
func WithoutSummaries() Option {
	return func(c *config) { c.summaries = false }
}

// WithTotalOnly reports Stats.Total, without the shard attribute, instead
// of one point per shard: the number of points then does not grow with
// the shards. The per-shard view is lost: which shard was late, and the
// max of a gauge over shards, which Total's peaks and slowest pass
// already are.
func WithTotalOnly() Option {
	return func(c *config) { c.total = true }
}

// observer reports one metric of a Stats snapshot.
type observer func(o metric.Observer, st stats.Stats)

// registrar builds the instruments and the observers of a Register call.
type registrar struct {
	meter       metric.Meter
	total       bool                   // WithTotalOnly
	shards      []metric.ObserveOption // the shard attribute, by index
	instruments []metric.Observable
	observers   []observer
	errs        []error
}

// point is one shard's statistics (or the total's) and the attribute set
// they are reported with; id numbers the points of a collection.
type point struct {
	id    int
	stats stats.Shard
	attrs []metric.ObserveOption
}

// points returns what a collection reports of st: each shard's
// statistics with its shard attribute, or WithTotalOnly the total's
// without one.
func (r *registrar) points(st stats.Stats) []point {
	if r.total {
		return []point{{stats: st.Total}}
	}
	out := make([]point, len(st.Shards))
	for i, sh := range st.Shards {
		out[i] = point{id: i, stats: sh, attrs: []metric.ObserveOption{r.shards[i]}}
	}
	return out
}

// Register creates the instruments of s's statistics (see the package
// comment) on meter and registers one callback that reports them all from
// one Stats snapshot per collection. Unregister the returned Registration
// to stop reporting. It fails if s was not made by shardwheel.New, if
// meter is nil, or if meter fails to create an instrument.
func Register(s *shardwheel.Scheduler, meter metric.Meter, opts ...Option) (metric.Registration, error) {
	return register(s, s.Stats, meter, opts...)
}

// register is Register taking its snapshots from snapshot.
func register(s *shardwheel.Scheduler, snapshot func() stats.Stats, meter metric.Meter, opts ...Option) (metric.Registration, error) {
	if s == nil || s.Shards() == 0 {
		return nil, errors.New("shardwheelotel: Register needs a Scheduler made by shardwheel.New")
	}
	if meter == nil {
		return nil, errors.New("shardwheelotel: Register needs a Meter")
	}
	c := config{summaries: true}
	for _, o := range opts {
		o(&c)
	}
	r := &registrar{meter: meter, total: c.total}
	for i := range s.Shards() {
		r.shards = append(r.shards, metric.WithAttributeSet(attribute.NewSet(attribute.Int("shard", i))))
	}
	for _, m := range metrics.Scheduler {
		r.int64(m.Kind, m.OTel, m.Unit, m.Help, func(o metric.Observer, inst metric.Int64Observable, st stats.Stats) {
			o.ObserveInt64(inst, m.Int(st))
		})
	}
	for _, m := range metrics.Shard {
		switch {
		case m.Int != nil:
			r.int64(m.Kind, m.OTel, m.Unit, m.Help, func(o metric.Observer, inst metric.Int64Observable, st stats.Stats) {
				for _, p := range r.points(st) {
					o.ObserveInt64(inst, m.Int(p.stats), p.attrs...)
				}
			})
		case m.Seconds != nil:
			inst, err := meter.Float64ObservableGauge(m.OTel, metric.WithUnit(m.Unit), metric.WithDescription(m.Help))
			r.add(inst, err, func(o metric.Observer, st stats.Stats) {
				for _, p := range r.points(st) {
					o.ObserveFloat64(inst, m.Seconds(p.stats).Seconds(), p.attrs...)
				}
			})
		case c.summaries:
			r.summary(m)
		}
	}
	if err := errors.Join(r.errs...); err != nil {
		return nil, err
	}
	// Collections by several readers may overlap; one at a time keeps
	// each quantile interval's snapshots in order (Stats never blocks, so
	// the lock is held briefly).
	var mu sync.Mutex
	return meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		mu.Lock()
		defer mu.Unlock()
		st := snapshot()
		for _, obs := range r.observers {
			obs(o, st)
		}
		return nil
	}, r.instruments...)
}

// add keeps an instrument and its observer, or the error creating it.
func (r *registrar) add(inst metric.Observable, err error, obs observer) {
	if err != nil {
		r.errs = append(r.errs, err)
		return
	}
	r.instruments = append(r.instruments, inst)
	r.observers = append(r.observers, obs)
}

// int64 creates the int64 instrument of a count of kind k: a counter, an
// up-down counter for a level, a gauge otherwise.
func (r *registrar) int64(k metrics.Kind, name, unit, help string, observe func(metric.Observer, metric.Int64Observable, stats.Stats)) {
	var (
		inst metric.Int64Observable
		err  error
	)
	switch k {
	case metrics.Counter:
		inst, err = r.meter.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(help))
	case metrics.Level:
		inst, err = r.meter.Int64ObservableUpDownCounter(name, metric.WithUnit(unit), metric.WithDescription(help))
	default:
		inst, err = r.meter.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(help))
	}
	r.add(inst, err, func(o metric.Observer, st stats.Stats) { observe(o, inst, st) })
}

// summary creates the three instruments of a distribution: its count and
// sum since New, which any backend turns into a rate or a mean over any
// window, and gauges of its quantiles over the last interval.
func (r *registrar) summary(m metrics.Metric) {
	r.int64(metrics.Counter, m.OTel+".count", m.Samples, m.Help+" Count of the durations recorded.", func(o metric.Observer, inst metric.Int64Observable, st stats.Stats) {
		for _, p := range r.points(st) {
			o.ObserveInt64(inst, int64(m.Hist(p.stats).Count()), p.attrs...)
		}
	})
	sum, err := r.meter.Float64ObservableCounter(m.OTel+".sum", metric.WithUnit("s"), metric.WithDescription(m.Help+" Sum of the durations recorded."))
	r.add(sum, err, func(o metric.Observer, st stats.Stats) {
		for _, p := range r.points(st) {
			o.ObserveFloat64(sum, m.Hist(p.stats).Sum().Seconds(), p.attrs...)
		}
	})
	q, err := r.meter.Float64ObservableGauge(m.OTel+".quantile", metric.WithUnit("s"), metric.WithDescription(m.Help+" Quantiles of the durations recorded since the previous collection."))
	r.add(q, err, r.quantiles(q, m.Hist))
}

// quantiles returns the observer of a distribution's quantile gauge. A
// quantile of everything since New would barely move after a day of
// samples, so it reports those of the interval since the previous
// collection (Histogram.Sub, which the root package offers for that
// purpose), and nothing for a shard that recorded nothing in it.
func (r *registrar) quantiles(inst metric.Float64Observable, hist func(stats.Shard) stats.Histogram) observer {
	// The quantile attribute, with the shard's or alone, by point id.
	opts := make([][]metric.ObserveOption, max(len(r.shards), 1))
	for i := range opts {
		for _, q := range Quantiles {
			set := attribute.NewSet(attribute.Int("shard", i), attribute.Float64("quantile", q))
			if r.total {
				set = attribute.NewSet(attribute.Float64("quantile", q))
			}
			opts[i] = append(opts[i], metric.WithAttributeSet(set))
		}
	}
	prev := make([]stats.Histogram, len(opts)) // guarded by the callback's lock
	return func(o metric.Observer, st stats.Stats) {
		for _, p := range r.points(st) {
			h := hist(p.stats)
			interval := h.Sub(prev[p.id])
			prev[p.id] = h
			if interval.Count() == 0 {
				continue
			}
			for j, q := range Quantiles {
				o.ObserveFloat64(inst, interval.Quantile(q).Seconds(), opts[p.id][j])
			}
		}
	}
}
