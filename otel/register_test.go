package shardwheelotel_test

import (
	"context"
	"os"
	"regexp"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/shardwheel/shardwheel"
	"github.com/shardwheel/shardwheel/internal/metrics"
	shardwheelotel "github.com/shardwheel/shardwheel/otel"
	"github.com/shardwheel/shardwheel/stats"
)

// waitFor bounds every condition a test polls for: generous for the race
// detector on a loaded 2-core machine, and only reached on failure.
const waitFor, pollEvery = 10 * time.Second, time.Millisecond

// keysFor returns n keys that route to shard i of s.
func keysFor(s *shardwheel.Scheduler, i, n int) []uint64 {
	var keys []uint64
	for k := uint64(0); len(keys) < n; k++ {
		if s.ShardOf(k) == i {
			keys = append(keys, k)
		}
	}
	return keys
}

// newScenario returns a two-shard Scheduler in a known state. Shard 0:
// four timers an hour away, one cancelled, one reset, and two immediate
// tasks, one of which panics. Shard 1: three timers an hour away, two
// cancelled, and one immediate task. It returns once Stats shows the
// three tasks run; pending is then 4.
func newScenario(t *testing.T, opts ...shardwheel.Option) *shardwheel.Scheduler {
	t.Helper()
	// One P while the scenario schedules: every timer without a series
	// is filed on shard 0, the shard of P 0, whatever its key (its task
	// runs on its key's shard), so that each shard's counts are known.
	// The series (Every) are filed on their key's shard.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	opts = append([]shardwheel.Option{shardwheel.WithShards(2), shardwheel.WithPanicHandler(func(any) {})}, opts...)
	s, err := shardwheel.New(opts...)
	require.NoError(t, err)
	t.Cleanup(func() { s.Stop() })
	hour := func(shard, n int) []shardwheel.Timer {
		var tms []shardwheel.Timer
		for _, k := range keysFor(s, shard, n) {
			tm, err := s.Every(time.Hour, func() {}, shardwheel.ByKey(k), shardwheel.OnMissed(shardwheel.SkipMissed))
			require.NoError(t, err)
			tms = append(tms, tm)
		}
		return tms
	}
	now := func(key uint64, task func()) {
		_, err := s.AfterFunc(0, task, shardwheel.ByKey(key))
		require.NoError(t, err)
	}
	zero := hour(0, 4)
	require.True(t, zero[0].Cancel())
	require.True(t, zero[1].Reset(2*time.Hour))
	one := hour(1, 3)
	require.True(t, one[0].Cancel())
	require.True(t, one[1].Cancel())
	now(keysFor(s, 0, 1)[0], func() {})
	now(keysFor(s, 0, 1)[0], func() { panic("boom") })
	now(keysFor(s, 1, 1)[0], func() {})
	require.Eventually(t, func() bool {
		st := s.Stats().Total
		return st.Fired == 3 && st.Panics == 1
	}, waitFor, pollEvery)
	require.Equal(t, 4, s.Pending())
	return s
}

// register registers s on the meter of a fresh ManualReader and returns
// the reader; the registration ends with the test.
func register(t *testing.T, s *shardwheel.Scheduler, opts ...shardwheelotel.Option) *sdkmetric.ManualReader {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	reg, err := shardwheelotel.Register(s, provider.Meter(shardwheelotel.ScopeName), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = reg.Unregister() })
	return reader
}

// collect returns the metrics of one collection, by name.
func collect(t *testing.T, reader *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		require.Equal(t, shardwheelotel.ScopeName, sm.Scope.Name)
		for _, m := range sm.Metrics {
			require.NotContains(t, out, m.Name)
			out[m.Name] = m
		}
	}
	return out
}

func shard(i int) attribute.Set { return attribute.NewSet(attribute.Int("shard", i)) }

// sum is the expected data of an int64 counter or up-down counter with
// one value per shard.
func sum(monotonic bool, perShard ...int64) metricdata.Sum[int64] {
	s := metricdata.Sum[int64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: monotonic}
	for i, v := range perShard {
		s.DataPoints = append(s.DataPoints, metricdata.DataPoint[int64]{Attributes: shard(i), Value: v})
	}
	return s
}

