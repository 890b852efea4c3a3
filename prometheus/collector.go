package shardwheelprom

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/shardwheel/shardwheel"
	"github.com/shardwheel/shardwheel/internal/metrics"
	"github.com/shardwheel/shardwheel/stats"
)

// DecadeBuckets are classic upper bounds, in seconds, for a histogram
// that knows nothing of the tick: 1, 2.5 and 5 per decade from 1µs to
// 10s. They are coarse near a 1ms tick (bounds at 1ms and 2.5ms: a p99
// between them may read up to 1.5ms off); TickBuckets, the default, are
// not.
var DecadeBuckets = []float64{
	1e-6, 2.5e-6, 5e-6,
	1e-5, 2.5e-5, 5e-5,
	1e-4, 2.5e-4, 5e-4,
	1e-3, 2.5e-3, 5e-3,
	1e-2, 2.5e-2, 5e-2,
	0.1, 0.25, 0.5,
	1, 2.5, 5,
	10,
}

// TickBuckets returns the classic upper bounds, in seconds, that
// NewCollector uses for a Scheduler of the given tick: DecadeBuckets'
// bounds below half a tick and above four ticks, and in between, where
// lateness and tick lag gather, a bound every eighth of a tick from half
// a tick to two ticks, then 2.5, 3 and 4 ticks, and one tick plus 1ms:
// the limit profiling's diagnosis judges lateness by, so that the share
// of timers over it is one bucket's count. For a 1ms tick that is 35
// bounds (DecadeBuckets has 22). It panics if tick is not positive.
//
// histogram_quantile interpolates linearly within the bucket that holds
// the quantile, so its estimate is off by at most that bucket's width
// (plus the 3.125% our buckets add, see the package comment): within an
// eighth of a tick between half a tick and two ticks, that is 12.5% of a
// value between one tick and two, 25% of one at half a tick.
func TickBuckets(tick time.Duration) []float64 {
	if tick <= 0 {
		panic("shardwheelprom: TickBuckets: tick must be positive, got " + tick.String())
	}
	t := tick.Seconds()
	var out []float64
	for _, b := range DecadeBuckets {
		if b < t/2 || b > 4*t {
			out = append(out, b)
		}
	}
	// In nanoseconds, then seconds: the bounds read as the decimals they
	// are (le="0.001125", not a float's rounding of tick*9/8).
	for k := time.Duration(4); k <= 16; k++ {
		out = append(out, (tick * k / 8).Seconds())
	}
	out = append(out, (tick * 5 / 2).Seconds(), (tick * 3).Seconds(), (tick * 4).Seconds(), (tick + time.Millisecond).Seconds())
	slices.Sort(out)
	return slices.Compact(out)
}

// Option configures a Collector.
type Option func(*config)

type config struct {
	namespace   string
	constLabels prometheus.Labels
	buckets     []float64
	bucketsSet  bool
	total       bool
}

// WithNamespace prefixes every metric name with namespace and an
// underscore: "myapp" gives myapp_shardwheel_timers_fired_total.
func WithNamespace(namespace string) Option {
	return func(c *config) { c.namespace = namespace }
}

// WithConstLabels adds labels with fixed values to every metric: how to
// tell two Schedulers of one process apart, e.g.
// prometheus.Labels{"scheduler": "proxy"}. The label name shard is the
// Collector's own.
func WithConstLabels(labels prometheus.Labels) Option {
	return func(c *config) { c.constLabels = maps.Clone(labels) }
}

// WithBuckets sets the classic histograms' upper bounds, in seconds,
// instead of TickBuckets(s.Tick()): DecadeBuckets, for instance, for
// fewer series. They must be positive, finite and strictly increasing;
// none at all leaves only the +Inf bucket, for a Prometheus that ingests
// the native histograms alone.
func WithBuckets(bounds ...float64) Option {
	return func(c *config) { c.buckets, c.bucketsSet = slices.Clone(bounds), true }
}