// TestKnownValues checks, with the SDK's own comparison, the instruments
// whose values the scenario decides, before and after Stop.
func TestKnownValues(t *testing.T) {
	s := newScenario(t, shardwheel.WithStats(false))
	reader := register(t, s)
	check := func(pending int64, stopped [2]int64) {
		t.Helper()
		got := collect(t, reader)
		want := []metricdata.Metrics{
			{Name: "shardwheel.timer.pending", Unit: "{timer}", Description: "Timers scheduled and not yet fired, cancelled or stopped (Scheduler.Pending).",
				Data: metricdata.Sum[int64]{Temporality: metricdata.CumulativeTemporality, DataPoints: []metricdata.DataPoint[int64]{{Value: pending}}}},
			{Name: "shardwheel.timer.scheduled", Unit: "{timer}", Description: "Timers accepted by AfterFunc and its kin.", Data: sum(true, 7, 3)},
			{Name: "shardwheel.timer.fired", Unit: "{timer}", Description: "Timers fired: their tasks handed to the shard's runner.", Data: sum(true, 3, 0)},
			{Name: "shardwheel.timer.cancelled", Unit: "{timer}", Description: "Cancel calls that returned true, an Index's Cancel and the timers its calls replaced included.", Data: sum(true, 1, 2)},
			{Name: "shardwheel.timer.resets", Unit: "{reset}", Description: "Successful Reset calls.", Data: sum(true, 1, 0)},
			{Name: "shardwheel.timer.stopped", Unit: "{timer}", Description: "Timers claimed by Stop, which never ran.", Data: sum(true, stopped[0], stopped[1])},
			{Name: "shardwheel.task.panics", Unit: "{panic}", Description: "Tasks that panicked or called runtime.Goexit.", Data: sum(true, 1, 0)},
			{Name: "shardwheel.task.lateness.count", Unit: "{task}", Description: "How late tasks started versus their deadline rounded up to the tick grid. Count of the durations recorded.", Data: sum(true, 0, 0)},
		}
		for _, w := range want {
			metricdatatest.AssertEqual(t, w, got[w.Name], metricdatatest.IgnoreTimestamp())
		}
		assert.NotContains(t, got, "shardwheel.task.lateness.quantile", "no samples, no quantile points")
	}
	check(4, [2]int64{0, 0})
	require.Len(t, s.Stop(), 4)
	check(0, [2]int64{3, 1})
}

// TestEveryInstrument checks every instrument of the tables in a
// collection of a stopped Scheduler (whose Stats no longer move): its
// kind, unit, description, attributes, and value against Stats.
func TestEveryInstrument(t *testing.T) {
	s := newScenario(t)
	s.Stop()
	st := s.Stats()
	got := collect(t, register(t, s))
	want := 0

	for _, m := range metrics.Scheduler {
		want++
		metricdatatest.AssertEqual(t, metricdata.Metrics{Name: m.OTel, Unit: m.Unit, Description: m.Help,
			Data: metricdata.Sum[int64]{Temporality: metricdata.CumulativeTemporality, DataPoints: []metricdata.DataPoint[int64]{{Value: m.Int(st)}}}},
			got[m.OTel], metricdatatest.IgnoreTimestamp())
	}
	for _, m := range metrics.Shard {
		perShard := func(f func(stats.Shard) int64) []int64 {
			var v []int64
			for _, sh := range st.Shards {
				v = append(v, f(sh))
			}
			return v
		}
		var exp []metricdata.Metrics
		switch {
		case m.Kind == metrics.Counter:
			exp = append(exp, metricdata.Metrics{Name: m.OTel, Unit: m.Unit, Description: m.Help, Data: sum(true, perShard(m.Int)...)})
		case m.Kind == metrics.Level:
			exp = append(exp, metricdata.Metrics{Name: m.OTel, Unit: m.Unit, Description: m.Help, Data: sum(false, perShard(m.Int)...)})
		case m.Int != nil:
			g := metricdata.Gauge[int64]{}
			for i, v := range perShard(m.Int) {
				g.DataPoints = append(g.DataPoints, metricdata.DataPoint[int64]{Attributes: shard(i), Value: v})
			}
			exp = append(exp, metricdata.Metrics{Name: m.OTel, Unit: m.Unit, Description: m.Help, Data: g})
		case m.Seconds != nil:
			g := metricdata.Gauge[float64]{}
			for i, sh := range st.Shards {
				g.DataPoints = append(g.DataPoints, metricdata.DataPoint[float64]{Attributes: shard(i), Value: m.Seconds(sh).Seconds()})
			}
			exp = append(exp, metricdata.Metrics{Name: m.OTel, Unit: m.Unit, Description: m.Help, Data: g})
		default:
			sums := metricdata.Sum[float64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: true}
			quantiles := metricdata.Gauge[float64]{}
			for i, sh := range st.Shards {
				h := m.Hist(sh)
				sums.DataPoints = append(sums.DataPoints, metricdata.DataPoint[float64]{Attributes: shard(i), Value: h.Sum().Seconds()})
				if h.Count() == 0 {
					continue
				}
				for _, q := range shardwheelotel.Quantiles {
					quantiles.DataPoints = append(quantiles.DataPoints, metricdata.DataPoint[float64]{
						Attributes: attribute.NewSet(attribute.Int("shard", i), attribute.Float64("quantile", q)),
						Value:      h.Quantile(q).Seconds(), // the first interval is everything since New
					})
				}
			}
			if len(quantiles.DataPoints) > 0 { // else the SDK reports no metric
				exp = append(exp, metricdata.Metrics{Name: m.OTel + ".quantile", Unit: "s", Description: m.Help + " Quantiles of the durations recorded since the previous collection.", Data: quantiles})
			}
			exp = append(exp,
				metricdata.Metrics{Name: m.OTel + ".count", Unit: m.Samples, Description: m.Help + " Count of the durations recorded.", Data: sum(true, perShard(func(sh stats.Shard) int64 { return int64(m.Hist(sh).Count()) })...)},
				metricdata.Metrics{Name: m.OTel + ".sum", Unit: "s", Description: m.Help + " Sum of the durations recorded.", Data: sums},
			)
			if m.Field == "PassTime" {
				require.NotEmpty(t, quantiles.DataPoints, "passes ran")
			}
		}
		for _, e := range exp {
			want++
			metricdatatest.AssertEqual(t, e, got[e.Name], metricdatatest.IgnoreTimestamp())
		}
	}
	assert.Len(t, got, want, "no instrument beyond the tables")
}

// TestQuantilesCoverTheInterval: each collection's quantiles are those of
// the durations recorded since the previous one, and a collection after
// which nothing was recorded reports none.
func TestQuantilesCoverTheInterval(t *testing.T) {
	s := newScenario(t, shardwheel.WithTick(time.Millisecond))
	reader := register(t, s)
	// Lateness is recorded once a pass's tasks have run.
	require.Eventually(t, func() bool { return s.Stats().Total.Lateness.Count() == 3 }, waitFor, pollEvery)
	first := s.Stats() // taken before the collection: Fired still 3
	collect(t, reader)
	for k := range uint64(100) {
		_, err := s.AfterFunc(time.Duration(k%5)*time.Millisecond, func() {}, shardwheel.ByKey(k))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return s.Stats().Total.Fired == 103 }, waitFor, pollEvery)
	s.Stop()
	second := s.Stats()
	got := collect(t, reader)["shardwheel.task.lateness.quantile"].Data.(metricdata.Gauge[float64])
	want := metricdata.Gauge[float64]{}
	for i := range second.Shards {
		interval := second.Shards[i].Lateness.Sub(first.Shards[i].Lateness)
		require.NotZero(t, interval.Count(), "shard %d ran tasks in the interval", i)
		for _, q := range shardwheelotel.Quantiles {
			want.DataPoints = append(want.DataPoints, metricdata.DataPoint[float64]{
				Attributes: attribute.NewSet(attribute.Int("shard", i), attribute.Float64("quantile", q)),
				Value:      interval.Quantile(q).Seconds(),
			})
		}
	}
	metricdatatest.AssertAggregationsEqual(t, want, got, metricdatatest.IgnoreTimestamp())

	// Stopped: the next interval is empty.
	_, ok := collect(t, reader)["shardwheel.task.lateness.quantile"]
	assert.False(t, ok, "an empty interval reports no quantile")
}

// TestWithoutSummaries leaves out exactly the summary instruments.
func TestWithoutSummaries(t *testing.T) {
	s := newScenario(t, shardwheel.WithStats(false))
	all := collect(t, register(t, s))
	some := collect(t, register(t, s, shardwheelotel.WithoutSummaries()))
	for name := range all {
		summary := regexp.MustCompile(`\.(count|sum|quantile)$`).MatchString(name)
		_, kept := some[name]
		assert.Equal(t, !summary, kept, name)
	}
	// Four distributions: count and sum each; without samples (WithStats
	// false) the quantile gauges have no point, and the SDK no metric.
	assert.Len(t, all, len(some)+2*4)
}

// TestOneSnapshotPerCollection: the callback calls Stats once.
func TestOneSnapshotPerCollection(t *testing.T) {
	s := newScenario(t, shardwheel.WithStats(false))
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = provider.Shutdown(context.Background()) }()
	calls := 0
	reg, err := shardwheelotel.RegisterForTest(s, func() stats.Stats { calls++; return s.Stats() }, provider.Meter(shardwheelotel.ScopeName))
	require.NoError(t, err)
	collect(t, reader)
	assert.Equal(t, 1, calls)
	collect(t, reader)
	assert.Equal(t, 2, calls)

	// Unregistered, the callback is no longer called.
	require.NoError(t, reg.Unregister())
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	assert.Equal(t, 2, calls)
}