// WithTotalOnly exports Stats.Total, without the shard label, instead of
// one series per shard: a Scheduler's series then do not grow with its
// shards (see the package comment for the counts). The per-shard view is
// lost: which shard was late, and the max of a gauge over shards, which
// Total's peaks and slowest pass already are.
func WithTotalOnly() Option {
	return func(c *config) { c.total = true }
}

// Collector is a prometheus.Collector that exports a Scheduler's Stats.
// Each Collect takes one Stats snapshot, so every series of a scrape
// comes from the same snapshot. It is safe for concurrent use.
type Collector struct {
	stats   func() stats.Stats // the Scheduler's Stats method
	buckets []float64
	total   bool               // WithTotalOnly
	shard   []*prometheus.Desc // one per metrics.Shard entry
	sched   []*prometheus.Desc // one per metrics.Scheduler entry
	labels  []string           // shard label values, by index
}

// NewCollector returns a Collector of s's statistics, to register with a
// prometheus.Registerer. Invalid names or labels given as options are
// reported by the registration, as for any Collector. The classic
// histograms' bounds are TickBuckets(s.Tick()) unless WithBuckets says
// otherwise. NewCollector panics if s was not made by shardwheel.New, or
// if WithBuckets gave invalid bounds: both are programming errors, as
// prometheus.NewHistogram treats its buckets.
func NewCollector(s *shardwheel.Scheduler, opts ...Option) *Collector {
	if s == nil || s.Shards() == 0 {
		panic("shardwheelprom: NewCollector needs a Scheduler made by shardwheel.New")
	}
	var c config
	for _, o := range opts {
		o(&c)
	}
	if !c.bucketsSet {
		c.buckets = TickBuckets(s.Tick())
	}
	if err := checkBuckets(c.buckets); err != nil {
		panic("shardwheelprom: WithBuckets: " + err.Error())
	}
	col := &Collector{stats: s.Stats, buckets: c.buckets, total: c.total}
	labels := []string{"shard"}
	if c.total {
		labels = nil
	}
	for _, m := range metrics.Shard {
		col.shard = append(col.shard, newDesc(c, m.Prom, m.Help, m.Unit, labels))
	}
	for _, m := range metrics.Scheduler {
		col.sched = append(col.sched, newDesc(c, m.Prom, m.Help, m.Unit, nil))
	}
	for i := range s.Shards() {
		col.labels = append(col.labels, strconv.Itoa(i))
	}
	return col
}

// newDesc describes a metric, with its unit as OpenMetrics metadata when
// it has one ("seconds": a count's UCUM annotation is not a unit there).
func newDesc(c config, name, help, unit string, labels []string) *prometheus.Desc {
	var opts []prometheus.DescOpt
	if unit == "s" {
		opts = append(opts, prometheus.WithUnit("seconds"))
	}
	fq := prometheus.BuildFQName(c.namespace, "shardwheel", name)
	return prometheus.V2.NewDesc(fq, help, prometheus.UnconstrainedLabels(labels), c.constLabels, opts...)
}

// checkBuckets reports why bounds are not valid classic upper bounds.
func checkBuckets(b []float64) error {
	for i, v := range b {
		switch {
		case v <= 0 || math.IsInf(v, 0) || math.IsNaN(v):
			return fmt.Errorf("bound %v is not a positive finite number of seconds", v)
		case i > 0 && v <= b[i-1]:
			return fmt.Errorf("bounds %v and %v are not strictly increasing", b[i-1], v)
		}
	}
	return nil
}

// Describe sends the descriptors of every metric the Collector exports.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.sched {
		ch <- d
	}
	for _, d := range c.shard {
		ch <- d
	}
}

// Collect takes one Stats snapshot and sends its metrics: the Scheduler's
// without a shard label, then each shard's, or, WithTotalOnly, the total's
// without a label.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	st := c.stats()
	for i, m := range metrics.Scheduler {
		ch <- constMetric(c.sched[i], m.Kind, float64(m.Int(st)))
	}
	if c.total {
		c.collectShard(ch, st.Total)
		return
	}
	for i, sh := range st.Shards {
		c.collectShard(ch, sh, c.labels[i])
	}
}

// collectShard sends the metrics of one shard's statistics (or the
// total's), with the given label values.
func (c *Collector) collectShard(ch chan<- prometheus.Metric, sh stats.Shard, labels ...string) {
	for j, m := range metrics.Shard {
		d := c.shard[j]
		switch {
		case m.Hist != nil:
			ch <- c.histogram(d, m.Hist(sh), labels...)
		case m.Seconds != nil:
			ch <- constMetric(d, m.Kind, m.Seconds(sh).Seconds(), labels...)
		default:
			ch <- constMetric(d, m.Kind, float64(m.Int(sh)), labels...)
		}
	}
}

// constMetric returns a counter or gauge, or, should client_golang reject
// it, an invalid metric that fails the scrape with the reason instead of
// panicking in it.
func constMetric(d *prometheus.Desc, k metrics.Kind, v float64, labels ...string) prometheus.Metric {
	t := prometheus.GaugeValue
	if k == metrics.Counter {
		t = prometheus.CounterValue
	}
	m, err := prometheus.NewConstMetric(d, t, v, labels...)
	if err != nil {
		return prometheus.NewInvalidMetric(d, err)
	}
	return m
}

// histogram returns h as one Prometheus histogram that carries both the
// classic buckets and the native ones (see the package comment).
func (c *Collector) histogram(d *prometheus.Desc, h stats.Histogram, labels ...string) prometheus.Metric {
	count, sum := h.Count(), h.Sum().Seconds()
	cumulative := metrics.Classic(h.Buckets(), c.buckets)
	classic := make(map[float64]uint64, len(c.buckets))
	for i, b := range c.buckets {
		classic[b] = cumulative[i]
	}
	zero, buckets := metrics.Native(h.Buckets())
	native := make(map[int]int64, len(buckets))
	for _, b := range buckets {
		native[int(b.Index)] = int64(b.Count)
	}
	cm, err := prometheus.NewConstHistogram(d, count, sum, classic, labels...)
	if err != nil {
		return prometheus.NewInvalidMetric(d, err)
	}
	// The zero threshold is 0: the zero bucket holds only the durations
	// that were exactly 0. The created timestamp is left zero, for
	// bothHistogram drops it: when the Scheduler started is not known
	// here.
	nm, err := prometheus.NewConstNativeHistogram(d, count, sum, native, nil, zero, metrics.NativeScale, 0, time.Time{}, labels...)
	if err != nil {
		return prometheus.NewInvalidMetric(d, err)
	}
	return bothHistogram{classic: cm, native: nm}
}

// bothHistogram writes the classic and the native form of a histogram as
// one metric, as client_golang's own Histogram does when it has both
// buckets and a native bucket factor: a text scrape shows the classic
// buckets, a protobuf scrape by a Prometheus with native histograms on
// gets the native ones, and one with classic histograms kept gets both.
// client_golang has a constructor for each form alone, none for both.
type bothHistogram struct{ classic, native prometheus.Metric }

// Desc returns the histogram's descriptor.
func (h bothHistogram) Desc() *prometheus.Desc { return h.classic.Desc() }

// Write writes the classic form and adds the native form's fields to it.
func (h bothHistogram) Write(out *dto.Metric) error {
	var n dto.Metric
	if err := errors.Join(h.classic.Write(out), h.native.Write(&n)); err != nil {
		return err
	}
	nh := n.GetHistogram()
	out.Histogram.Schema = nh.Schema
	out.Histogram.ZeroThreshold = nh.ZeroThreshold
	out.Histogram.ZeroCount = nh.ZeroCount
	out.Histogram.PositiveSpan = nh.PositiveSpan
	out.Histogram.PositiveDelta = nh.PositiveDelta
	return nil
}