// TestRegisterRejectsAZeroScheduler: a Scheduler not made by New, or no
// Meter, is an error, not a panic in a collection.
func TestRegisterRejectsAZeroScheduler(t *testing.T) {
	meter := sdkmetric.NewMeterProvider().Meter("test")
	for _, s := range []*shardwheel.Scheduler{nil, {}} {
		_, err := shardwheelotel.Register(s, meter)
		assert.EqualError(t, err, "shardwheelotel: Register needs a Scheduler made by shardwheel.New")
	}
	_, err := shardwheelotel.Register(newScenario(t, shardwheel.WithStats(false)), nil)
	assert.EqualError(t, err, "shardwheelotel: Register needs a Meter")
}

// tableRow is a row of the package comment's instrument table.
var tableRow = regexp.MustCompile(`(?m)^//\t(\S+)(?: \((?:Stats|its length)\))?\s+(shardwheel\.\S+)\s+(Int64Observable\w+|Float64Observable\w+|distribution, see below)\s+(\S+)$`)

// TestDocTable keeps the package comment's table true.
func TestDocTable(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	rows := map[string][]string{}
	for _, r := range tableRow.FindAllStringSubmatch(string(doc), -1) {
		rows[r[2]] = r
	}
	assert.Len(t, rows, len(metrics.Shard)+len(metrics.Scheduler))
	kinds := map[metrics.Kind]string{metrics.Counter: "Int64ObservableCounter", metrics.Level: "Int64ObservableUpDownCounter", metrics.Gauge: "Int64ObservableGauge", metrics.Distribution: "distribution, see below"}
	for _, m := range metrics.Scheduler {
		require.Contains(t, rows, m.OTel)
		assert.Equal(t, []string{m.Field, m.OTel, kinds[m.Kind], m.Unit}, rows[m.OTel][1:])
	}
	for _, m := range metrics.Shard {
		kind := kinds[m.Kind]
		if m.Seconds != nil {
			kind = "Float64ObservableGauge"
		}
		require.Contains(t, rows, m.OTel)
		assert.Equal(t, []string{m.Field, m.OTel, kind, m.Unit}, rows[m.OTel][1:])
	}
}

// TestTotalOnly: WithTotalOnly reports each instrument once, without the
// shard attribute, with Stats.Total's value; the quantiles carry the
// quantile attribute alone.
func TestTotalOnly(t *testing.T) {
	s := newScenario(t)
	s.Stop()
	st := s.Stats().Total
	got := collect(t, register(t, s, shardwheelotel.WithTotalOnly()))
	for _, m := range metrics.Shard {
		switch {
		case m.Kind == metrics.Counter || m.Kind == metrics.Level:
			dps := got[m.OTel].Data.(metricdata.Sum[int64]).DataPoints
			require.Len(t, dps, 1, m.OTel)
			assert.Zero(t, dps[0].Attributes.Len(), m.OTel)
			assert.Equal(t, m.Int(st), dps[0].Value, m.OTel)
		case m.Int != nil:
			dps := got[m.OTel].Data.(metricdata.Gauge[int64]).DataPoints
			require.Len(t, dps, 1, m.OTel)
			assert.Zero(t, dps[0].Attributes.Len(), m.OTel)
			assert.Equal(t, m.Int(st), dps[0].Value, m.OTel)
		case m.Seconds != nil:
			dps := got[m.OTel].Data.(metricdata.Gauge[float64]).DataPoints
			require.Len(t, dps, 1, m.OTel)
			assert.Equal(t, m.Seconds(st).Seconds(), dps[0].Value, m.OTel)
		default:
			count := got[m.OTel+".count"].Data.(metricdata.Sum[int64]).DataPoints
			require.Len(t, count, 1, m.OTel)
			assert.EqualValues(t, m.Hist(st).Count(), count[0].Value, m.OTel)
			if m.Hist(st).Count() == 0 {
				continue
			}
			q := got[m.OTel+".quantile"].Data.(metricdata.Gauge[float64]).DataPoints
			require.Len(t, q, len(shardwheelotel.Quantiles), m.OTel)
			for _, dp := range q {
				assert.Equal(t, 1, dp.Attributes.Len(), "%s: the quantile alone", m.OTel)
			}
		}
	}
	assert.EqualValues(t, 3, got["shardwheel.timer.fired"].Data.(metricdata.Sum[int64]).DataPoints[0].Value, "both shards'")
}
